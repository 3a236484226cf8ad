"""A task's features computed once, kept in memory (or on disk) and replayed.

For runs whose preprocessing costs more than their model step: rendering a chart and its header
for a tiny Pix2Struct takes ~0.05-0.2 s, time the 2 cores of a CPU run would otherwise take
from training every step. `featurize` collects a split's padded eval batches (the task's own
preprocessing) into arrays once; `cached_features` keeps them under a folder named by
`cache_key`; `replay` yields training batches from them in a seeded, resumable order, and
`replay_task` wraps a task so that it trains on them and replays its evaluation batches.
Numpy only. Only `replay_task` knows the task interface (`train_batches` / `eval_batches`,
chartjax.tasks.registry.Task); the rest takes plain batch iterators.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np


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


def replay(
    features: dict[str, np.ndarray],
    global_batch_size: int,
    seed: int,
    start_step: int = 0,
    process_index: int = 0,
    process_count: int = 1,
) -> Iterator[dict]:
    """This process's share of each global training batch drawn from `features`, forever.

    Batches follow an epoch-wise permutation seeded by (seed, epoch), so global step s holds
    the same examples whatever step a run resumed from, and process p of P gets rows
    [p * B/P, (p + 1) * B/P) of each global batch B (their concatenation is the global batch).
    """
    if global_batch_size % process_count:
        raise ValueError(
            f"global batch {global_batch_size} not divisible by {process_count} processes"
        )
    n = len(next(iter(features.values())))
    local = global_batch_size // process_count
    step = start_step
    while True:
        pos = np.arange(step * global_batch_size, (step + 1) * global_batch_size)
        epochs = pos // n
        perms = {e: np.random.default_rng([seed, int(e)]).permutation(n) for e in set(epochs)}
        idx = np.array([perms[e][p % n] for e, p in zip(epochs, pos)])
        mine = idx[process_index * local : (process_index + 1) * local]
        yield {k: v[mine] for k, v in features.items()}
        step += 1


def replay_task(task, train_features: dict[str, np.ndarray]):
    """`task` training on `train_features` (`replay`) instead of its own training data; its
    evaluation batches are computed on first use and replayed afterwards."""
    eval_cache: dict[tuple, list] = {}

    def train_batches(global_batch_size, seed, start_step, process_index, process_count):
        return replay(
            train_features, global_batch_size, seed, start_step, process_index, process_count
        )

    def eval_batches(split, global_batch_size, process_index, process_count) -> Iterator[dict]:
        key = (split, global_batch_size, process_index, process_count)
        if key not in eval_cache:
            eval_cache[key] = list(task.eval_batches(*key))
        yield from eval_cache[key]

    return dataclasses.replace(task, train_batches=train_batches, eval_batches=eval_batches)
