"""Profiler traces of chosen training steps, and the devices' peak memory.

`train.profile_steps = (first, last)` traces updates `first..last` (1-based, inclusive) with
`jax.profiler` into `<workdir>/profile/plugins/profile/<timestamp>/`: the `.xplane.pb` that
TensorBoard's profile plugin reads (`tensorboard --logdir <workdir>/profile`, with the `viz`
extra) and a `perfetto_trace.json.gz` for https://ui.perfetto.dev. Choose steps after the
first, which compiles (as MaxText's `skip_first_n_steps_for_profiler`); every process writes its
own trace (its files carry the host name).

`StepClock` is the loop's own timing per logged interval (train_metrics.jsonl's `step_s`,
`input_wait_s`, `input_wait_fraction`, and `compile_s` / `first_batch_s` once), and
`compile_report` reads XLA's memory analysis and FLOP count of a compiled step
(`train.compile_only`).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import time

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


class StepClock:
    """Wall time per update and time waiting for input, per logged interval (big_vision's
    `chrono`, the Flax examples' `timed('data')`).

    The loop dispatches updates asynchronously: `step_fn(state, batch)` returns before the
    device has run it, so timing the call would measure dispatch. An interval is therefore
    closed only after the loop has fetched the logged update's metrics (`jax.device_get`
    blocks until the update, and every update before it, has run), as big_vision's loop reads
    its metrics at log steps; in between nothing waits on the device.

    - `step_s`: wall seconds per update over the interval, input wait included; time in
      `paused()` (checkpoints, evaluations, writing the row) excluded. The first update (tracing, compiling)
      is never in an interval.
    - `input_wait_s`: seconds per update spent blocked in `next()` on the prefetching input;
      `input_wait_fraction` = input_wait_s / step_s. Near 0 the input keeps ahead of the step;
      near 1 the step waits for the input.
    - once per run (the first row after a start or a resume): `compile_s`, the first update's
      wall time after its batch arrived (tracing, XLA compilation and one execution), and
      `first_batch_s`, the wait for the first batch (input start-up).
    """

    def __init__(self):
        self._start = None  # perf_counter at the interval's start; None before the first update
        self._steps = 0
        self._wait = 0.0
        self._paused = 0.0
        self._batch_at = None  # when the last batch arrived
        self._once = {}

    def next_batch(self, batches):
        """`next(batches)`, timed as input wait."""
        t = time.perf_counter()
        batch = next(batches)
        self._batch_at = time.perf_counter()
        if self._start is None:
            self._once["first_batch_s"] = self._batch_at - t
        else:
            self._wait += self._batch_at - t
        return batch

    @property
    def started(self) -> bool:
        return self._start is not None

    def compiled(self) -> None:
        """Called once the first update has run (blocked on): intervals start now."""
        now = time.perf_counter()
        self._once["compile_s"] = now - self._batch_at
        self._start = now

    def updated(self) -> None:
        """One more update in the interval (after the first)."""
        self._steps += 1

    @contextlib.contextmanager
    def paused(self):
        """Time spent in the block is not the step's (a checkpoint, an evaluation, a row)."""
        t = time.perf_counter()
        try:
            yield
        finally:
            if self._start is not None:
                self._paused += time.perf_counter() - t

    def interval(self) -> dict[str, float]:
        """The interval's fields (none without an update in it), then a new interval. Call it
        after the logged update's outputs were fetched."""
        now = time.perf_counter()
        out, self._once = self._once, {}
        if self._steps:
            wall = now - self._start - self._paused
            out["step_s"] = wall / self._steps
            out["input_wait_s"] = self._wait / self._steps
            out["input_wait_fraction"] = self._wait / wall if wall > 0 else 0.0
        self._start, self._steps, self._wait, self._paused = now, 0, 0.0, 0.0
        return out


_MEMORY_FIELDS = ("argument", "output", "alias", "temp", "generated_code")


