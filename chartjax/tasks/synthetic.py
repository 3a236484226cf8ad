"""A synthetic yes/no task with FigureQA's feature shapes, held in memory.

Used by the train-loop tests (sharding equivalence, multi-host, resume) and as a smoke task:
every example is a pure function of (seed, index), so any process can produce exactly its rows
of any global batch without files, and the answer is learnable from the image.
"""

from __future__ import annotations

from collections.abc import Iterator

import gin
import numpy as np

from chartjax.metrics import classification as cls_metrics
from chartjax.tasks import classification
from chartjax.tasks.registry import Task, register

QUESTION_LEN = 8


def _examples(indices: np.ndarray, seed: int, image_size: int, vocab_size: int) -> dict:
    images, tokens, lengths, labels = [], [], [], []
    for i in indices:
        rng = np.random.default_rng([seed, int(i)])
        img = rng.integers(0, 256, (image_size, image_size, 3), dtype=np.uint8)
        q = rng.integers(4, vocab_size, QUESTION_LEN).astype(np.int32)
        n = int(rng.integers(3, QUESTION_LEN + 1))
        q[n:] = 0
        # Yes iff the red channel is brighter in the left half: needs the image, not the text.
        half = image_size // 2
        label = int(img[:, :half, 0].mean() > img[:, half:, 0].mean())
        images.append(img), tokens.append(q), lengths.append(n), labels.append(label)
    return {
        "image": np.stack(images),
        "question_tokens": np.stack(tokens),
        "question_length": np.asarray(lengths, np.int32),
        "label": np.asarray(labels, np.int32),
        "id": np.asarray([f"synthetic/{i}" for i in indices]),
    }


@register("synthetic")
@gin.configurable("synthetic_task")
def make_task(
    num_train: int = 256,
    num_eval: int = 64,
    image_size: int = 32,
    vocab_size: int = 32,
    seed: int = 0,
) -> Task:
    def train_batches(
        global_batch_size, seed_, start_step, process_index, process_count
    ) -> Iterator[dict]:
        if global_batch_size % process_count:
            raise ValueError(
                f"global batch {global_batch_size} not divisible by {process_count} processes"
            )
        local = global_batch_size // process_count
        step = start_step
        while True:
            # Epoch-wise permutation from (seed, epoch): position -> example is fixed.
            first = step * global_batch_size
            pos = np.arange(first, first + global_batch_size)
            epoch, within = pos // num_train, pos % num_train
            idx = np.array(
                [
                    np.random.default_rng([seed_, int(e)]).permutation(num_train)[w]
                    for e, w in zip(epoch, within)
                ]
            )
            mine = idx[process_index * local : (process_index + 1) * local]
            yield _examples(mine, seed, image_size, vocab_size)
            step += 1

    def eval_batches(split, global_batch_size, process_index, process_count):
        local = global_batch_size // process_count
        offset = 1_000_000  # eval examples are disjoint from training ones
        per_process = -(-num_eval // process_count)
        mine = (
            np.arange(process_index * per_process, min((process_index + 1) * per_process, num_eval))
            + offset
        )
        for start in range(0, -(-per_process // local) * local, local):
            rows = mine[start : start + local]
            batch = _examples(
                np.resize(rows, local) if len(rows) else np.full(local, offset),
                seed,
                image_size,
                vocab_size,
            )
            batch["_mask"] = np.arange(local) < len(rows)
            yield batch

    def score(predictions, examples, split):
        preds, targets = list(predictions), list(examples["label"])
        metrics = cls_metrics.classification_metrics(preds, targets, labels=[0, 1])
        rows = [
            {"id": str(i), "prediction": int(p), "target": int(t)}
            for i, p, t in zip(examples["id"], preds, targets)
        ]
        return metrics, {}, rows

    return Task(
        name="synthetic",
        train_batches=train_batches,
        eval_batches=eval_batches,
        loss=classification.softmax_xent_loss,
        predict=classification.argmax_predict,
        score=score,
        model_inputs=("image", "question_tokens", "question_length", "label"),
        eval_splits=("validation",),
    )
