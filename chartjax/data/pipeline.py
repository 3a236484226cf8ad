"""The one input pipeline: examples -> features -> host batches -> global jax arrays.

Training, evaluation and inference all batch here; a task only says where its examples come from
(`Task.source`, chartjax/data/sources.py) and how one example becomes features (`Task.features`).

* train: this process's stream of examples (each epoch a seeded permutation) -> batches of the
  per-process share of the global batch (drop remainder), each featurized in a loader worker
  process (chartjax/data/loader.py, in order) -> the task's batch map, if it has one -> with
  `Task.pack`, rows of several examples each (chartjax/data/packing.py), batched by rows.
* eval and inference: every example once -> batches padded to the per-process batch size with a
  boolean `_mask` (False on padding rows, which repeat row 0); every process yields the same
  number of batches, so the jitted step runs in lockstep and padding never reaches metrics.
* device: `to_global` assembles global arrays with `jax.make_array_from_process_local_data`
  (the global batch is the concatenation of the per-process shards in process order, docs/design.md
  §4); `prefetch_to_device` keeps a few in flight from a background thread.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator

import numpy as np

from chartjax import mesh as mesh_lib
from chartjax.data import loader


def local_batch_size(global_batch_size: int, process_count: int) -> int:
    if global_batch_size % process_count:
        raise ValueError(
            f"global batch {global_batch_size} is not divisible by {process_count} processes"
        )
    return global_batch_size // process_count


def train_batches(
    task, global_batch_size: int, seed: int, start_step: int, process_index: int, process_count: int
) -> Iterator[dict]:
    """This process's share of every global training batch from `start_step` on (numpy)."""

    local = local_batch_size(global_batch_size, process_count)
    examples = task.source.train_examples(
        seed=seed,
        start_step=start_step,
        local_batch_size=local,
        process_index=process_index,
        process_count=process_count,
    )
    batches = featurized(examples, task, False, local, drop_remainder=True)
    if task.pack is None:
        return batches
    # Packed: the featurized examples become rows (several examples each) and a batch is
    # `local` rows; a step then reads more than `local` examples from the stream.
    from chartjax.data import packing

    return packing.rebatch(task.pack(packing.unbatch(batches)), local)


def featurized(
    examples: Iterable[dict], task, keep_host: bool, local: int, drop_remainder: bool
) -> Iterator[dict]:
    """Examples -> batches of `local` through the task's feature map (in the loader's worker
    processes, chartjax/data/loader.py) -> its batch map (here, in the input thread)."""
    fn = functools.partial(loader.batch_of, task.features(keep_host))
    batches = loader.map_ordered(fn, loader.chunked(examples, local, drop_remainder))
    if task.batch_features is not None:
        batches = map(task.batch_features(keep_host), batches)
    return batches


def eval_batches(
    task, split: str, global_batch_size: int, process_index: int, process_count: int
) -> Iterator[dict]:
    """Every example of `split` once, in padded batches with `_mask` (same count per process)."""

    local = local_batch_size(global_batch_size, process_count)
    examples = task.source.eval_examples(
        split, process_index=process_index, process_count=process_count
    )
    batches = featurized(examples, task, True, local, drop_remainder=False)
    yield from padded(batches, local, process_count, what=f"split {split!r}")


def padded(
    batches: Iterable[dict], size: int, process_count: int = 1, *, what: str = "input"
) -> Iterator[dict]:
    """Batches of up to `size` rows -> batches of exactly `size` rows with `_mask`.

    With several processes every process must run the same number of batches: the batches are
    counted first (held in memory) and the shorter shards add empty batches.
    """
    if process_count == 1:
        for batch in batches:
            yield pad_batch(batch, size, len(next(iter(batch.values()))))
        return
    held = [pad_batch(b, size, len(next(iter(b.values())))) for b in batches]
    total = _max_over_processes(len(held))
    if not held and total:
        raise ValueError(f"{what} gave this process no examples; cannot pad its share")
    yield from held
    for _ in range(total - len(held)):
        yield pad_batch(held[0], size, 0)


def pad_batch(batch: dict, size: int, num_real: int) -> dict:
    """Pad every feature to `size` rows by repeating row 0; `_mask` is False on padding."""
    out = {}
    reps = np.concatenate([np.arange(num_real), np.zeros(size - num_real, np.int64)])
    for k, v in batch.items():
        if k == "_mask":
            continue
        v = np.asarray(v)
        out[k] = v[reps] if len(v) else v
    out["_mask"] = np.arange(size) < num_real
    return out


def _max_over_processes(n: int) -> int:
    from jax.experimental import multihost_utils

    return int(np.max(multihost_utils.process_allgather(np.asarray(n, np.int32))))


def to_global(batch: dict, mesh, rules, keys=None) -> dict:
    """This process's numpy batch -> global arrays sharded along `batch`."""
    import jax

    out = {}
    for k, v in batch.items():
        if keys is not None and k not in keys:
            continue
        v = np.asarray(v)
        out[k] = jax.make_array_from_process_local_data(
            mesh_lib.batch_sharding(mesh, rules, v.ndim), v
        )
    return out


def prefetch_to_device(batches: Iterator[dict], mesh, rules, keys, size: int = 2) -> Iterator[dict]:
    """Keep `size` global batches in flight, built in a background thread."""
    return loader.threaded((to_global(b, mesh, rules, keys) for b in batches), size)