def compile_report(compiled) -> dict:
    """XLA's analysis of a compiled step (`jax.jit(...).lower(...).compile()`), per device:
    `memory` (bytes of arguments, outputs, aliases, temporaries and generated code, and peak =
    arguments + outputs - aliases + temporaries) and `flops` / `bytes_accessed` of one call
    (XLA's count: everything it executes, remat included, unlike the analytic count)."""
    m = compiled.memory_analysis()
    memory = {f"{k}_bytes": int(getattr(m, f"{k}_size_in_bytes")) for k in _MEMORY_FIELDS}
    memory["peak_bytes"] = (
        memory["argument_bytes"]
        + memory["output_bytes"]
        - memory["alias_bytes"]
        + memory["temp_bytes"]
    )
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):  # older jax: one dict per program
        cost = cost[0] if cost else {}
    cost = cost or {}
    return {
        "flops": float(cost.get("flops", 0.0)),
        "bytes_accessed": float(cost.get("bytes accessed", 0.0)),
        "memory": memory,
    }


def residual_report(loss, *args) -> dict:
    """What the forward pass of `loss(*args)` saves for its backward pass under the remat
    policies inside it (traced, nothing compiled): bytes and count of the saved activations at
    the arguments' global shapes (no sharding), the arguments, constants and literals among the
    residuals left out (they are held anyway), and so are the outputs of stop_gradient: in
    chartjax that is how frozen parameters enter the loss (trainable.stop_frozen), an identity
    whose output is the parameter's own buffer. jax's public view of this is
    `print_saved_residuals`, one line per residual (`f32[2,4] from ...`): read back here."""
    from jax.ad_checkpoint import print_saved_residuals

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_saved_residuals(loss, *args)
    held = ("from the argument", "from a constant", "from a literal", "output of stop_gradient")
    total, count = 0, 0
    for line in out.getvalue().splitlines():
        m = _RESIDUAL.match(line)
        if m is None:
            raise ValueError(f"print_saved_residuals wrote a line not read here: {line!r}")
        if m["src"].startswith(held):
            continue
        width = re.search(r"\d+", m["dtype"])  # f32, bf16, s8, f8_e4m3fn: the first number
        bits = 8 if m["dtype"] == "bool" else int(width[0]) if width else 0
        if not bits:  # a PRNG key: a few words, no activation
            continue
        size = math.prod(int(d) for d in m["shape"].split(",") if d)
        total, count = total + size * bits // 8, count + 1
    return {"saved_residuals": {"bytes": total, "count": count}}


_RESIDUAL = re.compile(r"^(?P<dtype>[\w<>]+)\[(?P<shape>[\d,]*)\]\s+(?P<src>.*)$")


def write_compile_report(workdir: str, report: dict, info) -> str:
    """`<workdir>/compile_only.json` (process 0) of train.compile_only's report, and its
    numbers as lines through `info`."""
    path = os.path.join(workdir, "compile_only.json")
    mem = report["memory"]

    def mb(n):
        return f"{n / 1e6:,.1f} MB"

    info(
        f"compile_only: the train step of {report['task']} (global batch "
        f"{report['global_batch_size']}, mesh {report['mesh']}) lowered in "
        f"{report['lower_s']:.1f} s, compiled in {report['compile_s']:.1f} s"
    )
    info(
        f"XLA memory per device: arguments {mb(mem['argument_bytes'])}, outputs "
        f"{mb(mem['output_bytes'])}, aliased {mb(mem['alias_bytes'])}, temporaries "
        f"{mb(mem['temp_bytes'])}, generated code {mb(mem['generated_code_bytes'])}; "
        f"peak {mb(mem['peak_bytes'])}"
    )
    analytic = report.get("analytic_flops")
    info(
        f"XLA FLOPs per device and step: {report['flops']:.4g}"
        + (f" (analytic matmul count {analytic:.4g})" if analytic else "")
        + f"; bytes accessed {report['bytes_accessed']:.4g}"
    )
    if "saved_residuals" in report:
        res = report["saved_residuals"]
        info(
            f"saved for the backward pass (global batch, unsharded): {mb(res['bytes'])} in "
            f"{res['count']} activations"
        )
    if jax.process_index() == 0:
        os.makedirs(workdir, exist_ok=True)
        with open(path, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
        info(f"written to {path}")
    return path
