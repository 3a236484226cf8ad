"""Run logging: readable log lines, train_metrics.jsonl, TensorBoard events, a progress bar.

A resumed run (`resume_from(step)`) logs each step once: the rows of steps after the restored
one, which the interrupted run logged after its last checkpoint, are dropped from
train_metrics.jsonl, and the new TensorBoard events file starts with a purge at step + 1
(tensorboardX's `purge_step`: TensorBoard hides the older events of those steps).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time

from chartjax.metrics.report import atomic_write_text

logger = logging.getLogger("chartjax")


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
            h = logging.StreamHandler(sys.stderr)
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
        try:
            from tensorboardX import SummaryWriter

            # A unique suffix: two writers in one second would otherwise share a file name,
            # and the second truncates the first.
            self._tb = SummaryWriter(
                os.path.join(self.workdir, "tensorboard"),
                purge_step=self._purge_step,
                filename_suffix=f".{time.time_ns()}",
            )
        except ImportError:  # TensorBoard events are a convenience, not a contract
            logger.warning("tensorboardX missing: no TensorBoard events")

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
        """A bar over steps, or over the wall-clock budget when one ends the run first.

        With `budget_s` the bar counts seconds of the budget (it starts after compilation, as
        the budget does: `start_budget`) and shows the step as a postfix.
        """
        if self.enabled and enabled:
            from tqdm import tqdm

            self._budget = budget_s
            self._step = start
            self._t0 = None
            if budget_s is None:
                self._bar = tqdm(
                    total=total,
                    initial=start,
                    desc="train",
                    unit="step",
                    dynamic_ncols=True,
                    file=sys.stderr,
                    mininterval=2.0,
                )
            else:
                self._bar = tqdm(
                    total=round(budget_s),
                    desc=f"train (budget {budget_s:g}s)",
                    unit="s",
                    dynamic_ncols=True,
                    file=sys.stderr,
                    mininterval=2.0,
                    bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f}s [{elapsed}{postfix}]",
                )

    def start_budget(self) -> None:
        """The time budget starts now (after the first, compiling step)."""
        self._t0 = time.time()

    def advance(self) -> None:
        if self._bar is None:
            return
        self._step += 1
        if self._budget is None:
            self._bar.update(1)
            return
        if self._t0 is not None:
            self._bar.n = min(time.time() - self._t0, self._budget)
        self._bar.set_postfix(step=self._step, refresh=self._step % 10 == 0)

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
            self._bar.set_postfix(loss=f"{m['loss']:.4f}", refresh=False)
        else:
            self.info(" ".join(f"{k}={v:.4g}" for k, v in m.items()))

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
