"""Throughput of the FigureQA-style generator: figures/s with 1 and 2 worker processes.

    python -m chartjax.tools.bench.synth [--figures 100] [--workers 1 2]

Prints one JSON object: figures/s (wall clock, whole split incl. JSON writing and balancing),
figures/s per core (= with 1 worker), the scaling efficiency of the larger worker counts, CPU
seconds per figure of the 1-worker run, and the load average at start and end (the machine may
be shared, which lowers the wall-clock figures; CPU seconds per figure are the steadier
number). Goal (issue 2): >= 15 figures/s/core, linear scaling.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

from chartjax.synth.figureqa import generate
from chartjax.tools.bench import harness


def run(figures: int, workers: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_synth_") as out:
        cpu0, t0 = harness.cpu_seconds(), time.perf_counter()
        (summary,) = generate(out, train_images=figures, seed=seed, workers=workers)
        wall, cpu = time.perf_counter() - t0, harness.cpu_seconds() - cpu0
    return {
        "workers": workers,
        "figures": figures,
        "wall_s": round(wall, 2),
        "figures_per_s": round(figures / wall, 2),
        # Pool workers are children of the forkserver, not of this process: CPU time is only
        # measurable for the in-process (1-worker) run.
        **(
            {
                "cpu_s_per_figure": round(cpu / figures, 4),
                "figures_per_cpu_s": round(figures / cpu, 2),
            }
            if workers == 1
            else {}
        ),
        "questions": summary["questions"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--figures", type=int, default=100)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--seed", type=int, default=0)
    harness.add_out_flag(p)
    args = p.parse_args(argv)
    run(5, 1, args.seed + 1)  # warm-up: imports, font cache, first-figure costs
    bench = harness.Run("synth", vars(args), ("matplotlib", "numpy"))  # load after the warm-up
    runs = [run(args.figures, w, args.seed) for w in args.workers]
    base = next((r for r in runs if r["workers"] == 1), None)
    result = {"runs": runs, "goal_figures_per_s_per_core": 15.0}
    if base:
        result["figures_per_s_per_core"] = base["figures_per_s"]
        result["scaling_efficiency"] = {
            str(r["workers"]): round(r["figures_per_s"] / (r["workers"] * base["figures_per_s"]), 3)
            for r in runs
            if r["workers"] > 1
        }
    harness.emit(bench.report(result), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
