"""Choosing the parameters to report by a moving average of one random batch's score per update.

The FigureQA baselines' protocol (Kahou et al. 2017, §5; the co-author's
`vmichals/FigureQA-baseline/train_model_on_figureqa.py`), as a rule of the generic train loop:

* after every update, score the model (eval mode, the task's own `predict` and `evaluate`) on
  one random batch of the selection split (a shuffled, repeated stream of it);
* keep an exponential moving average of that score (decay 0.9). The co-author's code uses
  `tf.train.ExponentialMovingAverage(decay=.9, zero_debias=True)` on a tensor: the average
  starts at 0 and is divided by 1 - decay^t, so after the first update it equals the first
  score. `zero_debias=False` gives the plain average started at 0;
* from update `start` (100) on, the parameters whose average beats every earlier one (strictly)
  are the best: they are what the run reports, evaluated on a whole split at the end.

The best train state is held in device memory (one more copy of the state; a jitted copy, so
it works on sharded multi-host arrays), and written to `<workdir>/best/<step>` through the
Checkpointer's best-checkpoint manager only at the periodic checkpoints and at the end: an
Orbax save at every improving update would cost more than the update on CPU. The average and
the best step and value are stored in every checkpoint's metadata, so a resumed run continues
the same average and, replaying the same batches, selects the same parameters.

`train` knows no benchmark: the split, metric and numbers come from gin
(`train.selection = @BatchEmaSelection()`, see gin_configs/tasks/figureqa_rn.gin).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterator

import gin
import jax
import jax.numpy as jnp
import numpy as np

from chartjax import checkpoint as ckpt_lib
from chartjax.data import pipeline, sources


@gin.configurable
@dataclasses.dataclass(frozen=True)
class BatchEmaSelection:
    """The rule. split: where the random batches come from; metric: a key of the task's
    `evaluate` metrics on one batch (higher is better); decay, zero_debias: the moving average;
    start: the first update at which parameters may be selected; batch_size: rows per scored
    batch (None: train's eval batch size); shuffle_buffer: unused (the random stream draws a
    whole-split permutation per pass; kept for recipes that bind it); final_split: the whole split the
    best parameters are evaluated on at the end (None: no final evaluation)."""

    split: str = "validation2"
    metric: str = "accuracy"
    decay: float = 0.9
    start: int = 100
    zero_debias: bool = True
    batch_size: int | None = None
    shuffle_buffer: int | None = None
    final_split: str | None = "validation2"

    def __post_init__(self):
        if not 0.0 <= self.decay < 1.0:
            raise ValueError(f"BatchEmaSelection.decay must be in [0, 1), got {self.decay}")
        if self.start < 1:
            raise ValueError(f"BatchEmaSelection.start must be >= 1 (an update), got {self.start}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"BatchEmaSelection.batch_size must be >= 1, got {self.batch_size}")

    @property
    def key(self) -> str:
        """The name of the averaged score in logs and in the best checkpoint's metrics."""
        return f"selection_{self.metric}_ema"


# -------------------------------------------------------------------- arithmetic (host) ----


@dataclasses.dataclass
class Tracker:
    """The moving average and the best update so far; plain numbers, saved in checkpoint
    metadata (`state_dict` / `from_state`)."""

    decay: float
    start: int
    zero_debias: bool = True
    biased: float = 0.0  # decay-weighted sum, started at 0
    count: int = 0  # scores averaged so far
    best_value: float = -math.inf
    best_step: int | None = None

    @property
    def value(self) -> float | None:
        if not self.count:
            return None
        if self.zero_debias:
            return self.biased / (1.0 - self.decay**self.count)
        return self.biased

    def observe(self, step: int, score: float) -> bool:
        """Adds the score of the parameters after update `step`; True when they become the
        best (from update `start` on, a strictly higher average than any before)."""
        if not math.isfinite(score):
            raise FloatingPointError(f"selection score is {score} at update {step}")
        self.biased = self.decay * self.biased + (1.0 - self.decay) * score
        self.count += 1
        value = self.value
        if step >= self.start and value > self.best_value:
            self.best_value, self.best_step = value, step
            return True
        return False

    def state_dict(self) -> dict:
        best = None if self.best_step is None else self.best_value
        return {
            "biased": self.biased,
            "count": self.count,
            "best_value": best,
            "best_step": self.best_step,
        }

    @classmethod
    def from_state(cls, rule: BatchEmaSelection, state: dict | None) -> Tracker:
        t = cls(decay=rule.decay, start=rule.start, zero_debias=rule.zero_debias)
        if state:
            t.biased, t.count = float(state["biased"]), int(state["count"])
            if state.get("best_step") is not None:
                t.best_step, t.best_value = int(state["best_step"]), float(state["best_value"])
        return t


# -------------------------------------------------------------------- random batches -------


def random_batches(
    task,
    split: str,
    global_batch_size: int,
    *,
    seed: int,
    start_update: int,
    shuffle_buffer: int,
    process_index: int = 0,
    process_count: int = 1,
) -> Iterator[dict]:
    """One random batch of `split` per update, from update `start_update` on: the split's
    examples shuffled (seeded, a new permutation each pass) and repeated, with the task's evaluation
    features (no training augmentation, the host fields `evaluate` reads). A resumed run starts
    where it stopped (an index, no skipping), so it scores the same batches."""

    local = pipeline.local_batch_size(global_batch_size, process_count)
    if isinstance(task.source, sources.TfdsSource):  # index-based: starts at once at any update
        examples = task.source.train_examples(
            seed=seed,
            start_step=start_update,
            local_batch_size=local,
            process_index=process_index,
            process_count=process_count,
            split=split,
        )
    else:
        held = list(
            task.source.eval_examples(
                split, process_index=process_index, process_count=process_count
            )
        )
        positions = sources.stream_positions(len(held), seed, start_update * local)
        examples = (held[i] for i in positions)
    return pipeline.featurized(examples, task, True, local, drop_remainder=True)


