"""FigureQA (Kahou et al. 2017): yes/no questions about synthetic figures.

Preprocessing follows the baselines' public implementation (models reference §4): the image is
resized keeping its aspect ratio to fit image_size x image_size (bilinear), then centre
padded/cropped to a square; questions are lower-cased, split on spaces with `,` and `;` kept as
tokens and `.`/`?` dropped, wrapped in <START>/<END>. The answer is a 2-way label (no, yes).
"""

from __future__ import annotations

import functools
import os

import gin
import numpy as np

from chartjax.data import pipeline
from chartjax.metrics import classification as cls_metrics
from chartjax.tasks import classification
from chartjax.tasks.registry import Task, register

TEMPLATES = (
    "Is {c1} the minimum?",
    "Is {c1} the maximum?",
    "Is {c1} less than {c2}?",
    "Is {c1} greater than {c2}?",
    "Is {c1} the low median?",
    "Is {c1} the high median?",
    "Does {c1} have the minimum area under the curve?",
    "Does {c1} have the maximum area under the curve?",
    "Is {c1} the smoothest?",
    "Is {c1} the roughest?",
    "Does {c1} have the lowest value?",
    "Does {c1} have the highest value?",
    "Is {c1} less than {c2}?",
    "Is {c1} greater than {c2}?",
    "Does {c1} intersect {c2}?",
)
SPECIALS = ("<NULL>", "<START>", "<END>", "<UNK>")
ANSWERS = ("no", "yes")
COLORS_FILE = os.path.join(os.path.dirname(__file__), "..", "synth", "figureqa_colors.txt")


def _words(text: str) -> list[str]:
    text = text.lower().replace("?", "").replace(".", "")
    return text.replace(",", " , ").replace(";", " ; ").split()


@functools.cache
def vocabulary(colors_file: str = COLORS_FILE) -> tuple[str, ...]:
    """Specials + every word of the 15 templates and the 100 colour names (sorted, stable)."""
    words = set()
    for t in TEMPLATES:
        words.update(_words(t.format(c1="", c2="")))
    with open(colors_file) as f:
        for line in f:
            if line.strip():
                words.update(_words(line.rsplit(",", 1)[0]))
    return SPECIALS + tuple(sorted(words))


def tokenize_np(question: str, max_len: int) -> tuple[np.ndarray, int]:
    """The host-side twin of the tf.data tokenizer (used by tests and inference)."""
    index = {w: i for i, w in enumerate(vocabulary())}
    ids = [1] + [index.get(w, 3) for w in _words(question)] + [2]
    ids = ids[:max_len]
    out = np.zeros(max_len, np.int32)
    out[: len(ids)] = ids
    return out, len(ids)


def _preprocess_fn(image_size: int, max_len: int, antialias: bool, keep_meta: bool):
    import tensorflow as tf

    vocab = vocabulary()
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(tf.constant(vocab), tf.range(len(vocab))),
        default_value=3,
    )

    def fn(ex):
        img = tf.io.decode_png(ex["image"], channels=3)
        img = tf.image.resize(
            img,
            [image_size, image_size],
            method="bilinear",
            preserve_aspect_ratio=True,
            antialias=antialias,
        )
        img = tf.image.resize_with_crop_or_pad(img, image_size, image_size)
        img = tf.cast(tf.clip_by_value(tf.round(img), 0, 255), tf.uint8)
        q = tf.strings.lower(ex["question"])
        q = tf.strings.regex_replace(q, r"[?.]", "")
        q = tf.strings.regex_replace(q, r"([,;])", r" \1 ")
        ids = table.lookup(tf.strings.split(q))
        ids = tf.concat([[1], ids, [2]], 0)[:max_len]
        n = tf.shape(ids)[0]
        ids = tf.pad(ids, [[0, max_len - n]])
        out = {
            "image": img,
            "question_tokens": tf.ensure_shape(tf.cast(ids, tf.int32), [max_len]),
            "question_length": tf.cast(n, tf.int32),
            "label": tf.maximum(tf.cast(ex["answer"], tf.int32), 0),
        }
        if keep_meta:
            out.update(
                id=ex["id"],
                question=ex["question"],
                figure_type=ex["figure_type"],
                question_id=ex["question_id"],
                answer=ex["answer"],
            )
        return out

    return fn


def score_predictions(predictions, examples, split):
    """Accuracy, macro-F1 (+95% CI) overall, per figure type and per template; confusion."""
    keep = np.asarray(examples["answer"]) >= 0  # no_annot splits have no answers
    if not keep.any():
        raise ValueError(f"split {split!r} has no answers: use `infer` for predictions only")
    preds = [int(p) for p in np.asarray(predictions)[keep]]
    targets = [int(t) for t in np.asarray(examples["answer"])[keep]]
    ftypes = [_str(x) for x in np.asarray(examples["figure_type"])[keep]]
    templates = [str(int(x)) for x in np.asarray(examples["question_id"])[keep]]
    metrics = cls_metrics.classification_metrics(preds, targets, labels=[0, 1])
    breakdowns = {
        "figure_type": cls_metrics.breakdown(preds, targets, ftypes),
        "question_template": cls_metrics.breakdown(preds, targets, templates),
        "confusion_matrix": cls_metrics.confusion_breakdown(
            [ANSWERS[p] for p in preds], [ANSWERS[t] for t in targets], list(ANSWERS)
        ),
    }
    rows = [
        {
            "id": _str(i),
            "input": _str(q),
            "prediction": int(p),
            **({"target": int(t)} if t >= 0 else {}),
        }
        for i, q, p, t in zip(examples["id"], examples["question"], predictions, examples["answer"])
    ]
    return metrics, breakdowns, rows


def _str(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


@register("figureqa")
@gin.configurable("figureqa_task")
def make_task(
    data_dir: str = "~/tensorflow_datasets",
    image_size: int = 256,
    max_question_len: int = 24,
    antialias: bool = False,
    train_split: str = "train1",
    eval_splits: tuple[str, ...] = ("validation1", "validation2"),
    shuffle_buffer: int = 10_000,
) -> Task:
    builder_dir = None

    def resolve():
        nonlocal builder_dir
        builder_dir = builder_dir or pipeline.tfds_builder_dir("figureqa", data_dir)
        return builder_dir

    def train_batches(global_batch_size, seed, start_step, process_index, process_count):
        return pipeline.tfds_train_batches(
            resolve(),
            train_split,
            _preprocess_fn(image_size, max_question_len, antialias, keep_meta=False),
            local_batch_size=global_batch_size // process_count,
            seed=seed,
            start_step=start_step,
            process_index=process_index,
            process_count=process_count,
            shuffle_buffer=shuffle_buffer,
        )

    def eval_batches(split, global_batch_size, process_index, process_count):
        return pipeline.tfds_eval_batches(
            resolve(),
            split,
            _preprocess_fn(image_size, max_question_len, antialias, keep_meta=True),
            local_batch_size=global_batch_size // process_count,
            process_index=process_index,
            process_count=process_count,
        )

    return Task(
        name="figureqa",
        train_batches=train_batches,
        eval_batches=eval_batches,
        loss=classification.softmax_xent_loss,
        predict=classification.argmax_predict,
        score=score_predictions,
        model_inputs=("image", "question_tokens", "question_length", "label"),
        eval_splits=tuple(eval_splits),
        info={"vocab_size": len(vocabulary()), "image_size": image_size},
    )
