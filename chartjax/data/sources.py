"""Where examples come from: built TFDS datasets, or examples computed from their index.

Both give this process's share of the raw examples as Python dicts (an iterator for training,
a sequence for evaluation); chartjax/data/pipeline.py maps them to features and batches them the
same way for every task. Nothing here imports TensorFlow.

* `TfdsSource`: a built TFDS dataset (array_record), read by random access
  (chartjax/data/tfds_records.py: `tfds.data_source`, a figure's questions and a chart's claims
  expanded into examples). Each process reads its own contiguous share of the split's records
  (a figure and all its questions in one share). Training draws a seeded permutation of this
  process's examples per epoch; example k of the stream is a pure function of (seed, k), so a run resumed at any step
  starts reading at once (no skipping) and sees exactly the batches of an uninterrupted run.
  Encoded features (images) stay undecoded until the task's feature map. An optional `expand`
  turns one example (Python values) into any number of records `{"id", "prompt", "target",
  "meta"}` (seq2seq tasks).
* `IndexedSource`: examples that are a pure function of their index (synthetic smoke tasks), so
  any process can compute exactly its rows of any global batch without files: the global batch
  is the concatenation of the per-process shards in process order (docs/design.md §4).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from chartjax import config_checks as checks
from chartjax.data import tfds_records

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


def process_records(num_records: int, process_index: int, process_count: int) -> range:
    """This process's contiguous share of a split's records (the first ones get one more)."""
    per, extra = divmod(num_records, process_count)
    start = process_index * per + min(process_index, extra)
    return range(start, start + per + (process_index < extra))


def epoch_order(seed: int, epoch: int, n: int) -> np.ndarray:
    """The order of n examples in one training epoch: a permutation drawn from (seed, epoch)."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def stream_positions(n: int, seed: int, start: int) -> Iterator[int]:
    """Example positions of the training stream from stream index `start` on: epoch after
    epoch of `epoch_order`; the start costs one permutation, whatever its value."""
    if n == 0:
        raise ValueError("no training examples in this process's share of the split")
    epoch, within = divmod(start, n)
    while True:
        yield from epoch_order(seed, epoch, n)[within:].tolist()
        epoch, within = epoch + 1, 0


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
    expand(example) -> records: when given, each example (Python values of `field_keys`,
      dotted for nested features; `encoded_keys` stay encoded bytes) becomes its records, each
      carrying the encoded `image_key` feature as `image_bytes`.
    shuffle_buffer: unused (training shuffles the whole split); kept for the recipes' bindings.
    per_record: one example per record, its nested questions / claims not expanded (a task that
      reads a figure or chart once, whether or not it has questions).
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
    per_record: bool = False
    _examples: dict = dataclasses.field(default_factory=dict, init=False, repr=False)

    @property
    def builder_dir(self) -> str:
        if self.directory is None:
            self.directory = tfds_builder_dir(self.name, self.data_dir)
        return self.directory

    def builder(self):
        return tfds_records.builder(self.builder_dir)

    def features(self) -> dict:
        """The features of the examples (questions and claims flattened into their records)."""
        return tfds_records.flat_features(self.builder().info.features)

    def num_examples(self, split: str) -> int:
        return len(self.examples(split, 0, 1))

    def data_source(self, split: str):
        skipped = {k for k in ("image", self.image_key, *self.encoded_keys) if k}
        return tfds_records.data_source(self.builder_dir, split, tuple(sorted(skipped)))

    def examples(self, split: str, process_index: int, process_count: int) -> Sequence[dict]:
        """This process's examples of `split`, by position (records read on access)."""
        key = (split, process_index, process_count)
        if key not in self._examples:
            self._examples[key] = self._read_examples(split, process_index, process_count)
        return self._examples[key]

    def _read_examples(self, split: str, process_index: int, process_count: int):
        source = self.data_source(split)
        mine = process_records(len(source), process_index, process_count)
        return _Expanded(source, mine, self._finals)

    def _finals(self, record: dict) -> list[dict]:
        """A record's examples as the task reads them (through `expand` when it has one)."""
        examples = [record] if self.per_record else tfds_records.expand(record)
        if self.expand is None:
            return examples
        out = []
        keys, encoded = tuple(self.field_keys), set(self.encoded_keys)
        for ex in examples:
            fields = {
                k: (bytes(_get(ex, k)) if k in encoded else as_python(_get(ex, k))) for k in keys
            }
            records = list(self.expand(fields))
            for r in records:
                missing = [k for k in ("id", "prompt", "target") if k not in r]
                if missing:
                    raise ValueError(f"expand() returned a record without {missing}: {r}")
                row = {k: str(r[k]) for k in ("id", "prompt", "target")}
                row["meta"] = json.dumps(r.get("meta", {}), sort_keys=True)
                if self.image_key:
                    row["image_bytes"] = _get(ex, self.image_key)
                out.append(row)
        return out

    def train_examples(
        self, *, seed, start_step, local_batch_size, process_index, process_count, split=None
    ):
        examples = self.examples(split or self.train_split, process_index, process_count)
        start = start_step * local_batch_size

        return (examples[i] for i in stream_positions(len(examples), seed, start))

    def eval_examples(self, split, *, process_index, process_count):
        return self.examples(split, process_index, process_count)

    def ids(self, split: str) -> list[str]:
        """The example ids of a split, in order."""
        return [as_python(ex["id"]) for ex in self.examples(split, 0, 1)]

    def records(self, split: str) -> Iterator[dict]:
        """Every record of a split on the host (few-shot prompts, inference over a split)."""
        for rec in self.examples(split, 0, 1):
            out = {k: as_python(rec[k]) for k in RECORD_KEYS}
            out["meta"] = json.loads(out["meta"])
            if "image_bytes" in rec:
                out["image_bytes"] = rec["image_bytes"]
            yield out


