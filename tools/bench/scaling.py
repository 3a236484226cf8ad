"""Does cost grow as it should? Wall time against size, with log-log slopes (JSON output).

    python -m chartjax.tools.bench.scaling [--figureqa 250 1000] [--build-modes plain beam1 beam2]
        [--summaries 1000 10000] [--t5x-sizes small base] [--out FILE]

Three sections, each timed at every size given (issue 18, item 5; the issue's full sizes are
`--figureqa 1000 4000 16000 --summaries 1000 10000 100000`):

* build: `tfds build` of a generated FigureQA corpus (`--figureqa` train1 images with their
  questions; chartjax.synth) in each `--build-modes` mode, as bench/build.py builds (plain
  generator; Beam's FnApiRunner with 1 and 2 workers); the generation itself is a row too;
* score: `chartjax.tools.score --task chart_to_text` on `--summaries` generated summaries, as
  bench/score.py (a fresh process each: start-up included);
* t5x_load: loading a T5X checkpoint of each `--t5x-sizes` shape (bench/t5x_load.py SIZES; size
  is the parameter count).

Each series gets `fit`: the slope of log(wall) against log(size) over all points and over the
two largest (`slope_top`, where a fixed start-up cost weighs least), and the least-squares line
wall = fixed_s + per_item_s * size. A slope of 1 is linear; below 1 a fixed cost (imports,
Beam workers) still dominates; `super_linear` is set where slope_top exceeds SUPER_LINEAR, the
defect the issue asks to fix or explain. Every row carries the 1-minute load average before and
after it: the machine may be shared, and load that changes between sizes bends a slope.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

from chartjax import host_memory
from chartjax.tools.bench import harness

SUPER_LINEAR = 1.15  # slope_top above this: cost grows faster than the work


def fit(sizes, seconds) -> dict:
    """Log-log slope (all points; the two largest) and the linear fit wall = a + b * size."""
    if len(sizes) != len(seconds) or len(sizes) < 2:
        raise ValueError(f"a fit needs >= 2 (size, seconds) points, got {len(sizes)}")
    if min(sizes) <= 0 or min(seconds) <= 0:
        raise ValueError(f"sizes and seconds must be positive: {sizes}, {seconds}")
    import numpy as np

    x, y = (np.asarray(v, np.float64) for v in zip(*sorted(zip(sizes, seconds))))
    slope = float(np.polyfit(np.log(x), np.log(y), 1)[0])
    top = float(np.log(y[-1] / y[-2]) / np.log(x[-1] / x[-2]))
    per, fixed = (float(v) for v in np.polyfit(x, y, 1))
    return {
        "slope": slope,
        "slope_top": top,
        "fixed_s": fixed,
        "per_item_s": per,
        "super_linear": top > SUPER_LINEAR,
    }


def _load1() -> float:
    return round(os.getloadavg()[0], 2)


def _series(rows: list[dict], size_key: str) -> dict:
    """Rows and their fits: `fit` on wall seconds, `fit_cpu` on CPU seconds (this process and
    its reaped children: what a load that changes between sizes does not bend). Skipped rows
    (`skipped`: why) stay in `rows` and out of the fits; under two measured rows, no fit."""
    done = [r for r in rows if "skipped" not in r]
    out: dict = {"rows": rows, "skipped": len(rows) - len(done)}
    if len(done) < 2:
        out["fit"] = None
        return out
    sizes = [r[size_key] for r in done]
    out["fit"] = fit(sizes, [r["wall_s"] for r in done])
    if all(r.get("cpu_s") for r in done):
        out["fit_cpu"] = fit(sizes, [r["cpu_s"] for r in done])
    return out


# Beam's local runners hold every serialized example in memory through the shuffle. Measured on
# FigureQA (each example carries its figure's PNG; the plain build writes 445 MB per 1,000
# figures): at 4k figures the FnApiRunner with 2 workers peaked at ~14.5 GB RSS over its three
# processes, 8x the plain build's 1.78 GB; at 16k (~7 GB plain) one worker reached 23 GB and was
# OOM-killed on a 24 GB machine.
BEAM_MEMORY_FACTOR = 8.0


def _tree_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def bench_build(tmp: str, sizes, modes, gen_workers: int) -> dict:
    import apache_beam  # noqa: F401  (imported before timing, as bench/build.py does)
    import tensorflow  # noqa: F401

    from chartjax.tools.bench import build

    gen, builds = [], {m: [] for m in modes}
    for n in sizes:
        raw = os.path.join(tmp, f"figureqa_{n}")
        row = build.generate("figureqa", raw, n, gen_workers)
        gen.append(row)
        harness.progress({"generated": n, **row})
        written = None  # bytes of this size's plain build
        for mode in modes:
            data_dir = os.path.join(tmp, f"tfds_{n}_{mode}")
            need = (written or 0) * BEAM_MEMORY_FACTOR
            free = host_memory.available_bytes() if mode != "plain" and written else None
            if free is not None and need > free:
                row = {
                    "charts": n,
                    "mode": mode,
                    "skipped": f"Beam's in-memory runner would need ~{need / 2**30:.1f} GiB "
                    f"({BEAM_MEMORY_FACTOR:g}x the plain build's {written / 2**30:.2f} GiB); "
                    f"{free / 2**30:.1f} GiB available",
                }
            else:
                row = build.build("figureqa", raw, data_dir, mode)
                if mode == "plain":
                    written = _tree_bytes(data_dir)
                    row["output_bytes"] = written
            builds[mode].append(row)
            harness.progress(row)
            shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(raw, ignore_errors=True)
    out = {"generate": _series(gen, "charts")}
    out.update({f"build_{m}": _series(rows, "charts") for m, rows in builds.items()})
    return out


def bench_score(tmp: str, sizes) -> dict:
    from pathlib import Path

    from chartjax.tools.bench import score

    rows = []
    for n in sizes:
        d = Path(tmp) / f"score_{n}"
        d.mkdir()
        p, r = score.write_chart_to_text(d, n)
        load0 = _load1()
        res = score.timed_score(
            ["--task", "chart_to_text", "--predictions", str(p), "--references", str(r)]
            + ["--out", str(d / "c2t.json")]
        )
        row = {
            "summaries": n,
            "wall_s": res["wall_s"],
            "cpu_s": res["cpu_s"],
            "load_avg_1m_before": load0,
            "load_avg_1m_after": _load1(),
        }
        rows.append(row)
        harness.progress(row)
        shutil.rmtree(d, ignore_errors=True)
    return {"chart_to_text": _series(rows, "summaries")}


def bench_t5x(tmp: str, sizes) -> dict:
    rows = []
    for size in sizes:
        ckpt = os.path.join(tmp, f"t5x_{size}", "checkpoint_0")
        load0 = _load1()
        res = harness.child_json("chartjax.tools.bench.t5x_load", ["--dir", ckpt, "--size", size])
        r = res["results"]
        row = {
            "size": size,
            "params": r["params"],
            "write_s": r.get("write_s"),
            "wall_s": r["load_s"],
            "growth_over_checkpoint": r["growth_over_checkpoint"],
            "load_avg_1m_before": load0,
            "load_avg_1m_after": _load1(),
        }
        rows.append(row)
        harness.progress(row)
    return {"load": _series(rows, "params")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--figureqa", type=int, nargs="*", default=[250, 1000], help="train1 images")
    p.add_argument("--build-modes", nargs="+", default=["plain", "beam1", "beam2"])
    p.add_argument("--gen-workers", type=int, default=2)
    p.add_argument("--summaries", type=int, nargs="*", default=[1000, 10000])
    p.add_argument("--t5x-sizes", nargs="*", default=["small", "base"])
    harness.add_out_flag(p)
    a = p.parse_args(argv)
    for name, sizes in (("--figureqa", a.figureqa), ("--summaries", a.summaries)):
        if len(sizes) == 1:
            p.error(f"{name}: give two sizes or more for a slope (or none to skip)")
    if len(a.t5x_sizes) == 1:
        p.error("--t5x-sizes: give two sizes or none")
    run = harness.Run("scaling", vars(a), ("tensorflow-datasets", "apache-beam", "sacrebleu"))
    tmp = tempfile.mkdtemp(prefix="chartjax_bench_scaling_")
    results: dict = {}
    try:
        t0 = time.perf_counter()
        if a.summaries:
            results["score"] = bench_score(tmp, a.summaries)
        if a.t5x_sizes:
            results["t5x"] = bench_t5x(tmp, a.t5x_sizes)
        if a.figureqa:
            results["build"] = bench_build(tmp, a.figureqa, a.build_modes, a.gen_workers)
        results["super_linear"] = sorted(
            f"{section}.{name}"
            for section, series in results.items()
            if isinstance(series, dict)
            for name, s in series.items()
            if (s["fit"] or {}).get("super_linear") or s.get("fit_cpu", {}).get("super_linear")
        )
        results["sections_s"] = round(time.perf_counter() - t0, 1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    harness.emit(run.report(results), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
