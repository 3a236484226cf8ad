"""Profiler traces of chosen training steps, and the devices' peak memory.

`train.profile_steps = (first, last)` traces updates `first..last` (1-based, inclusive) with
`jax.profiler` into `<workdir>/profile/plugins/profile/<timestamp>/`: the `.xplane.pb` that
TensorBoard's profile plugin reads (`tensorboard --logdir <workdir>/profile`, with the `viz`
extra) and a `perfetto_trace.json.gz` for https://ui.perfetto.dev. Choose steps after the
first, which compiles (as MaxText's `skip_first_n_steps_for_profiler`); every process writes its
own trace (its files carry the host name).
"""

from __future__ import annotations

import os

import jax


class StepProfiler:
    """Starts the trace before update `first` and stops it once update `last` has run."""

    def __init__(self, workdir: str, steps: tuple[int, int] | None, *, report):
        self.dir = os.path.join(workdir, "profile")
        self.steps = tuple(steps) if steps else None
        self.report = report
        self.active = False

    def before(self, step: int, start_step: int) -> None:
        """Called before the update that makes `step + 1`."""
        if self.steps is None or self.active:
            return
        first, last = self.steps
        if step + 1 == first or (step == start_step and first <= step < last):
            # A resumed run inside the window traces what is left of it.
            jax.profiler.start_trace(self.dir, create_perfetto_trace=True)
            self.active = True
            self.report(f"profiling updates {step + 1}..{last} into {self.dir}")

    def after(self, step: int, state) -> None:
        """Called after update `step`; stops the trace (waiting for the device) at `last`."""
        if self.active and step >= self.steps[1]:
            self.stop(state)

    def stop(self, state=None) -> None:
        if not self.active:
            return
        if state is not None:
            jax.block_until_ready(state)
        jax.profiler.stop_trace()
        self.active = False
        self.report(f"profile written to {self.dir} (tensorboard --logdir {self.dir})")


def peak_memory_bytes() -> int | None:
    """The largest `peak_bytes_in_use` over this process's devices; None where the backend
    keeps no statistics (CPU)."""
    peaks = []
    for d in jax.local_devices():
        stats = d.memory_stats()
        if stats and "peak_bytes_in_use" in stats:
            peaks.append(int(stats["peak_bytes_in_use"]))
    return max(peaks) if peaks else None
