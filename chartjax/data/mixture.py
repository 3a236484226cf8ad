"""Sources mixed by rate (MatCha's pretraining mixture; docs/pretraining.md), and sources whose
records are generated from their index.

`MixtureSource`: row g of the global training stream (g = step * global_batch + the row's place
in the global batch, the processes' shards concatenated in process order, as IndexedSource)
comes from component i with probability w_i / sum(w), drawn by an RNG keyed on (seed, g) alone.
Which component a row reads, and which of its examples, are pure functions of (seed, g): a run
resumed at step s computes its first batch at once (no replay of the s earlier batches) and sees
the batches of an uninterrupted run. Component i's example for row g is the g-th of its own
stream (TfdsSource: the (seed, i, epoch) permutation of this process's share, at the process's
local position of g; GeneratedSource: record g): each component's stream is thinned at its rate
rather than read in order, which is what makes any position constant-cost.

Evaluation split "name" reads component `name`'s held-out examples (`eval_splits` maps a split
to (component, the component's split)).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from chartjax.data import sources

DRAW_KEY = 0x6D6978  # "mix": the component draw's RNG stream, apart from the components'


def draw_components(seed: int, positions: Sequence[int], weights: Sequence[float]) -> np.ndarray:
    """The component of each stream position: i with probability weights[i] / sum(weights)."""
    w = np.asarray(weights, np.float64)
    if w.ndim != 1 or len(w) == 0 or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"mixture weights must be >= 0 with a positive sum, got {list(weights)}")
    edges = np.cumsum(w / w.sum())
    u = np.array([np.random.default_rng([seed, DRAW_KEY, int(g)]).random() for g in positions])
    return np.minimum(np.searchsorted(edges, u, side="right"), len(w) - 1)


@dataclasses.dataclass
class GeneratedSource:
    """Records `record(seed, index) -> {"id", "prompt", "target", "meta", ...}` from an
    unbounded generator (cheap: drawing images belongs in the task's feature map, which runs in
    the loader's workers): training row g is record g of the stream seed (a corpus that never
    repeats); evaluation split `name` is records start .. start + count - 1 of `eval_seed`,
    `splits[name] = (start, count)` (a seed apart from training's: `train.seed` is small by
    convention; a run seeded with `eval_seed` itself would train on its held-out records).
    """

    record: Callable[[int, int], dict]
    splits: Mapping[str, tuple[int, int]] = dataclasses.field(
        default_factory=lambda: {"validation": (0, 100)}
    )
    eval_seed: int = 999_983

    def example_at(self, seed: int, g: int, local: int, process_index: int, process_count: int):
        del local, process_index, process_count  # a pure function of the global position
        return _as_record(self.record(seed, g))

    def train_examples(self, *, seed, start_step, local_batch_size, process_index, process_count):
        for g, local in _positions(start_step, local_batch_size, process_index, process_count):
            yield self.example_at(seed, g, local, process_index, process_count)

    def eval_examples(self, split, *, process_index, process_count):
        if split not in self.splits:
            raise KeyError(f"no evaluation split {split!r}; known: {sorted(self.splits)}")
        start, count = self.splits[split]
        mine = sources.process_records(count, process_index, process_count)
        return [_as_record(self.record(self.eval_seed, start + i)) for i in mine]


def _as_record(rec: dict) -> dict:
    """A generated record in TfdsSource's form (strings, `meta` as JSON); other keys (an image,
    or what the feature map needs to draw it) pass through."""
    out = dict(rec)
    out.update({k: str(rec[k]) for k in ("id", "prompt", "target")})
    out["meta"] = json.dumps(rec.get("meta", {}), sort_keys=True)
    return out


def _positions(start_step, local_batch_size, process_index, process_count):
    """(global row g, this process's local stream position) from `start_step` on."""
    step = start_step
    while True:
        base = step * local_batch_size * process_count + process_index * local_batch_size
        for j in range(local_batch_size):
            yield base + j, step * local_batch_size + j
        step += 1


class _TfdsStream:
    """Random access into a TfdsSource's training stream: this process's share in an (seed,
    component, epoch) permutation; the current epoch's permutation is kept."""

    def __init__(self, source: sources.TfdsSource, component: int):
        self.source, self.component = source, component
        self._perm: tuple[tuple, np.ndarray] = ((), np.zeros(0, np.int64))

    def example_at(self, seed, g, local, process_index, process_count):
        examples = self.source.examples(self.source.train_split, process_index, process_count)
        n = len(examples)
        if n == 0:
            raise ValueError("no training examples in this process's share of the split")
        epoch, within = divmod(local, n)
        key = (seed, process_index, process_count, epoch)
        if self._perm[0] != key:
            rng = np.random.default_rng([seed, DRAW_KEY, self.component, epoch])
            self._perm = (key, rng.permutation(n))
        return examples[int(self._perm[1][within])]


@dataclasses.dataclass
class MixtureSource:
    """Components (name -> source with `example_at`, or a TfdsSource) mixed by `weights`.

    eval_splits: split -> (component, that component's split); by default each component's
    name reads its "validation" (GeneratedSource) or its own first split.
    """

    components: Mapping[str, object]
    weights: Mapping[str, float]
    eval_splits: Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if set(self.weights) - set(self.components):
            raise ValueError(
                f"weights for unknown components {set(self.weights) - set(self.components)}"
            )
        self.names = [n for n in self.components if self.weights.get(n, 0) > 0]
        if not self.names:
            raise ValueError(f"no component has a positive weight: {dict(self.weights)}")
        self._streams = [
            _TfdsStream(c, i) if isinstance(c, sources.TfdsSource) else c
            for i, c in enumerate(self.components[n] for n in self.names)
        ]

    @property
    def rates(self) -> dict[str, float]:
        total = sum(self.weights[n] for n in self.names)
        return {n: self.weights[n] / total for n in self.names}

    def component_of(self, seed: int, positions: Sequence[int]) -> list[str]:
        picks = draw_components(seed, positions, [self.weights[n] for n in self.names])
        return [self.names[i] for i in picks]

    def train_examples(self, *, seed, start_step, local_batch_size, process_index, process_count):
        weights = [self.weights[n] for n in self.names]
        for g, local in _positions(start_step, local_batch_size, process_index, process_count):
            i = int(draw_components(seed, [g], weights)[0])
            yield self._streams[i].example_at(seed, g, local, process_index, process_count)

    def eval_examples(self, split, *, process_index, process_count):
        name, sub = self.eval_splits.get(split, (split, None))
        if name not in self.components:
            raise KeyError(f"no evaluation split {split!r}; components: {sorted(self.components)}")
        source = self.components[name]
        if sub is None:
            sub = "validation" if isinstance(source, GeneratedSource) else split
        return source.eval_examples(sub, process_index=process_index, process_count=process_count)
