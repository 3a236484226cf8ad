"""PaliGemma's inputs as transformers 5's `PaliGemmaProcessor` makes them (PIL backend), read from
a checkpoint's own files (docs/models.md §8).

Tokenizer (`open_tokenizer`): `tokenizer.json` first, through the `tokenizers` library (the Rust
tokenizer HF's `GemmaTokenizer` runs, its added tokens included); only where a folder has none,
the SentencePiece `tokenizer.model` through `sentencepiece`, with the added tokens HF would match
in the text first (the model's control pieces, the special tokens and `added_tokens_decoder` of
a `tokenizer_config.json` beside it) and HF's byte-fallback decoding. Either way `<image>` and
the 1,024 `<locNNNN>` + 128 `<segNNN>` tokens are added where absent, in the processor's order
(`<image>` first), at the ids the processor gives them. Text is encoded without special tokens
(the processor turns HF's BOS / EOS templates off) and decoded with the special tokens dropped
and spaces not cleaned up.

Prompt (`Processor.prompt`): `num_image_tokens` x `<image>`, `<bos>`, then prefix + "\\n" encoded
as one text (BPE merges across the join, as HF's one string), token type 0; the suffix + `<eos>`
(training only), type 1; `labels` are the ids with -100 on type 0 (HF's, suffix or not). A
prefix that starts with `<image>` (HF's explicit form) is the same input; an `<image>` elsewhere
is refused (one image per example). `pad` pads on the left, as HF's GemmaTokenizer does.

Pixels (`Processor.pixels`): RGB with transparency on white (chartjax.data.images.to_rgb, which
also scales 16-bit grey by its bit depth where HF's convert("RGB") clips), PIL's resize to the
processor's size with its resample filter, `x * rescale_factor` in float64 cast to float32, then
`(x - mean) / std` in float32: the PIL backend's arithmetic, in chartjax's NHWC layout. The
settings come from `processor_config.json` (transformers 5: under "image_processor") or
`preprocessor_config.json`, else SiglipImageProcessor's defaults.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

import numpy as np

TOKENIZER_JSON, TOKENIZER_MODEL = "tokenizer.json", "tokenizer.model"
TOKENIZER_CONFIG = "tokenizer_config.json"
PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")
IMAGE = "<image>"
EXTRA = tuple(f"<loc{i:04d}>" for i in range(1024)) + tuple(f"<seg{i:03d}>" for i in range(128))
SPECIAL_NAMES = {"bos": "<bos>", "eos": "<eos>", "pad": "<pad>"}  # Gemma's
_GEMMA_SPECIAL = {**SPECIAL_NAMES, "unk": "<unk>", "mask": "<mask>"}
IGNORE = -100  # labels of the image and prefix tokens (HF's ignore index)


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            out = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: invalid JSON ({e})") from None
    if not isinstance(out, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return out


# ------------------------------------------------------------------------ tokenizers --------


class JsonTokenizer:
    """tokenizer.json through the `tokenizers` library."""

    def __init__(self, path: str):
        from tokenizers import AddedToken, Tokenizer

        try:
            tok = Tokenizer.from_file(path)
        except Exception as e:  # the Rust side raises plain Exceptions
            raise ValueError(f"{path}: not a tokenizer.json ({e})") from None
        tok.no_truncation()
        tok.no_padding()
        if tok.token_to_id(IMAGE) is None:
            tok.add_special_tokens([AddedToken(IMAGE, normalized=False, special=True)])
        tok.add_tokens([t for t in EXTRA if tok.token_to_id(t) is None])
        self.where, self._tok = path, tok

    def __getstate__(self):  # loader workers are spawned: the tokenizer travels as JSON
        return {"where": self.where, "json": self._tok.to_str()}

    def __setstate__(self, state):
        from tokenizers import Tokenizer

        self.where, self._tok = state["where"], Tokenizer.from_str(state["json"])

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=True)

    def id_of(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def __len__(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)


class SentencePieceTokenizer:
    """tokenizer.model through `sentencepiece`. HF's added tokens (the control pieces, the
    special tokens tokenizer_config.json names, its `added_tokens_decoder`) are matched in the
    text first (leftmost, longest), as HF's added-token splitting does; decoding drops the
    special ones and, as HF's ByteFallback decoder, writes a run of byte pieces that is not valid
    UTF-8 as one U+FFFD per byte."""

    def __init__(self, path: str):
        with open(path, "rb") as f:
            self._proto = f.read()
        self.where = path
        sp = self._sp
        n = sp.get_piece_size()
        added = {sp.id_to_piece(i): i for i in range(n) if sp.is_control(i) or sp.is_unknown(i)}
        special = set(added)
        cfg = os.path.join(os.path.dirname(path), TOKENIZER_CONFIG)
        raw = _read_json(cfg) if os.path.isfile(cfg) else {}
        named = [raw.get(f"{k}_token", v) for k, v in _GEMMA_SPECIAL.items()]
        named += raw.get("additional_special_tokens") or raw.get("extra_special_tokens") or []
        for token in (t.get("content") if isinstance(t, dict) else t for t in named):
            if isinstance(token, str) and sp.piece_to_id(token) != sp.unk_id():
                added[token] = sp.piece_to_id(token)
                special.add(token)
        for k, v in (raw.get("added_tokens_decoder") or {}).items():
            added[v["content"]] = int(k)
            if v.get("special"):
                special.add(v["content"])
        for token in (IMAGE, *EXTRA):  # where PaliGemmaProcessor adds them
            if token not in added and sp.piece_to_id(token) == sp.unk_id():
                added[token] = max(n - 1, *added.values()) + 1
                if token == IMAGE:
                    special.add(token)
        self._added = added
        self._content = {i: t for t, i in added.items()}
        self._special = {added[t] for t in special}
        self._split = re.compile("|".join(re.escape(t) for t in sorted(added, key=len)[::-1]))

    @property
    def _sp(self):
        sp = self.__dict__.get("_sp_proc")
        if sp is None:
            import sentencepiece as spm

            sp = self.__dict__["_sp_proc"] = spm.SentencePieceProcessor(model_proto=self._proto)
        return sp

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_sp_proc"}

    def encode(self, text: str) -> list[int]:
        ids, at = [], 0
        for m in self._split.finditer(text):
            if m.start() > at:
                ids += self._sp.encode(text[at : m.start()])
            ids.append(self._added[m.group()])
            at = m.end()
        return ids + (self._sp.encode(text[at:]) if at < len(text) else [])

    def decode(self, ids) -> str:
        out, pieces, raw = [], [], bytearray()

        def flush():
            if raw:
                try:
                    out.append(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    out.append("\ufffd" * len(raw))
                raw.clear()
            if pieces:
                text = self._sp.decode(pieces)
                # SentencePiece drops a run's leading space where the model adds a dummy
                # prefix; only the text's own start has one ("18-24 | 61.3" came back
                # "18-24 |61.3" after the byte piece "|", which no table parser splits).
                lost = self._sp.id_to_piece(pieces[0]).startswith("\u2581")
                if out and lost and not text.startswith(" "):
                    text = " " + text
                out.append(text)
                pieces.clear()

        for i in (int(i) for i in ids if int(i) not in self._special):
            if i in self._content:
                flush()
                out.append(self._content[i])
            elif self._sp.is_byte(i):
                if pieces:
                    flush()
                raw.append(int(self._sp.id_to_piece(i)[3:5], 16))  # "<0xAB>"
            else:
                if raw:
                    flush()
                pieces.append(i)
        flush()
        return "".join(out)

    def id_of(self, token: str) -> int | None:
        if token in self._added:
            return self._added[token]
        i = self._sp.piece_to_id(token)
        return None if i == self._sp.unk_id() and token != self._sp.id_to_piece(i) else i

    def __len__(self) -> int:
        return max(self._sp.get_piece_size() - 1, *self._added.values()) + 1


def open_tokenizer(path: str):
    """The tokenizer of `path`: a checkpoint folder (tokenizer.json, else tokenizer.model) or
    one of those files."""
    if os.path.isdir(path):
        for name in (TOKENIZER_JSON, TOKENIZER_MODEL):
            if os.path.isfile(os.path.join(path, name)):
                return open_tokenizer(os.path.join(path, name))
        raise FileNotFoundError(f"{path}: no {TOKENIZER_JSON} or {TOKENIZER_MODEL}")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"tokenizer not found: {path}")
    if path.endswith(".json"):
        return JsonTokenizer(path)
    return SentencePieceTokenizer(path)


# ------------------------------------------------------------------------ images ------------


@dataclasses.dataclass(frozen=True)
class ImageSettings:
    """SiglipImageProcessor's fields (its defaults but the size, which is the model's)."""

    size: tuple[int, int] = (224, 224)  # (height, width)
    resample: int = 3  # PIL's BICUBIC
    do_resize: bool = True
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True
    image_mean: tuple[float, ...] = (0.5, 0.5, 0.5)
    image_std: tuple[float, ...] = (0.5, 0.5, 0.5)
    do_convert_rgb: bool = True
    image_seq_length: int | None = None


_REFUSED = {"do_center_crop": True, "do_pad": True}  # steps SigLIP never takes


def image_settings(folders, image_size: int) -> tuple[ImageSettings, str]:
    """The image settings of the first processor file in `folders` (and the file), else the
    defaults at the model's `image_size`."""
    for path in (os.path.join(d, n) for d in folders if d for n in PROCESSOR_FILES):
        if os.path.isfile(path):
            raw = _read_json(path)
            raw = raw.get("image_processor", raw)
            for key, bad in _REFUSED.items():
                if raw.get(key) == bad:
                    raise ValueError(f"{path}: {key}={bad} is not supported (SigLIP's is not)")
            fields = {f.name for f in dataclasses.fields(ImageSettings)}
            kept = {k: v for k, v in raw.items() if k in fields and v is not None}
            size = raw.get("size") or {}
            kept["size"] = (size.get("height", image_size), size.get("width", image_size))
            for k in ("image_mean", "image_std"):
                if k in kept:
                    v = kept[k]
                    kept[k] = tuple(v) if isinstance(v, list | tuple) else (float(v),) * 3
            return ImageSettings(**kept), path
    return ImageSettings(size=(image_size, image_size)), ""


