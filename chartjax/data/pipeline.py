"""Host batches -> global jax arrays; TFDS reading with per-process shards; eval padding.

Per process: read this process's slice of the split (`tfds.even_splits`), preprocess in
tf.data's C++ threads, batch to the per-process share of the global batch, then assemble global
arrays with `jax.make_array_from_process_local_data` (the global batch is the concatenation of
the per-process shards in process order, DESIGN.md §4).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator

import jax
import numpy as np
from jax.sharding import Mesh

from chartjax import mesh as mesh_lib


def to_global(batch: dict, mesh: Mesh, rules, keys=None) -> dict:
    """This process's numpy batch -> global arrays sharded along `batch`."""
    out = {}
    for k, v in batch.items():
        if keys is not None and k not in keys:
            continue
        v = np.asarray(v)
        sharding = mesh_lib.batch_sharding(mesh, rules, v.ndim)
        out[k] = jax.make_array_from_process_local_data(sharding, v)
    return out


def prefetch_to_device(
    batches: Iterator[dict], mesh: Mesh, rules, keys, size: int = 2
) -> Iterator[dict]:
    """Keep `size` global batches in flight, built in a background thread."""
    q: queue.Queue = queue.Queue(maxsize=size)
    sentinel = object()

    def worker():
        try:
            for b in batches:
                q.put(to_global(b, mesh, rules, keys))
        except BaseException as e:  # surfaced in the consumer, never swallowed
            q.put(e)
        q.put(sentinel)

    threading.Thread(target=worker, daemon=True).start()
    while True:
        item = q.get()
        if item is sentinel:
            return
        if isinstance(item, BaseException):
            raise item
        yield item


def tfds_builder_dir(name: str, data_dir: str) -> str:
    """The newest version folder of a built TFDS dataset (`<data_dir>/<name>/<version>`)."""
    root = os.path.join(os.path.expanduser(data_dir), name)
    if not os.path.isdir(root):
        raise FileNotFoundError(
            f"no TFDS dataset {name!r} under {data_dir} (looked for {root}); "
            f"build it with `tfds build tfds_builders/{name} "
            f"--manual_dir=... --data_dir={data_dir}`"
        )
    versions = sorted(
        (d for d in os.listdir(root) if d[:1].isdigit()),
        key=lambda v: tuple(int(x) for x in v.split(".")),
    )
    if not versions:
        raise FileNotFoundError(f"{root} holds no version folder")
    return os.path.join(root, versions[-1])


def process_split(split: str, process_index: int, process_count: int) -> str:
    import tensorflow_datasets as tfds

    return tfds.even_splits(split, n=process_count, drop_remainder=False)[process_index]


def _tf_options(deterministic: bool = True):
    import tensorflow as tf

    opts = tf.data.Options()
    opts.deterministic = deterministic
    opts.threading.private_threadpool_size = max(os.cpu_count() or 1, 2)
    opts.threading.max_intra_op_parallelism = 1
    return opts


def tfds_train_batches(
    builder_dir: str,
    split: str,
    preprocess: Callable,
    *,
    local_batch_size: int,
    seed: int,
    start_step: int,
    process_index: int,
    process_count: int,
    shuffle_buffer: int = 10_000,
) -> Iterator[dict]:
    """Infinite, deterministic training batches for this process, resumable by step.

    The stream is (shuffle with a fixed seed, reshuffled each epoch) -> repeat; a resumed run
    skips `start_step * local_batch_size` *undecoded* records, so it continues exactly where an
    uninterrupted run would be without paying for decoding the skipped examples.
    """
    import tensorflow as tf
    import tensorflow_datasets as tfds

    builder = tfds.builder_from_directory(builder_dir)
    ds = builder.as_dataset(
        split=process_split(split, process_index, process_count),
        shuffle_files=False,
        decoders={"image": tfds.decode.SkipDecoding()}
        if "image" in builder.info.features
        else None,
    )
    ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.skip(start_step * local_batch_size)
    ds = ds.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(local_batch_size, drop_remainder=True).prefetch(2)
    ds = ds.with_options(_tf_options())
    return ds.as_numpy_iterator()


def tfds_eval_batches(
    builder_dir: str,
    split: str,
    preprocess: Callable,
    *,
    local_batch_size: int,
    process_index: int,
    process_count: int,
) -> Iterator[dict]:
    """Finite eval batches padded to a fixed count per process; `_mask` marks real rows."""
    import tensorflow as tf
    import tensorflow_datasets as tfds

    builder = tfds.builder_from_directory(builder_dir)
    total = builder.info.splits[split].num_examples
    per_process = -(-total // process_count)
    num_batches = -(-per_process // local_batch_size)
    ds = builder.as_dataset(
        split=process_split(split, process_index, process_count),
        shuffle_files=False,
        decoders={"image": tfds.decode.SkipDecoding()}
        if "image" in builder.info.features
        else None,
    )
    ds = ds.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(local_batch_size).prefetch(2).with_options(_tf_options())
    produced = 0
    template = None
    for batch in ds.as_numpy_iterator():
        n = len(next(iter(batch.values())))
        template = batch
        yield pad_batch(batch, local_batch_size, n)
        produced += 1
    while produced < num_batches:  # hosts with a shorter shard run empty batches
        if template is None:
            raise ValueError(
                f"split {split!r} of {builder_dir} is empty for process {process_index}"
            )
        yield pad_batch(template, local_batch_size, 0)
        produced += 1


def pad_batch(batch: dict, size: int, num_real: int) -> dict:
    """Pad every feature to `size` rows by repeating row 0; `_mask` is False on padding."""
    out = {}
    for k, v in batch.items():
        v = np.asarray(v)
        reps = np.concatenate([np.arange(num_real), np.zeros(size - num_real, np.int64)])
        out[k] = v[reps] if len(v) else v
    out["_mask"] = np.arange(size) < num_real
    return out