def batch_score(task, predictions: np.ndarray, batch: dict, split: str, metric: str) -> float:
    """The task's `metric` on one batch, through its own `evaluate` (as a full evaluation)."""
    host = {
        k: np.asarray(v)
        for k, v in batch.items()
        if k != "_mask" and (k not in task.model_inputs or k in task.host_inputs)
    }
    scores = task.evaluate(np.asarray(predictions), host, split).scores.metrics
    if metric not in scores:
        raise KeyError(
            f"BatchEmaSelection.metric={metric!r} is not among the {task.name} task's metrics "
            f"on {split!r}: {sorted(scores)}"
        )
    return float(scores[metric])


# -------------------------------------------------------------------- in the train loop ----


class Selector:
    """What `train` drives: `after_update` after each update, `meta` into each checkpoint,
    `write_best` at each checkpoint and at the end, `best` for the final evaluation.

    score(step, state) -> float: the selection score of `state` (after update `step`); `train`
    passes `make_scorer(...)`, tests may pass any function.
    """

    def __init__(
        self,
        rule: BatchEmaSelection,
        *,
        score: Callable[[int, dict], float],
        state_shardings,
        resumed_meta: dict | None = None,
    ):
        self.rule = rule
        self.tracker = Tracker.from_state(rule, (resumed_meta or {}).get("selection"))
        self._score = score
        self._copy = jax.jit(
            lambda s: jax.tree.map(jnp.copy, s),
            in_shardings=(state_shardings,),
            out_shardings=state_shardings,
        )
        self.held = None  # a copy of the best train state, on device
        self.held_step: int | None = None
        self.held_meta: dict = {}
        self.last = None  # the last score and average, for the log

    def after_update(self, step: int, state) -> bool:
        score = self._score(step, state)
        improved = self.tracker.observe(step, score)
        if improved:  # the state and the average as they are at this update
            self.held, self.held_step = self._copy(state), step
            self.held_meta = self.meta()
        self.last = {self.rule.key.removesuffix("_ema"): score, self.rule.key: self.tracker.value}
        return improved

    def meta(self) -> dict:
        return {"selection": self.tracker.state_dict()}

    def write_best(self, ckpt: ckpt_lib.Checkpointer, meta_for: Callable[[int], dict]) -> None:
        """Writes the held best state to `<workdir>/best/<step>` (once; a resumed run that
        replays an update whose best is already written skips it)."""
        if self.held is None or ckpt.best is None:
            return
        step = self.held_step
        if step not in ckpt.best.all_steps():
            meta = {**meta_for(step), **self.held_meta}
            ckpt.save_best(step, self.held, meta, {self.rule.key: self.tracker.best_value})
            ckpt.best.wait_until_finished()

    def best(self, ckpt: ckpt_lib.Checkpointer, current_state, abstract, shardings):
        """(step, train state) of the selected parameters, or None before update `start`: the
        held copy, else (a resumed run that has not improved since) read from `best/<step>`."""
        step = self.tracker.best_step
        if step is None:
            return None
        if self.held is not None and self.held_step == step:
            return step, self.held
        path = os.path.join(os.path.dirname(ckpt.dir), "best", str(step))
        if not os.path.isdir(path):
            raise ckpt_lib.CheckpointError(
                f"the selected parameters (update {step}, {self.rule.key}="
                f"{self.tracker.best_value:.4f}) are not in {os.path.dirname(path)}: was the "
                "best/ folder removed?"
            )
        # Prediction reads everything but the optimizer state: the current one stands in.
        target = {
            k: jax.tree.map(
                lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
                abstract[k],
                shardings[k],
            )
            for k in abstract
            if k != "opt_state"
        }
        restored = ckpt_lib.restore_partial(path, target)
        return step, {**restored, "opt_state": current_state["opt_state"]}


def make_scorer(
    rule: BatchEmaSelection,
    task,
    predict,
    mesh,
    axis_rules,
    *,
    batch_size: int,
    seed: int,
    start_update: int,
) -> Callable[[int, dict], float]:
    """score(step, state): the task's metric on the next random batch of `rule.split`.

    With several processes each scores its own rows; the values are averaged weighted by rows,
    which is the batch's value for per-example means such as accuracy."""
    pid, nproc = jax.process_index(), jax.process_count()
    buffer = rule.shuffle_buffer or getattr(task.source, "shuffle_buffer", None) or 10_000
    try:  # not the training stream's seed: the two shuffles are independent
        batches = random_batches(
            task,
            rule.split,
            batch_size,
            seed=seed + 1,
            start_update=start_update,
            shuffle_buffer=buffer,
            process_index=pid,
            process_count=nproc,
        )
    except ValueError as err:  # e.g. TFDS: "Unknown split 'validation2'. Should be one of ..."
        raise ValueError(
            f"BatchEmaSelection.split={rule.split!r} (the selection rule, train.selection): {err}"
        ) from err
    local = pipeline.local_batch_size(batch_size, nproc)

    def score(step: int, state) -> float:
        batch = next(batches)
        inputs = pipeline.to_global(batch, mesh, axis_rules, task.model_inputs)
        preds = np.asarray(jax.device_get(predict(state, inputs)))[pid * local : (pid + 1) * local]
        value = batch_score(task, preds, batch, rule.split, rule.metric)
        if nproc > 1:
            from jax.experimental import multihost_utils

            values = multihost_utils.process_allgather(np.asarray(value, np.float64))
            value = float(np.mean(values))  # equal rows per process
        return value

    return score
