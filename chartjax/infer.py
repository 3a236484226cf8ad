"""Batch inference with a T5X, HuggingFace or chartjax checkpoint -> predictions.jsonl.

The engine behind `chartjax-infer` (its flags and outputs: chartjax/tools/infer.py). The task
(an InferenceSpec, chartjax/tasks/catalog.py) decides the modality and prompt, any extra
outputs, and whether the model writes text or labels; inputs come from chartjax/infer_inputs.py;
examples are featurized with the training pipeline's own functions (chartjax/tasks/seq2seq.py:
header rendering, Pix2Struct patches, SentencePiece or BART's BPE; chartjax/tasks/
text_classification.py: the DeBERTa / TAPAS tokenizers) and batched by chartjax/data/pipeline.py
with the eval padding and `_mask`, so a model sees what it was trained on and its step compiles
once.

Two kinds of model: decoders (Pix2Struct, T5, BART) write text, KV-cached greedy or beam search
(chartjax/models/decoding.py); encoder classifiers (DeBERTa, TAPAS) write the `id2label` name of
their argmax as `prediction` and their logits as `scores`. The model's family and size come from
the checkpoint (config.json, T5X shapes or the run's gin); its tokenizer from `--vocab`, else
from the checkpoint's own tokenizer files.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import time
from collections.abc import Callable

import numpy as np

from chartjax import infer_inputs
from chartjax.data import pipeline
from chartjax.infer_inputs import Example, InputError
from chartjax.tasks.task import InferenceSpec


class BadExample(InputError):
    """One input cannot be used (skippable with --skip_bad)."""


class BadImage(BadExample):
    """One input image cannot be used (skippable with --skip_bad)."""


# ------------------------------------------------------------------------ model -------------


def model_kind(cfg) -> str:
    """ "image" (Pix2Struct family), "text" (T5, BART) or "labels" (DeBERTa, TAPAS)."""
    from chartjax.models.model_configs import Pix2StructConfig
    from chartjax.tasks import text_classification

    if isinstance(cfg, Pix2StructConfig):
        return "image"
    if text_classification.family_of(cfg) is not None:
        return "labels"
    return "text"


_KIND_NAMES = {
    "image": "a Pix2Struct-family image model",
    "text": "a T5 (text-to-text) model",
    "labels": "an encoder classifier (DeBERTa / TAPAS)",
}


def check_family(cfg, spec: InferenceSpec, where: str) -> None:
    kind = model_kind(cfg)
    if kind == "text" and type(cfg).__name__ == "BartConfig":
        name = "a BART (text-to-text) model"
    else:
        name = _KIND_NAMES[kind]
    want = "labels" if spec.output == "labels" else spec.modality
    if kind == want:
        return
    runs = {
        "image": "use an image task",
        "text": "a T5 or BART runs with a text task (--task text)",
        "labels": "a classifier runs with --task classify",
    }[kind]
    needs = {
        "image": "a Pix2Struct-family image model",
        "text": "a T5 / Flan-T5 or BART checkpoint",
        "labels": "a DeBERTa or TAPAS classifier",
    }[want]
    raise InputError(f"{where} holds {name}; --task {spec.name} needs {needs} ({runs})")


@dataclasses.dataclass
class Engine:
    """What one kind of model needs: featurize an example, predict a batch, read predictions.

    featurize(ex) -> (features {name: array}, truncated?); may raise BadExample.
    make_predict(model) -> batch of features -> device array (dispatched, not waited for).
    outputs(exs, host array) -> per example (prediction, extra row fields).
    """

    featurize: Callable[[Example], tuple[dict, bool]]
    make_predict: Callable
    outputs: Callable[[list[Example], np.ndarray], list[tuple[object, dict]]]


def make_decoder(model, args):
    """features [B, ...] -> token ids [B, max_decode_len] (a device array; not waited for):
    the evaluation's own prediction (greedy, or the best beam)."""
    from chartjax.tasks import seq2seq

    predict = seq2seq.make_predict(
        seq2seq.Decoding(
            max_decode_len=args.max_decode_len, beam_size=args.beam_size, alpha=args.alpha
        )
    )

    def decode(feats):
        if isinstance(feats, dict):
            feats = feats["encoder_input_tokens"]
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


def decoder_engine(args, cfg, spec: InferenceSpec, vocab_path: str) -> Engine:
    from chartjax.data import vocab as vocab_lib
    from chartjax.tasks import seq2seq

    vocab = vocab_lib.open_vocabulary(vocab_path)
    if vocab.vocab_size > cfg.vocab_size:
        raise InputError(
            f"{vocab_path} has {vocab.vocab_size} pieces but the model's vocabulary "
            f"has {cfg.vocab_size}: not this checkpoint's vocabulary"
        )
    features = seq2seq.Features(
        modality=spec.modality,
        vocab_file=vocab_path,
        max_patches=args.max_patches,
        patch_size=getattr(cfg, "patch_size", 16),
        max_position_id=getattr(cfg, "max_position_embeddings", 4096),
        header_font_size=args.header_font_size,
        font_path=args.font_path,
        max_input_len=args.max_input_len,
    )

    def feats(ex):
        f, cut = featurize(ex, features, vocab)
        return {"encoder_input_tokens": f}, cut

    def outputs(exs, tokens):
        return [(t, {}) for t in vocab.decode_batch(tokens[: len(exs)])]

    return Engine(feats, lambda model: make_decoder(model, args), outputs)


