"""A task's features computed once, kept in memory (or on disk) and replayed.

For runs whose preprocessing costs more than their model step: rendering a chart and its header
for a tiny Pix2Struct takes ~0.05-0.2 s, time the 2 cores of a CPU run would otherwise take
from training every step. `featurize` collects a split's padded eval batches (the task's own
preprocessing) into arrays once; `cached_features` keeps them under a folder named by
`cache_key`; `replay_task` wraps a task so that it trains on them (`IndexedSource`'s seeded,
resumable, per-process order) and featurizes each evaluation split once. Only `replay_task`
and `ReplaySource` know the task contract (chartjax/tasks/core/task.py); the rest takes plain batch
iterators.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from chartjax.data import pipeline, sources


def featurize(batches: Iterable[dict]) -> dict[str, np.ndarray]:
    """Padded eval batches (with `_mask`, e.g. one process's `eval_batches`) -> one array per
    feature, padding rows dropped."""
    cols: dict[str, list] = {}
    for b in batches:
        keep = np.asarray(b["_mask"], bool)
        for k, v in b.items():
            cols.setdefault(k, []).append(np.asarray(v)[keep])
    return {k: np.concatenate(v) for k, v in cols.items()}


def cache_key(*parts) -> str:
    """A short digest naming one feature cache: pass everything the features depend on (the
    corpus stamp, the vocabulary's bytes, the feature settings)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else repr(part).encode())
    return h.hexdigest()[:16]


def cached_features(
    batches: Callable[[], Iterable[dict]], keys: Sequence[str], cache_dir: str | None = None
) -> dict[str, np.ndarray]:
    """`featurize(batches())` restricted to `keys`, read from `cache_dir` when an earlier call
    stored it there (the caller names the folder with `cache_key`; a hit never calls
    `batches`, so the input pipeline does not even start)."""
    if cache_dir and os.path.isdir(cache_dir):
        return {k: np.load(os.path.join(cache_dir, k + ".npy")) for k in keys}
    feats = featurize(batches())
    feats = {k: feats[k] for k in keys}
    if cache_dir:  # written beside, then renamed: an interrupted run leaves no partial cache
        tmp = cache_dir + ".partial"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        for k, v in feats.items():
            np.save(os.path.join(tmp, k + ".npy"), v)
        os.replace(tmp, cache_dir)
    return feats


@dataclasses.dataclass
class ReplaySource:
    """Training examples: rows of precomputed features; evaluation examples: the wrapped task's
    own, featurized by the one pipeline on first use and kept (one process only)."""

    train: sources.IndexedSource
    task: Any
    eval_batch_size: int = 64
    _eval: dict = dataclasses.field(default_factory=dict, init=False, repr=False)

    def train_examples(self, **kwargs):
        return self.train.train_examples(**kwargs)

    def eval_examples(self, split, *, process_index, process_count):
        if process_count != 1:
            raise ValueError("replayed evaluation runs in one process")
        if split not in self._eval:
            batches = pipeline.eval_batches(self.task, split, self.eval_batch_size, 0, 1)
            self._eval[split] = {k: v for k, v in featurize(batches).items() if k != "_mask"}
        feats = self._eval[split]
        n = len(next(iter(feats.values())))
        return [{k: v[i] for k, v in feats.items()} for i in range(n)]


def replay_task(task, train_features: dict[str, np.ndarray], eval_batch_size: int = 64):
    """`task` training on `train_features` instead of its own training data (each epoch a
    permutation seeded by (seed, epoch): global step s holds the same rows whatever step a run
    resumed from); its evaluation splits are featurized once and replayed afterwards."""
    n = len(next(iter(train_features.values())))
    train = sources.IndexedSource(lambda i: {k: v[i] for k, v in train_features.items()}, n, 0)
    return dataclasses.replace(
        task,
        source=ReplaySource(train, task, eval_batch_size),
        features=lambda keep_host: _identity,
    )


def _identity(example):
    return example
