"""What every benchmark shares: timing, the one JSON object it prints, machine info, children.

A benchmark prints one JSON object on stdout (and writes it to `--out` where it has one):

    {"name": "step", "config": {...the CLI arguments...}, "results": {...},
     "machine": {"cpu_count", "load_avg_start", "load_avg_end", "python", "platform",
                 "versions": {"chartjax", "jax", ...}}, "wall_s": ...}

Progress lines, where a benchmark has them, go to stderr. The machine may be shared (two cores,
other engineers' jobs): a rate means little without the load average beside it, so every
report carries both ends of the run's. Timings are `time.perf_counter` wall seconds; rates
are taken from the mean (total work over total time), the spread from the median, min and max.

The standard library only: bench/step.py runs where TensorFlow and gin are not installed, and
versions are read from the installed metadata without importing the libraries.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

Clock = Callable[[], float]
MIN_ALTERNATIONS = 5  # fewer and one slow outlier decides the median of a shared machine


# ------------------------------------------------------------------ machine ---------------


def tree_cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its live descendants (loader workers:
    pool processes are not reaped while they serve, so RUSAGE_CHILDREN misses them), plus the
    reaped ones. Linux (/proc); elsewhere this process and its reaped children only."""
    total = cpu_seconds()
    if not os.path.isdir("/proc"):
        return total
    tick = os.sysconf("SC_CLK_TCK")
    parents, times = {}, {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(pid)] = int(fields[1])
        times[int(pid)] = (int(fields[11]) + int(fields[12])) / tick
    me = os.getpid()
    for pid in times:
        p = parents.get(pid)
        while p and p != me:
            p = parents.get(p)
        if p == me:
            total += times[pid]
    return total


def load_avg() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the OS has none)."""
    return [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else None


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its children already reaped."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def versions(libs: Sequence[str]) -> dict[str, str | None]:
    """Installed distribution versions (None: not installed), read without importing them."""
    out = {}
    for lib in libs:
        try:
            out[lib] = importlib.metadata.version(lib)
        except importlib.metadata.PackageNotFoundError:
            out[lib] = None
    return out


@dataclasses.dataclass
class Run:
    """One benchmark run: started when created, reported once by `report(results)`."""

    name: str
    config: dict
    libs: Sequence[str] = ()
    load_start: list[float] | None = dataclasses.field(default_factory=load_avg)
    t0: float = dataclasses.field(default_factory=time.perf_counter)

    def report(self, results: dict) -> dict:
        return {
            "name": self.name,
            "config": self.config,
            "results": results,
            "machine": {
                "cpu_count": os.cpu_count(),
                "load_avg_start": self.load_start,
                "load_avg_end": load_avg(),
                "python": platform.python_version(),
                "platform": platform.platform(),
                "versions": versions(("chartjax", *self.libs)),
            },
            "wall_s": round(time.perf_counter() - self.t0, 2),
        }


def add_out_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", help="also write the JSON object to this file")


def emit(report: dict, out: str | None = None) -> dict:
    """Prints `report` as the one JSON object of stdout, and writes it to `out` if given."""
    text = json.dumps(report, indent=1, default=str)
    print(text, flush=True)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
    return report


def progress(row: dict) -> None:
    """A progress line on stderr: stdout holds the report alone."""
    print(json.dumps(row, default=str), file=sys.stderr, flush=True)


# ------------------------------------------------------------------ timing ----------------


def summary(seconds: Sequence[float]) -> dict:
    return {
        "n": len(seconds),
        "median_s": statistics.median(seconds),
        "min_s": min(seconds),
        "max_s": max(seconds),
        "mean_s": statistics.fmean(seconds),
    }


def _time(fn: Callable[[], object], clock: Clock) -> float:
    t = clock()
    fn()
    return clock() - t


def timeit(
    fn: Callable[[], object], repeats: int, warmup: int = 1, clock: Clock = time.perf_counter
):
    """`warmup` untimed-in-the-summary calls (compilation, start-up: their times are kept
    apart as `warmup_s`), then `repeats` timed calls. `fn` must block until its work is done
    (`block_until_ready`, `np.asarray` on the result)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, not {repeats}")
    warm = [_time(fn, clock) for _ in range(warmup)]
    return {**summary([_time(fn, clock) for _ in range(repeats)]), "warmup_s": warm}


def interleaved(
    a: Callable[[], object],
    b: Callable[[], object],
    alternations: int = MIN_ALTERNATIONS,
    warmup: int = 1,
    clock: Clock = time.perf_counter,
) -> dict:
    """Times `a` and `b` side by side: A, B, A, B, ... so that both see the same machine
    (load, thermal and allocator state drift over a run; sequential blocks would charge the
    drift to one side). `speedup_a_over_b` is the median over the alternations of
    time(b) / time(a) (> 1: a is faster), with its min and max."""
    if alternations < MIN_ALTERNATIONS:
        raise ValueError(f"alternations must be >= {MIN_ALTERNATIONS}, not {alternations}")
    for _ in range(warmup):
        a()
        b()
    ta, tb = [], []
    for _ in range(alternations):
        ta.append(_time(a, clock))
        tb.append(_time(b, clock))
    ratios = [y / x for x, y in zip(ta, tb)]
    return {
        "alternations": alternations,
        "a": summary(ta),
        "b": summary(tb),
        "speedup_a_over_b": {
            "median": statistics.median(ratios),
            "min": min(ratios),
            "max": max(ratios),
        },
    }


def interleaved_many(
    fns: dict[str, Callable[[], object]],
    reference: str,
    alternations: int = MIN_ALTERNATIONS,
    warmup: int = 1,
    clock: Clock = time.perf_counter,
) -> dict:
    """`interleaved` for more than two sides: one call of each, in the order of `fns`, per
    alternation. `speedup_over_<reference>[name]` is the median over the alternations of
    time(reference) / time(name) (> 1: name is faster), with its min and max."""
    if alternations < MIN_ALTERNATIONS:
        raise ValueError(f"alternations must be >= {MIN_ALTERNATIONS}, not {alternations}")
    if reference not in fns:
        raise ValueError(f"reference {reference!r} is not one of {sorted(fns)}")
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(alternations):
        for name, fn in fns.items():
            times[name].append(_time(fn, clock))
    ratios = {}
    for name in fns:
        if name != reference:
            r = [t_ref / t for t, t_ref in zip(times[name], times[reference])]
            ratios[name] = {"median": statistics.median(r), "min": min(r), "max": max(r)}
    return {
        "alternations": alternations,
        **{name: summary(ts) for name, ts in times.items()},
        f"speedup_over_{reference}": ratios,
    }


# ------------------------------------------------------------------ children --------------


class ChildError(RuntimeError):
    """A child benchmark process failed; str() is the last line of its stderr."""

    def __init__(self, module: str, returncode: int, stderr: str):
        self.module, self.returncode, self.stderr = module, returncode, stderr
        super().__init__((stderr.strip().splitlines() or [f"{module} exited {returncode}"])[-1])


def child_json(module: str, argv: Sequence[str] = (), env: dict | None = None) -> dict:
    """Runs `python -m module *argv` in a fresh process and returns the JSON object it prints
    (all of stdout, or its last line). A fresh process keeps its imports (TensorFlow, a second
    backend) and its memory out of the caller's measurements."""
    res = subprocess.run(
        [sys.executable, "-m", module, *argv],
        capture_output=True,
        text=True,
        env=None if env is None else {**os.environ, **env},
        check=False,
    )
    if res.returncode != 0:
        raise ChildError(module, res.returncode, res.stderr)
    text = res.stdout.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(text.splitlines()[-1])
