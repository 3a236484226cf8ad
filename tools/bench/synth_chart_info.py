"""Throughput of the CHART-Info-style generator (goal: >= 10 charts/s/core). Prints JSON.

    python -m chartjax.tools.bench.synth_chart_info [--num 200] [--workers 1 2] [--seed 0]

For each worker count it writes `--num` charts (all ten types, the real writer: PNG + JSON +
table) to a temporary folder and reports wall-clock charts/s, charts/s per worker, and CPU
seconds per chart (this process and its workers, from getrusage). The load average is printed
too: on a shared machine, wall-clock rates understate what an idle core does, and CPU time per
chart is the steadier number.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

from chartjax.synth import chart_info
from chartjax.tools.bench import harness


def bench(num: int, workers: int, seed: int) -> dict:
    out = tempfile.mkdtemp(prefix="bench_chart_info_")
    try:
        chart_info.make_chart(seed, 0)  # warm this process (imports, fonts)
        load0 = os.getloadavg()[0]
        cpu0, t0 = harness.cpu_seconds(), time.perf_counter()  # workers count once joined
        counts = chart_info.generate(out, num, seed=seed, workers=workers)
        wall = time.perf_counter() - t0
        cpu = harness.cpu_seconds() - cpu0
        size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(out) for f in fs)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {
        "workers": workers,
        "charts": num,
        "wall_s": round(wall, 2),
        "charts_per_s": round(num / wall, 2),
        "charts_per_s_per_worker": round(num / wall / workers, 2),
        "cpu_s_per_chart": round(cpu / num, 4),
        "charts_per_cpu_s": round(num / cpu, 2),
        "mb_per_chart": round(size / num / 1e6, 3),
        "types": dict(sorted(counts.items())),
        "loadavg_1min_before": round(load0, 2),
        "loadavg_1min_after": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num", type=int, default=200)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--seed", type=int, default=0)
    harness.add_out_flag(p)
    args = p.parse_args(argv)
    run = harness.Run("synth_chart_info", vars(args), ("matplotlib", "numpy"))
    runs = [bench(args.num, w, args.seed) for w in args.workers]
    result = {
        "goal_charts_per_s_per_core": 10,
        "image": "1280x960 RGBA PNG + official JSON + linearized table",
        "runs": runs,
    }
    harness.emit(run.report(result), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