class _Expanded(collections.abc.Sequence):
    """The examples of records `mine` of a data source, by position: the record counts are read
    once (one pass), then an example is its record read and expanded."""

    def __init__(self, source, mine: range, finals: Callable[[dict], list[dict]]):
        self._source, self._finals = source, finals
        counts = np.fromiter((len(finals(source[r])) for r in mine), np.int64, len(mine))
        self._records = np.asarray(mine, np.int64)
        self._ends = np.cumsum(counts)
        self._last: tuple[int, list[dict]] = (-1, [])

    def __len__(self) -> int:
        return int(self._ends[-1]) if len(self._ends) else 0

    def __getitem__(self, i: int) -> dict:
        if not 0 <= i < len(self):
            raise IndexError(i)
        j = int(np.searchsorted(self._ends, i, side="right"))
        record = int(self._records[j])
        if self._last[0] != record:  # consecutive examples of one record read it once
            self._last = (record, self._finals(self._source[record]))
        return self._last[1][i - (int(self._ends[j - 1]) if j else 0)]

    def __iter__(self):
        for record in self._records.tolist():
            yield from self._finals(self._source[record])


def _get(example: dict, key: str):
    value = example
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

        return (self.example(int(i)) for i in indices())

    def eval_examples(self, split, *, process_index, process_count):
        per = -(-self.num_eval // process_count)
        mine = range(process_index * per, min((process_index + 1) * per, self.num_eval))
        return [self.example(self.eval_offset + i) for i in mine]


def check_splits(source, name: str, splits: Sequence[str], *, flag: str = "--split") -> None:
    """Raises ConfigError before any model is built: one line when `source`'s dataset is not
    built under its data_dir (naming the DATA_DIR binding), else one line per split the built
    dataset lacks (TFDS split strings: `validation1`, `train1[:10%]`, `a+b`) or a slice that
    selects no record. `name` is the task's, for the message. An indexed source (synthetic
    tasks) serves every split name."""
    builder = getattr(source, "builder", None)
    if builder is None:
        return
    try:
        known = list(builder().info.splits)
    except FileNotFoundError as err:
        raise checks.ConfigError(
            f"{err} (the recipes read DATA_DIR: --gin_bindings=\"DATA_DIR='/path/to/tfds'\")"
        ) from None
    problems = []
    for split in splits:
        missing = False
        for part in re.split(r"\s*\+\s*", split):
            part = re.sub(r"\[.*\]$", "", part.strip())
            if part not in known:
                missing = True
                problems.append(
                    f"{flag}={split}: {name} has no split {part!r} (it has "
                    f"{', '.join(known)}){checks.did_you_mean(part, known)}"
                )
        # A slice of a small build can hold no record ("train[95%:]" of 8): say so here, not
        # as array_record's "Paths sequence can not be of 0 length" after training.
        if not missing and not builder().info.splits[split].num_examples:
            problems.append(f"{flag}={split}: selects no record of {name}'s build")
    if problems:
        raise checks.ConfigError("\n".join(problems))
