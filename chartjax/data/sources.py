"""Where examples come from: built TFDS datasets, or examples computed from their index.

Both give tf.data datasets of raw examples, this process's share only; chartjax/data/pipeline.py
maps them to features and batches them the same way for every task.

* `TfdsSource`: a built TFDS dataset. Each process reads its slice of the split
  (`tfds.even_splits`); encoded features (images) stay undecoded until the task's feature map.
  Training shuffles with a fixed seed (reshuffled each epoch), repeats, and skips the examples a
  resumed run has seen before anything is decoded. An optional `expand` turns one TFDS example
  (Python values) into any number of records `{"id", "prompt", "target", "meta"}` (seq2seq tasks).
* `IndexedSource`: examples that are a pure function of their index (synthetic smoke tasks), so
  any process can compute exactly its rows of any global batch without files: the global batch
  is the concatenation of the per-process shards in process order (DESIGN.md §4).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

RECORD_KEYS = ("id", "prompt", "target", "meta")


def tfds_builder_dir(name: str, data_dir: str) -> str:
    """The newest version folder of a built TFDS dataset (`<data_dir>/<name>/<version>`)."""
    root = os.path.join(os.path.expanduser(data_dir), name)
    if not os.path.isdir(root):
        raise FileNotFoundError(
            f"no TFDS dataset {name!r} under {data_dir} (looked for {root}); "
            f"build it with `tfds build tfds_builders/{name.split('/')[0]} "
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


def tf_options(deterministic: bool = True):
    """tf.data options of every chartjax input pipeline (deterministic order, own threads)."""
    import tensorflow as tf

    opts = tf.data.Options()
    opts.deterministic = deterministic
    opts.threading.private_threadpool_size = max(os.cpu_count() or 1, 2)
    opts.threading.max_intra_op_parallelism = 1
    return opts


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


@dataclasses.dataclass
class TfdsSource:
    """A built TFDS dataset `name` (`name/config` for configs) under `data_dir`.

    directory: a built dataset's version folder, instead of looking it up by name.
    expand(example) -> records: when given, each TFDS example (Python values of `field_keys`,
      dotted for nested features; `encoded_keys` stay encoded bytes) becomes its records, each
      carrying the encoded `image_key` feature as `image_bytes`.
    """

    name: str
    data_dir: str = "~/tensorflow_datasets"
    train_split: str = "train"
    shuffle_buffer: int = 10_000
    expand: Callable[[dict], list[dict]] | None = None
    field_keys: Sequence[str] = ()
    image_key: str | None = "image"
    encoded_keys: Sequence[str] = ()
    directory: str | None = None
    _builder: Any = dataclasses.field(default=None, init=False, repr=False)

    @property
    def builder_dir(self) -> str:
        if self.directory is None:
            self.directory = tfds_builder_dir(self.name, self.data_dir)
        return self.directory

    def builder(self):
        import tensorflow_datasets as tfds

        if self._builder is None:
            self._builder = tfds.builder_from_directory(self.builder_dir)
        return self._builder

    def num_examples(self, split: str) -> int:
        return self.builder().info.splits[split].num_examples

    def decoders(self) -> dict | None:
        """Encoded features stay bytes: the task's feature map decodes what it uses."""
        import tensorflow_datasets as tfds

        skipped = {k for k in ("image", self.image_key, *self.encoded_keys) if k}
        skipped &= set(self.builder().info.features)
        return {k: tfds.decode.SkipDecoding() for k in sorted(skipped)} or None

    def _read(self, split: str, process_index: int, process_count: int):
        return self.builder().as_dataset(
            split=process_split(split, process_index, process_count),
            shuffle_files=False,
            decoders=self.decoders(),
        )

    def _expanded(self, ds):
        return ds if self.expand is None else ds.flat_map(self._expand_fn())

    def train_examples(
        self, *, seed, start_step, local_batch_size, process_index, process_count, split=None
    ):
        ds = self._read(split or self.train_split, process_index, process_count)
        ds = ds.shuffle(self.shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
        # Skip before the feature map: a resumed run pays no decoding for what it has seen.
        return self._expanded(ds).skip(start_step * local_batch_size)

    def eval_examples(self, split, *, process_index, process_count):
        return self._expanded(self._read(split, process_index, process_count))

    def ids(self, split: str) -> list[str]:
        """The example ids of a split, in order (only the `id` feature is read)."""
        ds = self.builder().as_dataset(split=split, shuffle_files=False, decoders=self.decoders())
        return [as_python(i) for i in ds.map(lambda ex: ex["id"]).as_numpy_iterator()]

    def records(self, split: str) -> Iterator[dict]:
        """Every record of a split on the host (few-shot prompts, inference over a split)."""
        for rec in self.eval_examples(split, process_index=0, process_count=1).as_numpy_iterator():
            out = {k: as_python(rec[k]) for k in RECORD_KEYS}
            out["meta"] = json.loads(out["meta"])
            if "image_bytes" in rec:
                out["image_bytes"] = rec["image_bytes"]
            yield out

    def _expand_fn(self):
        """tf map: one TFDS example -> a dataset of its records (+ the encoded image each)."""
        import tensorflow as tf

        expand, keys, encoded = self.expand, tuple(self.field_keys), set(self.encoded_keys)
        image_key = self.image_key

        def py(*values):
            example = {
                k: (bytes(np.asarray(v).item()) if k in encoded else as_python(v))
                for k, v in zip(keys, values)
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
            values = [_tf_get(ex, k) for k in keys]
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


@dataclasses.dataclass
class IndexedSource:
    """Examples computed from their index: `example(index) -> dict of numpy values`.

    Training example k of the stream is `example(permutation_e[k % num_train])` with one fixed
    permutation per epoch e (from `seed`); evaluation example k is `example(eval_offset + k)`,
    disjoint from the training ones. Every split name reads the same eval examples.
    """

    example: Callable[[int], dict]
    num_train: int
    num_eval: int
    eval_offset: int = 1_000_000

    def _dataset(self, indices: Iterator[int]):
        import tensorflow as tf

        first = self.example(0)
        signature = {
            k: tf.TensorSpec(np.shape(v), tf.as_dtype(np.asarray(v).dtype))
            if np.asarray(v).dtype.kind not in "USO"
            else tf.TensorSpec(np.shape(v), tf.string)
            for k, v in first.items()
        }
        return tf.data.Dataset.from_generator(
            lambda: (self.example(int(i)) for i in indices), output_signature=signature
        )

    def train_examples(self, *, seed, start_step, local_batch_size, process_index, process_count):
        global_batch = local_batch_size * process_count

        def indices():
            step = start_step
            while True:
                pos = np.arange(step * global_batch, (step + 1) * global_batch)
                epoch, within = pos // self.num_train, pos % self.num_train
                idx = [
                    np.random.default_rng([seed, int(e)]).permutation(self.num_train)[w]
                    for e, w in zip(epoch, within)
                ]
                yield from idx[
                    process_index * local_batch_size : (process_index + 1) * local_batch_size
                ]
                step += 1

        return self._dataset(indices())

    def eval_examples(self, split, *, process_index, process_count):
        per = -(-self.num_eval // process_count)
        mine = range(process_index * per, min((process_index + 1) * per, self.num_eval))
        return self._dataset(iter([self.eval_offset + i for i in mine]))
