"""BART's byte-level BPE vocabulary, read from a checkpoint's own files by the `tokenizers` library.

A checkpoint directory (or file) holds either `tokenizer.json` (the whole pipeline, as HF saves
it) or `vocab.json` + `merges.txt` (GPT-2 style files), which are assembled exactly as
transformers 5's `RobertaTokenizer` (= `BartTokenizer`) does: a BPE model over the GPT-2 byte
alphabet, `ByteLevel(add_prefix_space=False)` pre-tokenizer and decoder, the special tokens
`<s> <pad> </s> <unk> <mask>` (with the lstrip/rstrip flags a `tokenizer_config.json` beside
them declares), and `RobertaProcessing`: `<s> text </s>`. Special tokens written in the text
(" <s> " between the title and the table of the Chart-to-Text inputs) are matched as tokens, as
HF does.

The interface is `chartjax.data.vocab.Vocabulary`'s, so the seq2seq featurization, evaluation
and `chartjax-infer --task text` run BART as they run T5: `encode_batch` pads with the pad id
(1 for BART) and truncates as HF's `truncation=True` (the content is cut, `<s>`/`</s>` kept);
`decode` cuts at the first `</s>`, drops special tokens and does not clean up spaces (HF 5's
`decode(skip_special_tokens=True)` of these tokenizers). `decoder_start_id` is the checkpoint's
`decoder_start_token_id` when a `config.json` lies beside the files, else the EOS id (BART's 2).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Sequence

import numpy as np

TOKENIZER_JSON = "tokenizer.json"
VOCAB_JSON = "vocab.json"
MERGES_TXT = "merges.txt"
BOS, PAD, EOS, UNK, MASK = "<s>", "<pad>", "</s>", "<unk>", "<mask>"


def is_bpe(path: str) -> bool:
    """Whether `path` is a `tokenizer.json` / `vocab.json`, or a directory holding BPE files."""
    if os.path.isdir(path):
        has = set(os.listdir(path))
        return TOKENIZER_JSON in has or {VOCAB_JSON, MERGES_TXT} <= has
    return os.path.basename(path) in (TOKENIZER_JSON, VOCAB_JSON)


def _token_flags(vocab_file: str) -> dict[str, dict]:
    """lstrip/rstrip/single_word of special tokens as a `tokenizer_config.json` beside the
    files declares them (`added_tokens_decoder`); none declared: plain tokens, as HF 5 builds
    them from vocab.json + merges.txt alone."""
    cfg = os.path.join(os.path.dirname(vocab_file), "tokenizer_config.json")
    if not os.path.isfile(cfg):
        return {}
    with open(cfg, encoding="utf-8") as f:
        conf = json.load(f)
    # `added_tokens_decoder` (HF >= 4.34), or older files' `"mask_token": {"content": ...}`.
    decl = list((conf.get("added_tokens_decoder") or {}).values())
    decl += [v for v in conf.values() if isinstance(v, dict) and "content" in v]
    keys = ("lstrip", "rstrip", "single_word")
    return {d["content"]: {k: bool(d.get(k, False)) for k in keys} for d in decl}


def _from_vocab_merges(vocab_file: str, merges_file: str):
    from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers, processors
    from tokenizers.models import BPE

    model = BPE.from_file(
        vocab_file, merges_file, continuing_subword_prefix="", end_of_word_suffix=""
    )
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    vocab = tok.get_vocab()
    flags = _token_flags(vocab_file)
    specials = [
        AddedToken(t, special=True, normalized=False, **flags.get(t, {}))
        for t in (BOS, PAD, EOS, UNK, MASK)
        if t in vocab
    ]
    tok.add_special_tokens(specials)
    tok.post_processor = processors.RobertaProcessing(
        (EOS, vocab[EOS]), (BOS, vocab[BOS]), trim_offsets=True, add_prefix_space=False
    )
    return tok


def _files(path: str) -> tuple[str, str | None]:
    """(tokenizer.json or vocab.json, merges.txt or None) of a file or directory."""
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, TOKENIZER_JSON)):
            return os.path.join(path, TOKENIZER_JSON), None
        return os.path.join(path, VOCAB_JSON), os.path.join(path, MERGES_TXT)
    if os.path.basename(path) == VOCAB_JSON:
        return path, os.path.join(os.path.dirname(path), MERGES_TXT)
    return path, None


class BpeVocabulary:
    """A byte-level BPE tokenizer with `Vocabulary`'s interface (see the module docstring)."""

    def __init__(self, path: str):
        if not os.path.exists(path):
            raise FileNotFoundError(f"vocabulary not found: {path}")
        from tokenizers import Tokenizer

        main, merges = _files(path)
        for f in (main, merges):
            if f is not None and not os.path.isfile(f):
                raise FileNotFoundError(
                    f"{path}: no {os.path.basename(f)} (BPE needs {TOKENIZER_JSON}, or "
                    f"{VOCAB_JSON} + {MERGES_TXT})"
                )
        try:
            tok = _from_vocab_merges(main, merges) if merges else Tokenizer.from_file(main)
        except Exception as e:  # the Rust side raises plain Exceptions
            raise ValueError(f"{path}: not a BPE tokenizer ({e})") from None
        tok.no_truncation()
        tok.no_padding()
        self.where = path
        self._tok = tok
        self._by_len: dict[int, object] = {}  # truncating copies, one per max length
        self._lock = threading.Lock()
        ids = {t: tok.token_to_id(t) for t in (BOS, PAD, EOS, UNK)}
        missing = [t for t, i in ids.items() if i is None and t != UNK]
        if missing:
            raise ValueError(f"{path}: no special tokens {missing} (not a BART vocabulary)")
        self.bos_id, self.pad_id, self.eos_id = ids[BOS], ids[PAD], ids[EOS]
        self.unk_id = ids[UNK]
        self.decoder_start_id = self._decoder_start(path)

    def __getstate__(self):
        """For the loader's worker processes: the lock and the truncating copies stay here."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_by_len")}

    def __setstate__(self, state):
        self.__dict__.update(state, _by_len={}, _lock=threading.Lock())

    def _decoder_start(self, path: str) -> int:
        cfg = os.path.join(path if os.path.isdir(path) else os.path.dirname(path), "config.json")
        if os.path.isfile(cfg):
            with open(cfg) as f:
                start = json.load(f).get("decoder_start_token_id")
            if isinstance(start, int):
                return start
        return self.eos_id

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included (the model's table may be larger)."""
        return self._tok.get_vocab_size(with_added_tokens=True)

    def _truncating(self, max_len: int):
        with self._lock:
            if max_len not in self._by_len:
                from tokenizers import Tokenizer

                tok = Tokenizer.from_str(self._tok.to_str())
                tok.enable_truncation(max_len)
                self._by_len[max_len] = tok
            return self._by_len[max_len]

    def encode(self, text: str, *, add_eos: bool = False) -> list[int]:
        """Ids of `text`; `add_eos` adds BART's special tokens (`<s> ... </s>`)."""
        return self._tok.encode(text, add_special_tokens=add_eos).ids

    def encode_batch(
        self, texts: Sequence[str], *, max_len: int | None = None, add_eos: bool = True
    ) -> np.ndarray:
        """int32 `[B, L]` right-padded with the pad id; `L` is `max_len` when given (longer
        texts are truncated as HF's `truncation=True`), else the longest sequence."""
        tok = self._tok if max_len is None else self._truncating(max_len)
        seqs = [e.ids for e in tok.encode_batch(list(texts), add_special_tokens=add_eos)]
        length = max_len if max_len is not None else max((len(s) for s in seqs), default=0)
        out = np.full((len(seqs), length), self.pad_id, np.int32)
        for i, s in enumerate(seqs):
            out[i, : len(s)] = s[:length]
        return out

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids` up to the first EOS (a leading decoder start id is not an end); special
        tokens dropped; ids past the vocabulary (padded embedding tables) dropped."""
        kept = []
        for k, i in enumerate(int(x) for x in ids):
            if i == self.eos_id and not (k == 0 and i == self.decoder_start_id):
                break
            if 0 <= i < self.vocab_size:
                kept.append(i)
        return self._tok.decode(kept, skip_special_tokens=True)

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        return [self.decode(row) for row in batch]
