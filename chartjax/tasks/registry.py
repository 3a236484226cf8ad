"""Tasks: one per benchmark. A task = dataset + preprocessing + targets + loss + postprocess +
metrics; `train`, `evaluate` and `infer` only ever talk to this interface.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import gin

Batch = dict[str, Any]


@dataclasses.dataclass
class Task:
    """The benchmark-specific half of a run.

    train_batches(global_batch_size, seed, start_step, process_index, process_count) yields this
      process's share of each global batch (numpy), starting at global step `start_step`, so a
      resumed run sees exactly the batches an uninterrupted one would.
    eval_batches(split, global_batch_size, process_index, process_count) yields padded batches
      with a `_mask` feature; every process yields the same number of batches.
    loss(model, batch, train) -> (scalar loss, dict of scalar aux metrics); traced inside jit.
    predict(model, batch) -> array of per-example predictions; traced inside jit.
    score(predictions, examples, split) -> (metrics, breakdowns, prediction rows) on the host.
    model_inputs: the batch keys the model consumes (everything else stays on the host).
    score_inputs: model inputs that `score` also reads (kept on the host during evaluation;
      large inputs such as images are not kept).
    """

    name: str
    train_batches: Callable[..., Iterator[Batch]]
    eval_batches: Callable[..., Iterator[Batch]]
    loss: Callable[..., tuple[Any, dict]]
    predict: Callable[..., Any]
    score: Callable[..., tuple[dict, dict, list[dict]]]
    model_inputs: tuple[str, ...]
    eval_splits: tuple[str, ...] = ()
    score_inputs: tuple[str, ...] = ("label",)
    info: dict = dataclasses.field(default_factory=dict)


_REGISTRY: dict[str, Callable[..., Task]] = {}


def register(name: str):
    def wrap(factory):
        _REGISTRY[name] = factory
        return factory

    return wrap


@gin.configurable
def get_task(name: str = gin.REQUIRED, **kwargs) -> Task:
    # Import the task modules lazily so `chartjax.tasks` stays cheap to import.
    from chartjax.tasks import (  # noqa: F401
        chart_info,
        chart_to_text,
        chartcheck,
        deplot,
        figureqa,
        seq2seq_synthetic,
        synthetic,
    )

    if name not in _REGISTRY:
        raise KeyError(f"unknown task {name!r}; registered: {sorted(_REGISTRY)}")
    return _REGISTRY[name](**kwargs)
