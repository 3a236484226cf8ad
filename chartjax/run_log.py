"""Run logging: readable log lines, train_metrics.jsonl, TensorBoard events, a progress bar.

TensorBoard tags: `train/<metric>` for each logged training row, `eval/<split>/<metric>` for
each evaluation (the periodic and final ones of training, and chartjax-eval's of a workdir:
`write_eval_events`), all in `<workdir>/tensorboard/`.

A resumed run (`resume_from(step)`) logs each step once: the rows of steps after the restored
one, which the interrupted run logged after its last checkpoint, are dropped from
train_metrics.jsonl, and the new TensorBoard events file starts with a purge at step + 1
(tensorboardX's `purge_step`: TensorBoard hides the older events of those steps).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from collections.abc import Mapping

from chartjax.metrics.report import atomic_write_text

logger = logging.getLogger("chartjax")

# What TensorBoard accepts in a tag (tensorboardX rewrites anything else, with a log line).
_TAG_UNSAFE = re.compile(r"[^-/\w.]")


def eval_tag(split: str, metric: str, prefix: str = "eval") -> str:
    """`eval/<split>/<metric>`; a split slice's `[:10%]` or a `+` becomes `_`."""
    return f"{prefix}/{_TAG_UNSAFE.sub('_', split)}/{metric}"


def _summary_writer(workdir: str, purge_step: int | None = None):
    """A tensorboardX writer into <workdir>/tensorboard, or None without tensorboardX."""
    try:
        from tensorboardX import SummaryWriter
    except ImportError:  # TensorBoard events are a convenience, not a contract
        logger.warning("tensorboardX missing: no TensorBoard events")
        return None
    # A unique suffix: two writers in one second would otherwise share a file name, and the
    # second truncates the first.
    return SummaryWriter(
        os.path.join(workdir, "tensorboard"),
        purge_step=purge_step,
        filename_suffix=f".{time.time_ns()}",
    )


def _add_eval_scalars(writer, step: int, results: Mapping[str, Mapping], prefix: str) -> None:
    for split, metrics in results.items():
        for name, value in (metrics or {}).items():
            writer.add_scalar(eval_tag(split, name, prefix), float(value), step)
    writer.flush()  # an evaluation is rare and read soon after: not left in the buffer


def write_eval_events(workdir: str, step: int, results: Mapping[str, Mapping]) -> None:
    """chartjax-eval's metrics of a workdir's checkpoint as `eval/<split>/<metric>` scalars at
    its step, in an events file of their own beside the training run's."""
    if not any(results.values()):  # predictions-only splits: nothing to plot
        return
    writer = _summary_writer(workdir)
    if writer is not None:
        _add_eval_scalars(writer, step, results, "eval")
        writer.close()


class _StderrHandler(logging.StreamHandler):
    """Writes to the `sys.stderr` of the moment, not the one of the first run in the process (a
    later redirect or capture, e.g. pytest's per-test one, sees the lines)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):  # StreamHandler.__init__ sets it; the property reads sys.stderr
        pass


class RunLog:
    """Writes on process 0 only (`enabled`); other processes just log to stderr."""

    def __init__(self, workdir: str, enabled: bool = True):
        self.enabled = enabled
        self.workdir = workdir
        self._bar = None
        self._jsonl = None
        self._tb = None
        self._purge_step = None
        if not logger.handlers:
            h = _StderrHandler()
            h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
            logger.addHandler(h)
            logger.setLevel(logging.INFO)
            logger.propagate = False
        self._opened = False  # the files open at the first metrics row

    def resume_from(self, step: int) -> None:
        """The run continues after `step`: logged rows of later steps are dropped (the
        interrupted run wrote them after its last checkpoint) and TensorBoard purges them."""
        if not self.enabled:
            return
        if self._opened:
            raise RuntimeError("RunLog.resume_from must come before the first metrics row")
        path = os.path.join(self.workdir, "train_metrics.jsonl")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
            kept = [line for line in lines if _row_step(line) <= step]
            if len(kept) != len(lines):
                atomic_write_text(path, "".join(kept))
        tb = os.path.join(self.workdir, "tensorboard")
        if os.path.isdir(tb) and any(n.startswith("events.out.tfevents.") for n in os.listdir(tb)):
            self._purge_step = step + 1

    def _open(self) -> None:
        self._opened = True
        self._jsonl = open(os.path.join(self.workdir, "train_metrics.jsonl"), "a")
        self._tb = _summary_writer(self.workdir, self._purge_step)

    def info(self, msg: str) -> None:
        if self._bar is not None:
            self._bar.write(time.strftime("%H:%M:%S ") + msg, file=sys.stderr)
        else:
            logger.info(msg)

    def warning(self, msg: str) -> None:
        if self._bar is not None:
            self._bar.write(time.strftime("%H:%M:%S WARNING ") + msg, file=sys.stderr)
        else:
            logger.warning(msg)

    def start_progress(
        self, start: int, total: int, enabled: bool = True, budget_s: float | None = None
    ) -> None:
        """A bar over the steps; with a wall-clock budget (`budget_s`) its use is a postfix
        (`budget=16/600s`), counted from `start_budget`, after compilation, as the budget is."""
        if self.enabled and enabled:
            from tqdm import tqdm

            self._budget = budget_s
            self._t0 = None
            self._postfix = {}
            self._bar = tqdm(
                total=total,
                initial=start,
                desc="train",
                unit="step",
                dynamic_ncols=True,
                file=sys.stderr,
                mininterval=2.0,
            )

    def start_budget(self) -> None:
        """The time budget starts now (after the first, compiling step)."""
        self._t0 = time.time()

    def advance(self) -> None:
        if self._bar is None:
            return
        if self._budget is not None and self._t0 is not None:
            used = min(time.time() - self._t0, self._budget)
            self._postfix["budget"] = f"{used:.0f}/{self._budget:g}s"
            self._bar.set_postfix(self._postfix, refresh=False)
        self._bar.update(1)

    def metrics(self, m: dict) -> None:
        if not self.enabled:
            return
        if not self._opened:
            self._open()
        self._jsonl.write(json.dumps(m) + "\n")
        self._jsonl.flush()
        if self._tb is not None:
            for k, v in m.items():
                if k != "step":
                    self._tb.add_scalar(f"train/{k}", v, m["step"])
        if self._bar is not None:
            self._postfix["loss"] = f"{m['loss']:.4f}"
            self._bar.set_postfix(self._postfix, refresh=False)
        else:
            self.info(" ".join(f"{k}={v:.4g}" for k, v in m.items()))

    def eval_metrics(self, step: int, split: str, metrics: Mapping, prefix: str = "eval") -> None:
        """One split's evaluation at `step` as `<prefix>/<split>/<metric>` scalars."""
        if not self.enabled or not metrics:
            return
        if not self._opened:
            self._open()
        if self._tb is not None:
            _add_eval_scalars(self._tb, step, {split: metrics}, prefix)

    def close_progress(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def close(self) -> None:
        self.close_progress()
        if self._jsonl:
            self._jsonl.close()
        if self._tb:
            self._tb.close()


def _row_step(line: str) -> float:
    """The step of a train_metrics.jsonl line; a torn or blank line counts as after every step."""
    try:
        return json.loads(line)["step"]
    except (ValueError, KeyError, TypeError):
        return float("inf")
