"""Batch inference with a T5X, HuggingFace or chartjax checkpoint -> predictions.jsonl.

    chartjax-infer --task deplot --checkpoint ~/ckpt/deplot_v1 --vocab ~/ckpt/sentencepiece.model \
        --images charts/ --out out/deplot --max_patches 4096 --max_decode_len 512

Inputs (exactly one): `--images` files and/or folders; `--inputs` a JSONL file of rows
`{"id", "image"?, <fields>}`; `--tfds NAME[/CONFIG]:SPLIT` (with `--data_dir`). Prompts per task:
chartjax/infer_inputs.py. Preprocessing is the training pipeline's own (chartjax/tasks/seq2seq.py:
header rendering, Pix2Struct patches, SentencePiece), so a model sees what it was trained on.

Outputs in `--out`:
  predictions.jsonl  one row per example: {"id", "prediction", "input" (prompt, shortened),
                     "target" (TFDS/JSONL inputs that have one)}; deplot rows add "table"
                     ({"title", "header", "rows"}, parsed by chartjax.data.tables) and
                     "table_file".
  tables/<id>.csv    deplot only: header row + rows of the parsed table (the title stays in the
                     JSONL row). An id's "/" makes subfolders; characters outside [A-Za-z0-9._-]
                     in each part become "_" (a clash gets a "~N" suffix); `table_file` gives
                     each row's path.
stdout: one JSON summary line (examples, skipped, truncated inputs, seconds, examples/s).

Decoding is KV-cached greedy (`--beam_size 1`) or beam search (the best beam), batched; the last
batch is padded to `--batch_size` so decoding compiles once. While the accelerator decodes one
batch the host prepares the next (JAX dispatch is asynchronous).

Errors stop the run with a message naming the file: an unreadable image (unless `--skip_bad`,
which reports each skipped input on stderr and counts them), a missing vocabulary, an unknown
checkpoint format, or a checkpoint whose family does not fit the task (a T5 for an image task, a
Pix2Struct-family model for `text`).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import time

import numpy as np

from chartjax import host_memory, infer_inputs
from chartjax.infer_inputs import IMAGE_TASKS, TASKS, Example, InputError

DEFAULT_FONT_SIZE = 36


class BadImage(InputError):
    """One input image cannot be used (skippable with --skip_bad)."""


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="chartjax-infer",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--task", required=True, choices=TASKS)
    p.add_argument("--checkpoint", required=True, help="T5X, HF or chartjax checkpoint directory")
    p.add_argument("--format", default="auto", choices=["auto", "t5x", "hf", "chartjax"])
    p.add_argument("--vocab", required=True, help="SentencePiece model (sentencepiece.model)")
    p.add_argument("--images", nargs="+", help="image files and/or folders")
    p.add_argument("--inputs", help='JSONL: {"id", "image"?, <named fields>} per line')
    p.add_argument("--tfds", help="NAME[/CONFIG]:SPLIT of a built TFDS dataset")
    p.add_argument("--data_dir", default="~/tensorflow_datasets")
    p.add_argument("--header", help="literal header/prompt for every example")
    p.add_argument(
        "--template",
        help="prompt: a format string over the input fields, or one "
        f"of {sorted(infer_inputs.TEMPLATES)}",
    )
    p.add_argument("--target_field", help="field/feature holding the reference (optional)")
    p.add_argument("--out", required=True)
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--max_decode_len", type=int, default=128)
    p.add_argument("--beam_size", type=int, default=1)
    p.add_argument("--alpha", type=float, default=0.6, help="beam search length penalty")
    p.add_argument(
        "--header_font_size",
        type=int,
        default=DEFAULT_FONT_SIZE,
        help="36 as current pix2struct and HF; the released fine-tunes were most "
        "likely trained with 12 (models.md §1.5)",
    )
    p.add_argument(
        "--font_path",
        help="TrueType font for headers (the originals used Arial; default DejaVu Sans)",
    )
    p.add_argument("--max_patches", type=int, default=2048)
    p.add_argument("--max_input_len", type=int, default=512, help="text task input tokens")
    p.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "float32", "bfloat16"],
        help="activation dtype; auto = bfloat16 on GPU/TPU, float32 on CPU",
    )
    p.add_argument("--skip_bad", action="store_true", help="skip (and count) unreadable images")
    a = p.parse_args(argv)
    for name in (
        "batch_size",
        "max_decode_len",
        "beam_size",
        "max_patches",
        "max_input_len",
        "header_font_size",
    ):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    return a


# ------------------------------------------------------------------------ model -------------


def check_family(cfg, task: str, where: str) -> None:
    from chartjax.models.model_configs import Pix2StructConfig

    image_model = isinstance(cfg, Pix2StructConfig)
    if task in IMAGE_TASKS and not image_model:
        raise InputError(
            f"{where} holds a T5 (text-to-text) model; --task {task} needs a "
            "Pix2Struct-family image model (Pix2Struct, MatCha, DePlot). A T5 runs "
            "with --task text"
        )
    if task == "text" and image_model:
        raise InputError(
            f"{where} holds a Pix2Struct-family image model; --task text needs a "
            "T5 / Flan-T5 checkpoint (image tasks: "
            f"{', '.join(IMAGE_TASKS)})"
        )


def make_decoder(model, args):
    """features [B, ...] -> token ids [B, max_decode_len] (a device array; not waited for)."""
    from chartjax.models import decoding

    def decode(feats: np.ndarray):
        batch = {"encoder_input_tokens": feats}
        if args.beam_size > 1:
            tokens, _ = decoding.beam_search(
                model,
                batch,
                max_decode_len=args.max_decode_len,
                num_beams=args.beam_size,
                alpha=args.alpha,
            )
            return tokens[:, 0]
        return decoding.greedy_decode(model, batch, max_decode_len=args.max_decode_len)[0]

    return decode


# ------------------------------------------------------------------------ features ----------


def featurize(ex: Example, features, vocab) -> tuple[np.ndarray, bool]:
    """Model input of one example (+ whether a text input was truncated)."""
    from chartjax.tasks import seq2seq

    if features.modality == "text":
        n = len(vocab.encode(ex.prompt, add_eos=True))
        ids = vocab.encode_batch([ex.prompt], max_len=features.max_input_len, add_eos=True)[0]
        return ids, n > features.max_input_len
    from PIL import Image

    try:
        image = seq2seq.decode_image_bytes(infer_inputs.read_image_bytes(ex))
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise BadImage(f"{ex.source}: cannot read image ({type(e).__name__}: {e})") from None
    import tensorflow as tf

    from chartjax.data import patches

    rendered = seq2seq.image_with_header(image, ex.prompt, features)
    try:
        out = patches.preprocess_image(
            rendered,
            features.max_patches,
            (features.patch_size, features.patch_size),
            max_position_id=features.max_position_id,
        )
    except tf.errors.InvalidArgumentError as e:  # extreme aspect ratio: row/col ids too large
        raise BadImage(f"{ex.source}: {e.message}") from None
    return out.numpy(), False


def batches(examples, features, vocab, args, on_skip):
    """Lists of (examples, stacked features [batch_size, ...], n_truncated), last one padded."""
    exs, feats, truncated = [], [], 0
    for ex in examples:
        try:
            f, cut = featurize(ex, features, vocab)
        except BadImage as e:
            if not args.skip_bad:
                raise BadImage(f"{e} (use --skip_bad to skip bad inputs)") from None
            on_skip(str(e))
            continue
        exs.append(ex)
        feats.append(f)
        truncated += cut
        if len(exs) == args.batch_size:
            yield exs, np.stack(feats), truncated
            exs, feats, truncated = [], [], 0
    if exs:
        feats += [feats[-1]] * (args.batch_size - len(feats))  # one compiled shape
        yield exs, np.stack(feats), truncated


# ------------------------------------------------------------------------ outputs -----------


def table_file(id_: str, used: set[str]) -> str:
    """`tables/<id>.csv` relative path, "/" kept as folders, other characters sanitized."""
    parts = [re.sub(r"[^A-Za-z0-9._-]", "_", p) for p in id_.split("/")]
    parts = ["_" if p in ("", ".", "..") else p for p in parts]
    stem = "/".join(["tables", *parts])
    rel, n = stem + ".csv", 1
    while rel in used:
        n += 1
        rel = f"{stem}~{n}.csv"
    used.add(rel)
    return rel


def write_table(out_dir: str, rel: str, table) -> None:
    path = os.path.join(out_dir, *rel.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        if table.header:
            w.writerow(table.header)
        w.writerows(table.rows)


def make_row(ex: Example, text: str, task: str, out_dir: str, used: set[str]) -> dict:
    from chartjax.data import tables
    from chartjax.tasks import seq2seq

    row = {"id": ex.id, "prediction": text, "input": ex.prompt[: seq2seq.INPUT_CHARS]}
    if ex.target is not None:
        row["target"] = ex.target
    if task == "deplot":
        table = tables.parse(text)
        row["table"] = {
            "title": table.title,
            "header": list(table.header),
            "rows": [list(r) for r in table.rows],
        }
        row["table_file"] = table_file(ex.id, used)
        write_table(out_dir, row["table_file"], table)
    return row


# ------------------------------------------------------------------------ run ---------------


def run(args) -> dict:
    t0 = time.time()
    from chartjax.data import vocab as vocab_lib
    from chartjax.interop import formats
    from chartjax.tasks import seq2seq

    vocab = vocab_lib.Vocabulary(args.vocab)
    if args.font_path and not os.path.isfile(args.font_path):
        raise InputError(f"--font_path not found: {args.font_path}")
    loc = formats.locate(args.checkpoint, args.format)
    dtype = args.dtype
    if dtype == "auto":
        import jax

        dtype = "bfloat16" if jax.default_backend() in ("gpu", "tpu") else "float32"
    cfg = formats.read_config(loc, dtype=dtype)
    check_family(cfg, args.task, loc.path)
    if vocab.vocab_size > cfg.vocab_size:
        raise InputError(
            f"{args.vocab} has {vocab.vocab_size} pieces but the model's vocabulary "
            f"has {cfg.vocab_size}: not this checkpoint's vocabulary"
        )
    image = args.task in IMAGE_TASKS
    features = seq2seq.Features(
        modality="image" if image else "text",
        vocab_file=args.vocab,
        max_patches=args.max_patches,
        patch_size=getattr(cfg, "patch_size", 16),
        max_position_id=getattr(cfg, "max_position_embeddings", 4096),
        header_font_size=args.header_font_size,
        font_path=args.font_path,
        max_input_len=args.max_input_len,
    )
    examples, total = infer_inputs.open_inputs(args, args.task)
    model = formats.load(loc, cfg)
    decode = make_decoder(model, args)
    t_loaded = time.time()

    from tqdm import tqdm

    os.makedirs(args.out, exist_ok=True)
    rows, used, skipped, truncated = [], set(), 0, 0
    bar = tqdm(
        total=total,
        desc=f"infer {args.task}",
        unit="ex",
        file=sys.stderr,
        dynamic_ncols=True,
        mininterval=1.0,
    )

    def on_skip(msg: str):
        nonlocal skipped
        skipped += 1
        bar.write(f"chartjax-infer: skipped {msg}", file=sys.stderr)
        bar.update(1)

    def finish(pending):
        exs, tokens = pending
        texts = vocab.decode_batch(np.asarray(tokens)[: len(exs)])
        rows.extend(make_row(ex, t, args.task, args.out, used) for ex, t in zip(exs, texts))
        bar.update(len(exs))

    pending = None
    try:
        for exs, feats, cut in batches(examples, features, vocab, args, on_skip):
            tokens = decode(feats)  # dispatched; the next batch is prepared meanwhile
            truncated += cut
            if pending is not None:
                finish(pending)
            pending = (exs, tokens)
        if pending is not None:
            finish(pending)
    finally:
        bar.close()
    from chartjax.metrics import report

    pred_file = os.path.join(args.out, "predictions.jsonl")
    report.write_jsonl(pred_file, rows)
    t_end = time.time()
    return {
        "task": args.task,
        "checkpoint": loc.path,
        "format": loc.fmt,
        "examples": len(rows),
        "skipped": skipped,
        "truncated_inputs": truncated,
        "predictions": pred_file,
        "load_seconds": round(t_loaded - t0, 2),
        "seconds": round(t_end - t0, 2),
        "examples_per_s": round(len(rows) / max(t_end - t_loaded, 1e-9), 3),
    }


def main(argv=None) -> None:
    args = parse_args(argv)
    host_memory.keep_freed_memory()
    try:
        summary = run(args)
    except (InputError, FileNotFoundError, ValueError) as e:
        print(f"chartjax-infer: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
