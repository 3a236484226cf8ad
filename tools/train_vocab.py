"""Train a SentencePiece vocabulary for from-scratch models (T5 conventions).

    chartjax-train-vocab --input corpus.txt [more.txt ...] --out vocab --vocab_size 32000
    chartjax-train-vocab --input data.jsonl --field caption --field table --out vocab
    (or python -m chartjax.tools.train_vocab ...)

Writes `<out>.model` and `<out>.vocab`. Ids: pad 0, EOS 1, UNK 2, no BOS (`--gemma`: Gemma's
pad 0, `<eos>` 1, `<bos>` 2, `<unk>` 3, `<mask>` 4, and `<image>` 5, for a from-scratch PaliGemma:
its `PaliGemmaConfig.image_token_id = 5`, its vocab_size the pieces plus the 1,152 `<locNNNN>` /
`<segNNN>` tokens the processor adds after them); byte fallback on, so
any byte (newline included, as `<0x0A>`) is encodable. Multi-line texts are split into lines
before training, so "\\n" never becomes a piece of its own and always goes through byte fallback,
as in the released Pix2Struct vocabulary. Normalization is NFKC (not SentencePiece's default
`nmt_nfkc`, which would turn newlines into spaces).

`--gemma --images 'train/png/*.png' --image_size 256` also writes SigLIP's image processor file,
`preprocessor_config.json`, beside `<out>.model`, with those images' per-channel pixel mean and
standard deviation as `image_mean` / `image_std` (the from-scratch model's input normalization:
pretrained SigLIP's [-1, 1] leaves a chart page near +1 everywhere, and a 0.9M-parameter
PaliGemma trained on it never read a value; standardized, it did: docs/benchmarks.md).

Size: at least 3 special ids + 256 byte pieces + the corpus's characters (those within
`--character_coverage`), so a few hundred at the least; at most what the corpus yields (or fewer
with `--soft_vocab_limit`). Either limit is one line on stderr, exit status 2. The model's
`vocab_size` (T5Config / Pix2StructConfig) should be this size, padded at most to
2 x size + 128 (chartjax-train checks it).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator

from chartjax.metrics import prediction_files


def iter_texts(paths: Iterable[str], fields: Iterable[str] = ()) -> Iterator[str]:
    """Lines of text files, or the named string fields of JSONL records (`.jsonl`/`.json`).

    Raises ValueError naming the file and line of a bad JSONL record or a missing field.
    """
    fields = list(fields)
    for path in paths:
        is_jsonl = path.endswith((".jsonl", ".json"))
        if is_jsonl and not fields:
            raise ValueError(f"{path}: JSONL input needs --field")
        if not is_jsonl:
            with open(path, encoding="utf-8") as f:
                yield from (line.rstrip("\n") for line in f)
            continue
        for lineno, rec in prediction_files.iter_jsonl(path):  # errors name file and line
            for name in fields:
                if name not in rec:
                    raise ValueError(f"{path}:{lineno}: missing field {name!r}")
                value = rec[name]
                if not isinstance(value, str):
                    value = json.dumps(value, ensure_ascii=False)
                yield from value.split("\n")


T5_IDS = {"pad_id": 0, "eos_id": 1, "unk_id": 2, "bos_id": -1}
GEMMA_IDS = {
    "pad_id": 0,
    "eos_id": 1,
    "bos_id": 2,
    "unk_id": 3,
    "pad_piece": "<pad>",
    "eos_piece": "<eos>",
    "bos_piece": "<bos>",
    "unk_piece": "<unk>",
    "user_defined_symbols": ["<mask>", "<image>"],
}


def train(
    texts: Iterable[str],
    out_prefix: str,
    *,
    vocab_size: int,
    model_type: str = "unigram",
    character_coverage: float = 0.9999,
    input_sentence_size: int = 10_000_000,
    hard_vocab_limit: bool = True,
    split_digits: bool = False,
    gemma: bool = False,
) -> str:
    """Train on `texts` (one sentence each; newlines inside are split off) -> `<out>.model`.
    `split_digits`: every digit its own piece (numbers are read digit by digit); `gemma`:
    Gemma's special ids (the module docstring)."""
    import sentencepiece as spm

    failed = []  # SentencePiece swallows the iterator's errors (a bad JSONL record): kept here

    def sentences():
        try:
            for t in texts:
                for s in t.split("\n"):
                    if s.strip():
                        yield s
        except ValueError as e:
            failed.append(e)

    os.makedirs(os.path.dirname(os.path.abspath(out_prefix)), exist_ok=True)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=sentences(),
            model_prefix=out_prefix,
            vocab_size=vocab_size,
            model_type=model_type,
            **(GEMMA_IDS if gemma else T5_IDS),
            byte_fallback=True,
            normalization_rule_name="nfkc",
            character_coverage=character_coverage,
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            hard_vocab_limit=hard_vocab_limit,
            split_digits=split_digits,
            minloglevel=2,
        )
    except RuntimeError as e:  # "Internal: src/trainer_interface.cc(584) [...] ..."
        if not failed:
            raise ValueError(_size_problem(str(e), vocab_size, character_coverage)) from None
    if failed:
        raise failed[0]
    return out_prefix + ".model"


# SentencePiece's words for its two size limits (trainer_interface.cc).
_TOO_SMALL = re.compile(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)")
_TOO_LARGE = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")
META_PIECES = 3 + 256  # pad, EOS, UNK and the byte-fallback pieces: any text is encodable


