"""Run logging: readable log lines, train_metrics.jsonl, TensorBoard events, a progress bar."""

from __future__ import annotations

import json
import logging
import os
import sys
import time

logger = logging.getLogger("chartjax")


class RunLog:
    """Writes on process 0 only (`enabled`); other processes just log to stderr."""

    def __init__(self, workdir: str, enabled: bool = True):
        self.enabled = enabled
        self._bar = None
        self._jsonl = None
        self._tb = None
        if not logger.handlers:
            h = logging.StreamHandler(sys.stderr)
            h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
            logger.addHandler(h)
            logger.setLevel(logging.INFO)
            logger.propagate = False
        if enabled:
            self._jsonl = open(os.path.join(workdir, "train_metrics.jsonl"), "a")
            try:
                from tensorboardX import SummaryWriter

                self._tb = SummaryWriter(os.path.join(workdir, "tensorboard"))
            except ImportError:  # TensorBoard events are a convenience, not a contract
                logger.warning("tensorboardX missing: no TensorBoard events")

    def info(self, msg: str) -> None:
        if self._bar is not None:
            self._bar.write(time.strftime("%H:%M:%S ") + msg, file=sys.stderr)
        else:
            logger.info(msg)

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
