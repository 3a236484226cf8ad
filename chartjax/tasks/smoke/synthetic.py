"""A synthetic yes/no task with FigureQA's feature shapes, held in memory.

Used by the train-loop tests (sharding equivalence, multi-host, resume) and as a smoke task:
every example is a pure function of (seed, index), so any process can produce exactly its rows
of any global batch without files, and the answer is learnable from the image.
"""

from __future__ import annotations

import gin
import numpy as np

from chartjax.data import sources
from chartjax.metrics import classification as cls_metrics
from chartjax.metrics.scores import Scores
from chartjax.tasks.core import classification
from chartjax.tasks.core.task import Evaluation, Task

QUESTION_LEN = 8


def example(i: int, seed: int, image_size: int, vocab_size: int) -> dict:
    rng = np.random.default_rng([seed, int(i)])
    img = rng.integers(0, 256, (image_size, image_size, 3), dtype=np.uint8)
    q = rng.integers(4, vocab_size, QUESTION_LEN).astype(np.int32)
    n = int(rng.integers(3, QUESTION_LEN + 1))
    q[n:] = 0
    # Yes iff the red channel is brighter in the left half: needs the image, not the text.
    half = image_size // 2
    label = int(img[:, :half, 0].mean() > img[:, half:, 0].mean())
    return {
        "image": img,
        "question_tokens": q,
        "question_length": np.int32(n),
        "label": np.int32(label),
        "id": f"synthetic/{i}",
    }


def evaluate(predictions, host, split) -> Evaluation:
    preds, targets = [int(p) for p in predictions], [int(t) for t in host["label"]]
    metrics = cls_metrics.classification_metrics(preds, targets, labels=[0, 1])
    rows = [
        {"id": i.decode() if isinstance(i, bytes) else str(i), "prediction": p, "target": t}
        for i, p, t in zip(host["id"], preds, targets)
    ]
    return Evaluation(Scores(metrics=metrics), rows)


@gin.configurable("synthetic_task", module="chartjax.tasks.synthetic")
def make_task(
    num_train: int = 256,
    num_eval: int = 64,
    image_size: int = 32,
    vocab_size: int = 32,
    seed: int = 0,
) -> Task:
    return Task(
        name="synthetic",
        source=sources.IndexedSource(
            lambda i: example(i, seed, image_size, vocab_size), num_train, num_eval
        ),
        features=lambda keep_host: lambda ex: ex,
        loss=classification.softmax_xent_loss,
        predict=classification.argmax_predict,
        evaluate=evaluate,
        model_inputs=("image", "question_tokens", "question_length", "label"),
        eval_splits=("validation",),
        host_inputs=("label",),
    )