def _size_problem(message: str, vocab_size: int, character_coverage: float) -> str:
    """SentencePiece's size error as one line saying what to change."""
    if m := _TOO_SMALL.search(message):
        need = int(m[2])
        return (
            f"--vocab_size {vocab_size} is too small: this corpus needs at least {need} pieces "
            f"(3 special ids, 256 byte-fallback pieces and the {need - META_PIECES} characters "
            f"--character_coverage {character_coverage} keeps); raise --vocab_size to {need} "
            "or more, or lower --character_coverage"
        )
    if m := _TOO_LARGE.search(message):
        return (
            f"--vocab_size {vocab_size} is too large for this corpus: it yields at most "
            f"{m[2]} pieces; lower --vocab_size, give more text, or --soft_vocab_limit to "
            "accept fewer pieces"
        )
    return "SentencePiece: " + (message.strip().splitlines() or ["failed"])[-1]


def write_image_processor(paths: Iterable[str], folder: str, image_size: int) -> str:
    """`folder/preprocessor_config.json`: SiglipImageProcessor's fields at `image_size`, its
    image_mean / image_std the per-channel mean and standard deviation of `paths`' pixels in
    [0, 1], each image decoded and resized as the PaliGemma processor does."""
    import dataclasses

    import numpy as np

    from chartjax.data import images
    from chartjax.data import paligemma_inputs as pi

    settings = pi.ImageSettings(size=(image_size, image_size), do_normalize=False)
    total, squares, n = np.zeros(3), np.zeros(3), 0
    for path in paths:
        try:
            with open(path, "rb") as f:
                rgb = images.decode_image_bytes(f.read())
        except OSError as e:
            raise ValueError(f"{path}: not an image ({e})") from None
        x = pi.pixels(rgb, settings).astype(np.float64).reshape(-1, 3)
        total, squares, n = total + x.sum(0), squares + (x * x).sum(0), n + len(x)
    if not n:
        raise ValueError("--images matched no file")
    mean = total / n
    std = np.maximum(np.sqrt(np.maximum(squares / n - mean * mean, 0.0)), 1e-6)
    # The fields pi.image_settings reads back, as HF's SiglipImageProcessor writes them.
    fields = dataclasses.asdict(
        dataclasses.replace(
            settings,
            do_normalize=True,
            image_mean=tuple(round(float(v), 6) for v in mean),
            image_std=tuple(round(float(v), 6) for v in std),
        )
    )
    fields["size"] = {"height": image_size, "width": image_size}
    config = {
        "image_processor_type": "SiglipImageProcessor",
        "processor_class": "PaliGemmaProcessor",
        **{k: v for k, v in fields.items() if v is not None},
    }
    out = os.path.join(folder, "preprocessor_config.json")
    with open(out, "w") as f:
        json.dump(config, f, indent=2)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        prog="chartjax-train-vocab",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--input", nargs="+", required=True, help="text files and/or JSONL files")
    p.add_argument("--field", action="append", default=[], help="JSONL field(s) to read")
    p.add_argument("--out", required=True, help="output prefix: writes <out>.model, <out>.vocab")
    p.add_argument(
        "--vocab_size", type=int, default=32000, help="pieces, the T5 special ids included"
    )
    p.add_argument(
        "--model_type",
        default="unigram",
        choices=["unigram", "bpe"],
        help="SentencePiece algorithm (T5's vocabularies are unigram)",
    )
    p.add_argument(
        "--character_coverage",
        type=float,
        default=0.9999,
        help="share of the corpus's characters the pieces cover; the rest fall back to bytes",
    )
    p.add_argument(
        "--soft_vocab_limit",
        action="store_true",
        help="allow fewer pieces than --vocab_size on small corpora",
    )
    p.add_argument(
        "--split_digits",
        action="store_true",
        help="every digit its own piece (numbers are then read and written digit by digit)",
    )
    p.add_argument(
        "--gemma",
        action="store_true",
        help="Gemma's special ids, <image> at 5 (a from-scratch PaliGemma's tokenizer)",
    )
    p.add_argument(
        "--images",
        nargs="+",
        default=[],
        help="with --gemma: training images whose pixel mean / std the image processor file "
        "beside <out>.model gets (shell globs are expanded)",
    )
    p.add_argument(
        "--image_size", type=int, default=224, help="with --images: the model's image side"
    )
    a = p.parse_args(argv)
    for path in a.input:
        if not os.path.isfile(path):
            p.error(f"input file not found: {path}")
    if a.images and not a.gemma:
        p.error("--images writes a PaliGemma image processor file: it needs --gemma")
    patterns = [os.path.expanduser(pattern) for pattern in a.images]
    images = sorted(f for pattern in patterns for f in (glob.glob(pattern) or [pattern]))
    try:
        model = train(
            iter_texts(a.input, a.field),
            a.out,
            vocab_size=a.vocab_size,
            model_type=a.model_type,
            character_coverage=a.character_coverage,
            hard_vocab_limit=not a.soft_vocab_limit,
            split_digits=a.split_digits,
            gemma=a.gemma,
        )
        processor = images and write_image_processor(
            images, os.path.dirname(os.path.abspath(a.out)), a.image_size
        )
    except ValueError as e:  # a size the corpus cannot give, a bad JSONL record or image
        print(f"chartjax-train-vocab: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    import sentencepiece as spm

    pieces = spm.SentencePieceProcessor(model_file=model).get_piece_size()
    print(
        json.dumps(
            {
                "model": model,
                "vocab_size": pieces,
                **({"processor": processor} if processor else {}),
            }
        )
    )


if __name__ == "__main__":
    main()