def pixels(image, s: ImageSettings) -> np.ndarray:
    """float32 `[H, W, 3]`: a PIL image or a uint8 `[H, W(, C)]` array as the PIL backend
    makes it (see the module docstring)."""
    from PIL import Image

    from chartjax.data import images

    if isinstance(image, np.ndarray):
        image = Image.fromarray(image[..., 0] if image.ndim == 3 and image.shape[2] == 1 else image)
    if s.do_convert_rgb:
        image = images.to_rgb(image)
    if s.do_resize:
        h, w = s.size
        image = image.resize((w, h), resample=Image.Resampling(s.resample))
    x = np.asarray(image)
    if x.ndim == 2:
        x = x[..., None]
    if s.do_rescale:
        x = (x.astype(np.float64) * s.rescale_factor).astype(np.float32)
    if s.do_normalize:
        x = x if np.issubdtype(x.dtype, np.floating) else x.astype(np.float32)
        mean, std = (np.asarray(v, x.dtype) for v in (s.image_mean, s.image_std))
        x = (x - mean) / std
    return np.asarray(x, np.float32)


# ------------------------------------------------------------------------ the processor -----


class Processor:
    """A checkpoint's tokenizer and image settings, laid out for a model with
    `num_image_tokens` image tokens (see the module docstring)."""

    def __init__(self, tokenizer, images: ImageSettings, num_image_tokens: int, specials: dict):
        self.tokenizer, self.images, self.num_image_tokens = tokenizer, images, num_image_tokens
        ids = {}
        for name, token in specials.items():
            ids[name] = tokenizer.id_of(token)
            if ids[name] is None:
                raise ValueError(f"{tokenizer.where}: no {name} token {token!r}")
        self.bos_id, self.eos_id, self.pad_id = ids["bos"], ids["eos"], ids["pad"]
        self.image_token_id = tokenizer.id_of(IMAGE)

    @classmethod
    def from_dir(cls, tokenizer_path: str, *, image_size: int, num_image_tokens: int,
                 processor_dir: str | None = None) -> Processor:  # fmt: skip
        """The processor of `tokenizer_path` (a folder or a tokenizer file); the image settings
        of the tokenizer's folder's processor file, else `processor_dir`'s (the checkpoint's).
        Refuses a processor file whose image tokens are not the model's."""
        folder = (
            tokenizer_path if os.path.isdir(tokenizer_path) else os.path.dirname(tokenizer_path)
        )
        tok = open_tokenizer(tokenizer_path)
        images, where = image_settings((folder, processor_dir), image_size)
        if images.do_resize and images.size != (image_size, image_size):
            raise ValueError(
                f"{where}: images resized to {images.size}, the model's are "
                f"{image_size}x{image_size}"
            )
        if images.image_seq_length not in (None, num_image_tokens):
            raise ValueError(
                f"{where}: image_seq_length {images.image_seq_length} but the model makes "
                f"{num_image_tokens} image tokens"
            )
        return cls(tok, images, num_image_tokens, _specials(folder))

    @classmethod
    def for_training(cls, tokenizer_path: str, image_size: int | None = None) -> Processor:
        """The processor a training task featurizes with, before any model exists: the
        tokenizer of `tokenizer_path` (a checkpoint folder or a tokenizer file) and the image
        settings of its folder's processor file, images resized to `image_size` when given (else
        to the file's size; a folder without one: its config.json's vision_config.image_size,
        else 224). The image tokens are the model's to add (`models.paligemma.with_image_tokens`),
        so `num_image_tokens` stays 0 here."""
        path = os.path.expanduser(tokenizer_path)
        folder = path if os.path.isdir(path) else os.path.dirname(path)
        images, where = image_settings((folder,), image_size or _config_image_size(folder))
        if images.size[0] != images.size[1]:
            raise ValueError(f"{where}: images resized to {images.size}, not square")
        if image_size is not None and images.size != (image_size, image_size):
            images = dataclasses.replace(
                images, size=(image_size, image_size), image_seq_length=None
            )
        return cls(open_tokenizer(path), images, 0, _specials(folder))

    def text(self, prefix: str) -> list[int]:
        """`<bos>` + prefix + "\\n" (the image tokens go before it)."""
        if prefix.startswith(IMAGE):
            prefix = prefix[len(IMAGE) :]  # HF's explicit form of the same input
        if IMAGE in prefix:
            raise ValueError(f"the prompt holds {IMAGE} past its start (one image per example)")
        return [self.bos_id, *self.tokenizer.encode(prefix + "\n")]

    def prompt(self, prefix: str, suffix: str | None = None) -> dict[str, np.ndarray]:
        """`input_ids`, `token_type_ids`, `attention_mask` and `labels` (all -100 without a
        suffix, as HF's) of one example, unpadded, int32."""
        ids = [self.image_token_id] * self.num_image_tokens + self.text(prefix)
        types = [0] * len(ids)
        if suffix is not None:
            tail = [*self.tokenizer.encode(suffix), self.eos_id]
            ids, types = ids + tail, types + [1] * len(tail)
        out = {
            "input_ids": np.asarray(ids, np.int32),
            "token_type_ids": np.asarray(types, np.int32),
            "attention_mask": np.ones(len(ids), np.int32),
        }
        out["labels"] = np.where(out["token_type_ids"] == 0, IGNORE, out["input_ids"])
        return out

    def pixels(self, image) -> np.ndarray:
        return pixels(image, self.images)

    def decode(self, ids) -> str:
        """The text of generated ids, up to the first `<eos>`."""
        ids = [int(i) for i in ids]
        if self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        return self.tokenizer.decode(ids)

    def pad(self, rows: list[dict], length: int | None = None) -> dict[str, np.ndarray]:
        """Rows of `prompt` stacked, padded on the left to `length` (default: the longest):
        `input_ids` with `<pad>`, the mask and types with 0, `labels` with -100."""
        length = length or max(len(r["input_ids"]) for r in rows)
        fill = {"input_ids": self.pad_id, "labels": IGNORE}
        out = {}
        for key in rows[0]:
            cols = []
            for r in rows:
                n = length - len(r[key])
                if n < 0:
                    raise ValueError(f"a row of {len(r[key])} tokens is longer than {length}")
                cols.append(np.concatenate([np.full(n, fill.get(key, 0), np.int32), r[key]]))
            out[key] = np.stack(cols).astype(np.int32)
        return out


def _config_image_size(folder: str) -> int:
    """`vision_config.image_size` of a checkpoint folder's config.json, else SigLIP's 224."""
    path = os.path.join(folder, "config.json")
    size = (
        (_read_json(path).get("vision_config") or {}).get("image_size")
        if os.path.isfile(path)
        else None
    )
    return size if isinstance(size, int) and size > 0 else 224


def _specials(folder: str) -> dict[str, str]:
    """The BOS / EOS / PAD tokens a tokenizer_config.json names (default: Gemma's)."""
    names = dict(SPECIAL_NAMES)
    cfg = os.path.join(folder, TOKENIZER_CONFIG)
    if os.path.isfile(cfg):
        raw = _read_json(cfg)
        for name in names:
            value = raw.get(f"{name}_token")
            value = value.get("content") if isinstance(value, dict) else value
            if isinstance(value, str):
                names[name] = value
    return names