def classifier_engine(args, cfg, tokenizer_path: str, labels) -> Engine:
    from flax import nnx

    from chartjax.data import classifier_inputs
    from chartjax.tasks import text_classification

    family = text_classification.family_of(cfg)
    try:
        tok = classifier_inputs.ClassifierTokenizer(tokenizer_path, family, args.max_input_len)
    except FileNotFoundError as e:
        raise InputError(str(e)) from None
    if tok.vocab_size > cfg.vocab_size:
        raise InputError(
            f"{tokenizer_path}: the tokenizer has {tok.vocab_size} ids but the model's "
            f"vocabulary has {cfg.vocab_size}: not this checkpoint's tokenizer"
        )
    names = text_classification.label_names(labels, cfg.num_labels)
    max_len = args.max_input_len

    def feats(ex):
        try:
            out = tok(ex.prompt, ex.pair, ex.table)
        except classifier_inputs.BadInput as e:
            raise BadExample(f"{ex.source}: {e}") from None
        # Counted as truncated: an input that fills --max_input_len (HF cuts silently).
        return out, bool(out["attention_mask"].sum() >= max_len)

    def make_predict(model):
        graphdef, state = nnx.split(model)
        return lambda batch: _classify_fn()(
            graphdef, state, {k: batch[k] for k in classifier_inputs.FEATURES if k in batch}
        )

    def outputs(exs, logits):
        logits = np.asarray(logits, np.float32)[: len(exs)]
        return [(names[int(np.argmax(row))], {"scores": [float(x) for x in row]}) for row in logits]

    return Engine(feats, make_predict, outputs)


@functools.cache
def _classify_fn():
    """The jitted classifier forward, built once per process (jax imported on first use): one
    compilation per model structure and batch shape, however many runs."""
    import jax
    from flax import nnx

    from chartjax.tasks import text_classification

    @functools.partial(jax.jit, static_argnums=0)
    def forward(graphdef, state, batch):
        return text_classification.predict(nnx.merge(graphdef, state), batch)

    return forward


def batches(examples, featurize_fn, args, on_skip):
    """(examples, feature batch padded to --batch_size with `_mask`, n_truncated) per batch."""
    group, truncated = [], 0

    def emit():
        exs = [ex for ex, _ in group]
        feats = {k: np.stack([f[k] for _, f in group]) for k in group[0][1]}
        (batch,) = pipeline.padded([feats], args.batch_size)  # one compiled shape
        return exs, batch, truncated

    for ex in examples:
        try:
            f, cut = featurize_fn(ex)
        except BadExample as e:
            if not args.skip_bad:
                raise BadExample(f"{e} (use --skip_bad to skip bad inputs)") from None
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


def make_row(
    ex: Example,
    prediction,
    spec: InferenceSpec,
    out_dir: str,
    used: set[str],
    extra: dict | None = None,
) -> dict:
    from chartjax.tasks import seq2seq

    row = {"id": ex.id, "prediction": prediction, "input": ex.prompt[: seq2seq.INPUT_CHARS]}
    row.update(extra or {})
    if ex.target is not None:
        row["target"] = ex.target
    if spec.write_outputs is not None:
        spec.write_outputs(row, out_dir, used)
    return row


# ------------------------------------------------------------------------ run ---------------


def _tokenizer_path(args, loc) -> str:
    from chartjax.interop import formats

    if args.vocab:
        return args.vocab
    own = formats.tokenizer_dir(loc)
    if own is None:
        raise InputError(
            f"{loc.path} carries no tokenizer files ({', '.join(formats.TOKENIZER_FILES)}): "
            "give --vocab"
        )
    return own


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
    from chartjax.interop import formats

    if args.vocab and not os.path.exists(args.vocab):
        raise InputError(f"vocabulary file not found: {args.vocab}")
    if args.font_path and not os.path.isfile(args.font_path):
        raise InputError(f"--font_path not found: {args.font_path}")
    loc = formats.locate(args.checkpoint, args.format)
    dtype = args.dtype
    if dtype == "auto":
        import jax

        dtype = "bfloat16" if jax.default_backend() in ("gpu", "tpu") else "float32"
    cfg = formats.read_config(loc, dtype=dtype)
    check_family(cfg, spec, loc.path)
    tokenizer = _tokenizer_path(args, loc)
    if spec.output == "labels":
        engine = classifier_engine(args, cfg, tokenizer, formats.read_labels(loc))
    else:
        engine = decoder_engine(args, cfg, spec, tokenizer)
    examples, total = infer_inputs.open_inputs(args, spec, templates)
    model = formats.load(loc, cfg)
    predict = engine.make_predict(model)
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
        exs, out = pending
        for ex, (pred, extra) in zip(exs, engine.outputs(exs, np.asarray(out))):
            rows.append(make_row(ex, pred, spec, args.out, used, extra))
        bar.update(len(exs))

    pending = None
    try:
        for exs, feats, cut in batches(examples, engine.featurize, args, on_skip):
            out = predict(feats)  # dispatched; the next batch is prepared meanwhile
            truncated += cut
            if pending is not None:
                finish(pending)
            pending = (exs, out)
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
