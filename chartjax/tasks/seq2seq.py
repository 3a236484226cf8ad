"""The text-generation half shared by every Pix2Struct / T5 task: records -> features -> decode.

A benchmark module (chartcheck, chart_to_text, chart_info, deplot) says only what is particular
to it: which TFDS dataset and splits, and an `expand` function that turns one TFDS example
(Python values) into records `{"id", "prompt", "target", "meta"}`, usually one, several when a
chart holds several examples (CHART-Info text blocks), none to drop it. Everything else lives
here, identical for all benchmarks:

* featurize: `image` models render the prompt as a header above the chart (data/render.py; no
  header when the prompt is empty) and cut Pix2Struct patches (data/patches.py); `text` models
  tokenize the prompt. Targets are SentencePiece ids + EOS; the decoder input is the target
  shifted right behind the start id 0 (T5 conventions, data/vocab.py).
* train batches: shuffle examples -> repeat -> expand -> skip the records a resumed run has seen
  -> featurize -> batch; eval batches: padded with `_mask`, the same count on every process.
* predict: KV-cached greedy decoding or beam search (models/decoding.py) inside the jitted step;
  score: detokenize, then the benchmark's `score_fn(texts, records, split)`.

The Python parts (header rendering with PIL, SentencePiece) run through `tf.numpy_function`
inside tf.data's parallel map.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gin
import numpy as np

from chartjax.data import pipeline
from chartjax.tasks.registry import Task

RECORD_KEYS = ("id", "prompt", "target", "meta")
# Prediction rows keep this much of the prompt (`input` of predictions.jsonl is "short").
INPUT_CHARS = 300


@gin.configurable
@dataclasses.dataclass(frozen=True)
class Features:
    """How records become model features (gin: `Features.max_patches = 2048`, ...).

    modality: "image" (Pix2Struct family: prompt rendered as header) or "text" (T5: prompt
      tokenized). Recipes set it; the task module gives the default.
    """

    modality: str = "image"
    vocab_file: str = gin.REQUIRED
    max_patches: int = 2048
    patch_size: int = 16
    max_position_id: int = 4096
    header_font_size: int = 36
    font_path: str | None = None
    max_input_len: int = 512
    max_target_len: int = 128

    def __post_init__(self):
        if self.modality not in ("image", "text"):
            raise ValueError(f"Features.modality must be 'image' or 'text', not {self.modality!r}")


@gin.configurable
@dataclasses.dataclass(frozen=True)
class Decoding:
    """Decoding at evaluation (gin: `Decoding.max_decode_len = 128`, `Decoding.beam_size = 4`)."""

    max_decode_len: int = 128
    beam_size: int = 1
    alpha: float = 0.6


# ------------------------------------------------------------------------ host-side helpers --


def as_python(value) -> Any:
    """A TFDS numpy value -> str / int / float / list (bytes decoded as UTF-8)."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return as_python(value.item())
        return [as_python(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: as_python(v) for k, v in value.items()}
    return value


def decode_image_bytes(data: bytes) -> np.ndarray:
    """Encoded image -> uint8 RGB `[H, W, 3]` (PIL: TFDS stores PNG; TIFF/GIF/16-bit safe too;
    transparency on white, as the builders do)."""
    import io

    from PIL import Image

    from chartjax.data.images import to_rgb

    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(to_rgb(im))


def image_with_header(image: np.ndarray, prompt: str, features: Features) -> np.ndarray:
    """The model's view of a chart: prompt rendered above it, or the chart alone."""
    if not prompt:
        return np.asarray(image, np.uint8)
    from chartjax.data import render

    return render.render_header(
        image, prompt, font_size=features.header_font_size, font_path=features.font_path
    )


def target_arrays(vocab, target: str, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(decoder_target_tokens, decoder_input_tokens), int32 `[max_len]` each."""
    tgt = vocab.encode_batch([target], max_len=max_len, add_eos=True)[0]
    inp = np.concatenate([[vocab.decoder_start_id], tgt[:-1]]).astype(np.int32)
    inp[1:][tgt[:-1] == vocab.pad_id] = vocab.pad_id  # nothing after the final EOS
    return tgt, inp


# ------------------------------------------------------------------------ tf.data parts ----


def _expand_fn(
    expand: Callable,
    field_keys: Sequence[str],
    image_key: str | None,
    encoded_keys: Sequence[str] = (),
):
    """tf map: one TFDS example -> a dataset of its records (+ the encoded image per record)."""
    import tensorflow as tf

    def py(*values):
        example = {
            k: (bytes(np.asarray(v).item()) if k in encoded_keys else as_python(v))
            for k, v in zip(field_keys, values)
        }
        records = list(expand(example))
        for r in records:
            missing = [k for k in ("id", "prompt", "target") if k not in r]
            if missing:
                raise ValueError(f"expand() returned a record without {missing}: {r}")
        cols = [[str(r[k]) for r in records] for k in ("id", "prompt", "target")]
        cols.append([json.dumps(r.get("meta", {}), sort_keys=True) for r in records])
        return tuple(np.asarray([c.encode("utf-8") for c in col], dtype=object) for col in cols)

    def fn(ex):
        values = [_tf_get(ex, k) for k in field_keys]
        cols = tf.numpy_function(py, values, (tf.string,) * 4, stateful=False)
        out = {k: tf.ensure_shape(c, [None]) for k, c in zip(RECORD_KEYS, cols)}
        if image_key:
            out["image_bytes"] = tf.fill(tf.shape(out["id"]), ex[image_key])
        return tf.data.Dataset.from_tensor_slices(out)

    return fn


def _tf_get(ex, key: str):
    value = ex
    for part in key.split("."):
        value = value[part]
    return value


def _featurize_fn(features: Features, vocab, keep_host: bool):
    """tf map: record -> model features (+ the host-side strings when `keep_host`)."""
    import tensorflow as tf

    from chartjax.data import patches

    L = features.max_target_len

    def targets_py(target):
        return target_arrays(vocab, target.decode("utf-8"), L)

    def text_py(prompt):
        return vocab.encode_batch(
            [prompt.decode("utf-8")], max_len=features.max_input_len, add_eos=True
        )[0]

    def image_py(data, prompt):
        return image_with_header(decode_image_bytes(data), prompt.decode("utf-8"), features)

    def fn(rec):
        tgt, inp = tf.numpy_function(
            targets_py, [rec["target"]], (tf.int32, tf.int32), stateful=False
        )
        out = {
            "decoder_target_tokens": tf.ensure_shape(tgt, [L]),
            "decoder_input_tokens": tf.ensure_shape(inp, [L]),
        }
        if features.modality == "image":
            img = tf.numpy_function(
                image_py, [rec["image_bytes"], rec["prompt"]], tf.uint8, stateful=False
            )
            img = tf.ensure_shape(img, [None, None, 3])
            out["encoder_input_tokens"] = patches.preprocess_image(
                img,
                features.max_patches,
                (features.patch_size, features.patch_size),
                max_position_id=features.max_position_id,
            )
        else:
            ids = tf.numpy_function(text_py, [rec["prompt"]], tf.int32, stateful=False)
            out["encoder_input_tokens"] = tf.ensure_shape(ids, [features.max_input_len])
        if keep_host:
            out.update({k: rec[k] for k in RECORD_KEYS})
        return out

    return fn


def _records(
    builder_dir: str,
    split: str,
    expand,
    field_keys,
    image_key,
    *,
    process_index: int,
    process_count: int,
    shuffle_seed: int | None = None,
    shuffle_buffer: int = 10_000,
    encoded_keys: Sequence[str] = (),
):
    import tensorflow_datasets as tfds

    builder = tfds.builder_from_directory(builder_dir)
    skipped = dict.fromkeys(k for k in (image_key, *encoded_keys) if k)
    decoders = {k: tfds.decode.SkipDecoding() for k in skipped} or None
    ds = builder.as_dataset(
        split=pipeline.process_split(split, process_index, process_count),
        shuffle_files=False,
        decoders=decoders,
    )
    if shuffle_seed is not None:
        ds = ds.shuffle(shuffle_buffer, seed=shuffle_seed, reshuffle_each_iteration=True)
        ds = ds.repeat()
    return ds.flat_map(_expand_fn(expand, field_keys, image_key, encoded_keys))


# ------------------------------------------------------------------------ the task --------


def make_task(
    *,
    name: str,
    dataset: str,
    data_dir: str,
    train_split: str,
    eval_splits: Sequence[str],
    field_keys: Sequence[str],
    expand: Callable[[dict], list[dict]],
    score_fn: Callable[[list[str], list[dict], str], Any],
    features: Features,
    decoding: Decoding,
    image_key: str | None = "image",
    shuffle_buffer: int = 10_000,
    info: dict | None = None,
    encoded_keys: Sequence[str] = (),
) -> Task:
    """A seq2seq Task over the built TFDS dataset `dataset` (`name/config` for configs).

    encoded_keys: field keys `expand` receives still encoded (bytes, TFDS decoding skipped),
    e.g. the image of a text-modality task that needs only its size.

    score_fn(texts, records, split) -> (Scores, extra) where `records` are the eval records
    (id, prompt, target, meta dict) and `extra` is None or one dict per record added to its
    predictions.jsonl row (e.g. the parsed label or table).
    """
    from chartjax.data import vocab as vocab_lib

    vocab = vocab_lib.Vocabulary(features.vocab_file)
    image_key = image_key if features.modality == "image" else None
    state = {}

    def builder_dir():
        if "dir" not in state:
            state["dir"] = pipeline.tfds_builder_dir(dataset, data_dir)
        return state["dir"]

    def train_batches(global_batch_size, seed, start_step, process_index, process_count):
        import tensorflow as tf

        local = global_batch_size // process_count
        ds = _records(
            builder_dir(),
            train_split,
            expand,
            field_keys,
            image_key,
            process_index=process_index,
            process_count=process_count,
            shuffle_seed=seed,
            shuffle_buffer=shuffle_buffer,
            encoded_keys=encoded_keys,
        )
        # Skip whole records before featurizing: a resumed run pays no decode for them.
        ds = ds.skip(start_step * local)
        ds = ds.map(
            _featurize_fn(features, vocab, keep_host=False), num_parallel_calls=tf.data.AUTOTUNE
        )
        ds = ds.batch(local, drop_remainder=True).prefetch(2)
        return ds.with_options(pipeline._tf_options()).as_numpy_iterator()

    def eval_batches(split, global_batch_size, process_index, process_count):
        import tensorflow as tf

        local = global_batch_size // process_count
        ds = _records(
            builder_dir(),
            split,
            expand,
            field_keys,
            image_key,
            process_index=process_index,
            process_count=process_count,
            encoded_keys=encoded_keys,
        )
        ds = ds.map(
            _featurize_fn(features, vocab, keep_host=True), num_parallel_calls=tf.data.AUTOTUNE
        )
        batches = [
            pipeline.pad_batch(b, local, len(b["id"]))
            for b in ds.batch(local)
            .prefetch(2)
            .with_options(pipeline._tf_options())
            .as_numpy_iterator()
        ]
        total = _max_over_processes(len(batches), process_count)
        if not batches and total:
            raise ValueError(
                f"split {split!r} of {dataset} gave this process no records; "
                f"cannot pad its share of {total} batches"
            )
        yield from batches
        for _ in range(total - len(batches)):  # shorter shards run empty batches
            yield pipeline.pad_batch(batches[0], local, 0)

    def loss(model, batch, *, train):
        from chartjax.models import losses

        return losses.seq2seq_loss(model, batch, deterministic=not train)

    def predict(model, batch):
        from chartjax.models import decoding as dec

        if decoding.beam_size > 1:
            tokens, _ = dec.beam_search(
                model,
                batch,
                max_decode_len=decoding.max_decode_len,
                num_beams=decoding.beam_size,
                alpha=decoding.alpha,
            )
            return tokens[:, 0]
        tokens, _ = dec.greedy_decode(model, batch, max_decode_len=decoding.max_decode_len)
        return tokens

    def score(predictions, examples, split):
        texts = vocab.decode_batch(np.asarray(predictions))
        records = [
            {
                "id": as_python(i),
                "prompt": as_python(p),
                "target": as_python(t),
                "meta": json.loads(as_python(m)),
            }
            for i, p, t, m in zip(
                examples["id"], examples["prompt"], examples["target"], examples["meta"]
            )
        ]
        scores, extra = score_fn(texts, records, split)
        rows = []
        for k, (text, rec) in enumerate(zip(texts, records)):
            row = {
                "id": rec["id"],
                "input": rec["prompt"][:INPUT_CHARS],
                "prediction": text,
                "target": rec["target"],
            }
            if extra is not None:
                row.update(extra[k])
            rows.append(row)
        return (
            scores.metrics,
            scores.breakdowns,
            rows,
            {"unavailable": scores.unavailable, "libraries": scores.libraries},
        )

    return Task(
        name=name,
        train_batches=train_batches,
        eval_batches=eval_batches,
        loss=loss,
        predict=predict,
        score=score,
        model_inputs=("encoder_input_tokens", "decoder_input_tokens", "decoder_target_tokens"),
        eval_splits=tuple(eval_splits),
        score_inputs=(),
        info={"vocab": vocab, "features": features, "decoding": decoding, **(info or {})},
    )


def _max_over_processes(n: int, process_count: int) -> int:
    if process_count == 1:
        return n
    from jax.experimental import multihost_utils

    return int(np.max(multihost_utils.process_allgather(np.asarray(n, np.int32))))


def iter_records(
    builder_dir: str,
    split: str,
    expand,
    field_keys,
    image_key=None,
    encoded_keys: Sequence[str] = (),
) -> Iterator[dict]:
    """Every record of a split on the host (few-shot prompts, inference over TFDS splits)."""
    ds = _records(
        builder_dir,
        split,
        expand,
        field_keys,
        image_key,
        process_index=0,
        process_count=1,
        encoded_keys=encoded_keys,
    )
    for rec in ds.as_numpy_iterator():
        out = {k: as_python(rec[k]) for k in RECORD_KEYS}
        out["meta"] = json.loads(out["meta"])
        if image_key:
            out["image_bytes"] = rec["image_bytes"]
        yield out
