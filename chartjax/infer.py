"""Batch inference with a T5X, HuggingFace or chartjax checkpoint -> predictions.jsonl.

The engine behind `chartjax-infer` (its flags and outputs: chartjax/tools/infer.py). The task
(an InferenceSpec, chartjax/tasks/catalog.py) decides the modality and prompt and any extra
outputs; inputs come from chartjax/infer_inputs.py; examples are featurized with the training
pipeline's own functions (chartjax/tasks/seq2seq.py: header rendering, Pix2Struct patches,
SentencePiece) and batched by chartjax/data/pipeline.py with the eval padding and `_mask`, so a
model sees what it was trained on and decoding compiles once.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from chartjax import infer_inputs
from chartjax.data import pipeline
from chartjax.infer_inputs import Example, InputError
from chartjax.tasks.task import InferenceSpec


class BadImage(InputError):
    """One input image cannot be used (skippable with --skip_bad)."""


# ------------------------------------------------------------------------ model -------------


def check_family(cfg, spec: InferenceSpec, where: str) -> None:
    from chartjax.models.model_configs import Pix2StructConfig

    image_model = isinstance(cfg, Pix2StructConfig)
    if spec.modality == "image" and not image_model:
        raise InputError(
            f"{where} holds a T5 (text-to-text) model; --task {spec.name} needs a "
            "Pix2Struct-family image model. A T5 runs "
            "with a text task (--task text)"
        )
    if spec.modality == "text" and image_model:
        raise InputError(
            f"{where} holds a Pix2Struct-family image model; --task {spec.name} needs a "
            "T5 / Flan-T5 checkpoint (use an image task)"
        )


def make_decoder(model, args):
    """features [B, ...] -> token ids [B, max_decode_len] (a device array; not waited for):
    the evaluation's own prediction (greedy, or the best beam)."""
    from chartjax.tasks import seq2seq

    predict = seq2seq.make_predict(
        seq2seq.Decoding(
            max_decode_len=args.max_decode_len, beam_size=args.beam_size, alpha=args.alpha
        )
    )

    def decode(feats: np.ndarray):
        return predict(model, {"encoder_input_tokens": feats})

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

    from chartjax.data.images import decode_image_bytes

    try:
        image = decode_image_bytes(infer_inputs.read_image_bytes(ex))
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise BadImage(f"{ex.source}: cannot read image ({type(e).__name__}: {e})") from None
    import tensorflow as tf

    rendered = seq2seq.image_with_header(image, ex.prompt, features)
    try:
        out = seq2seq.image_features(rendered, features)
    except tf.errors.InvalidArgumentError as e:  # extreme aspect ratio: row/col ids too large
        raise BadImage(f"{ex.source}: {e.message}") from None
    return out.numpy(), False


def batches(examples, features, vocab, args, on_skip):
    """(examples, feature batch padded to --batch_size with `_mask`, n_truncated) per batch."""
    group, truncated = [], 0

    def emit():
        exs = [ex for ex, _ in group]
        feats = {"encoder_input_tokens": np.stack([f for _, f in group])}
        (batch,) = pipeline.padded([feats], args.batch_size)  # one compiled shape
        return exs, batch, truncated

    for ex in examples:
        try:
            f, cut = featurize(ex, features, vocab)
        except BadImage as e:
            if not args.skip_bad:
                raise BadImage(f"{e} (use --skip_bad to skip bad inputs)") from None
            on_skip(str(e))
            continue
        group.append((ex, f))
        truncated += cut
        if len(group) == args.batch_size:
            yield emit()
            group, truncated = [], 0
    if group:
        yield emit()


# ------------------------------------------------------------------------ outputs -----------


def make_row(ex: Example, text: str, spec: InferenceSpec, out_dir: str, used: set[str]) -> dict:
    from chartjax.tasks import seq2seq

    row = {"id": ex.id, "prediction": text, "input": ex.prompt[: seq2seq.INPUT_CHARS]}
    if ex.target is not None:
        row["target"] = ex.target
    if spec.write_outputs is not None:
        spec.write_outputs(row, out_dir, used)
    return row


# ------------------------------------------------------------------------ run ---------------


PREDICTIONS = "predictions.jsonl"


def prepare_out(out: str, output_dirs, overwrite: bool) -> None:
    """`--out` must be new or empty, so no earlier output can sit next to the new one. With
    `overwrite`, what chartjax-infer writes there (predictions.jsonl and the tasks'
    `output_dirs`) is removed first; any other file is kept."""
    if not os.path.exists(out):
        return
    if not os.path.isdir(out):
        raise InputError(f"--out {out} is a file, not a folder")
    entries = sorted(os.listdir(out))
    if not entries:
        return
    ours = [PREDICTIONS, *sorted(output_dirs)]
    if not overwrite:
        shown = ", ".join(entries[:5]) + (
            f" and {len(entries) - 5} more" if len(entries) > 5 else ""
        )
        raise InputError(
            f"--out {out} is not empty ({shown}): give a new or empty folder, or --overwrite "
            f"to replace what chartjax-infer writes there ({', '.join(ours)}; other files are "
            "kept)"
        )
    import shutil

    for name in ours:
        path = os.path.join(out, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)


def run(args, spec: InferenceSpec, templates: dict) -> dict:
    """Inference as the parsed `chartjax-infer` flags ask, for the task `spec`; `templates`:
    the named prompts `--template` may choose. Returns the run's summary."""
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
    check_family(cfg, spec, loc.path)
    if vocab.vocab_size > cfg.vocab_size:
        raise InputError(
            f"{args.vocab} has {vocab.vocab_size} pieces but the model's vocabulary "
            f"has {cfg.vocab_size}: not this checkpoint's vocabulary"
        )
    features = seq2seq.Features(
        modality=spec.modality,
        vocab_file=args.vocab,
        max_patches=args.max_patches,
        patch_size=getattr(cfg, "patch_size", 16),
        max_position_id=getattr(cfg, "max_position_embeddings", 4096),
        header_font_size=args.header_font_size,
        font_path=args.font_path,
        max_input_len=args.max_input_len,
    )
    examples, total = infer_inputs.open_inputs(args, spec, templates)
    model = formats.load(loc, cfg)
    decode = make_decoder(model, args)
    t_loaded = time.time()

    from tqdm import tqdm

    os.makedirs(args.out, exist_ok=True)
    rows, used, skipped, truncated = [], set(), 0, 0
    bar = tqdm(
        total=total,
        desc=f"infer {spec.name}",
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
        rows.extend(make_row(ex, t, spec, args.out, used) for ex, t in zip(exs, texts))
        bar.update(len(exs))

    pending = None
    try:
        for exs, feats, cut in batches(examples, features, vocab, args, on_skip):
            tokens = decode(
                feats["encoder_input_tokens"]
            )  # dispatched; the next batch is prepared meanwhile
            truncated += cut
            if pending is not None:
                finish(pending)
            pending = (exs, tokens)
        if pending is not None:
            finish(pending)
    finally:
        bar.close()
    from chartjax.metrics import prediction_files

    pred_file = os.path.join(args.out, PREDICTIONS)
    prediction_files.write_jsonl(pred_file, rows)
    t_end = time.time()
    return {
        "task": spec.name,
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
