"""Does cost grow as it should? Wall time against size, with log-log slopes (JSON output).

    python -m chartjax.tools.bench.scaling [--figureqa 250 1000] [--build-modes plain beam1 beam2]
        [--summaries 1000 10000] [--t5x-sizes small base] [--out FILE]

Three sections, each timed at every size given (issue 18, item 5; the issue's full sizes are
`--figureqa 1000 4000 16000 --summaries 1000 10000 100000`):

* build: `tfds build` of a generated FigureQA corpus (`--figureqa` train1 images with their
  questions; chartjax.synth) in each `--build-modes` mode, as bench/build.py builds (plain; Beam's
  FnApiRunner with 1 and 2 workers), each in a child process: raw and build bytes and their
  ratio, CPU seconds and the peak resident memory of the whole process tree, each fitted against
  figures (log-log slope, linear fit) and extrapolated to the real train1 (100,000 figures,
  1,327,368 questions) and the whole release (`extrapolated`); the generation is a row too;
* score: `chartjax.tools.score --task chart_to_text` on `--summaries` generated summaries, as
  bench/score.py (a fresh process each: start-up included);
* t5x_load: loading a T5X checkpoint of each `--t5x-sizes` shape (bench/t5x_load.py SIZES; size
  is the parameter count);
* resume: the time to the first training batch of the FigureQA RN task (batch 640) started at
  `--resume-steps` (default 0, 10^4, 10^5, 10^6) on a generated corpus of `--resume-figures`
  figures: flat, since the input position is computed, not skipped to;
* infer: `chartjax-infer` throughput over `--infer-charts` charts with a tiny Pix2Struct on
  each `--infer-devices` count of simulated devices (the summary line names the devices used).

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


# The real FigureQA release (paper counts; docs/corpora.md §4, [unverified] until counted
# from the files): train1, and all five splits.
FIGUREQA_TRAIN1 = {"figures": 100_000, "questions": 1_327_368}
FIGUREQA_RELEASE = {"figures": 180_000, "questions": 2_388_698}


def _extrapolate(rows: list[dict], key: str) -> dict:
    """`key` fitted linearly against figures and read at train1's and the release's size."""
    import numpy as np

    done = [r for r in rows if "skipped" not in r and r.get(key)]
    if len(done) < 2:
        return {}
    x = np.asarray([r["charts"] for r in done], np.float64)
    y = np.asarray([r[key] for r in done], np.float64)
    per, fixed = (float(v) for v in np.polyfit(x, y, 1))
    slope = float(np.polyfit(np.log(x), np.log(y), 1)[0])
    at = {
        name: fixed + per * size["figures"]
        for name, size in (("train1", FIGUREQA_TRAIN1), ("release", FIGUREQA_RELEASE))
    }
    return {"log_log_slope": slope, "fixed": fixed, "per_figure": per, "at": at}


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
        for mode in modes:
            data_dir = os.path.join(tmp, f"tfds_{n}_{mode}")
            row = build.build_measured("figureqa", raw, data_dir, mode)
            builds[mode].append(row)
            harness.progress(row)
            shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(raw, ignore_errors=True)
    out = {"generate": _series(gen, "charts")}
    for mode, rows in builds.items():
        series = _series(rows, "charts")
        series["extrapolated"] = {
            key: _extrapolate(rows, key)
            for key in ("peak_rss_bytes", "build_bytes", "raw_bytes", "cpu_s")
        }
        out[f"build_{mode}"] = series
    out["release"] = {"train1": FIGUREQA_TRAIN1, "all_splits": FIGUREQA_RELEASE}
    return out


def bench_resume(tmp: str, figures: int, start_steps, batch: int, image_size: int) -> dict:
    """Time to the first training batch of the FigureQA RN task at each start step (a resumed
    run), on a generated corpus of `figures` train1 figures: the input position is a pure
    function of (seed, step), so every start should cost the same. The one-time start-up (the
    split's records read, its figures decoded into the image cache) is timed apart."""
    from chartjax.data import pipeline
    from chartjax.tasks import figureqa
    from chartjax.tools.bench import corpora

    data_dir = corpora.figureqa(os.path.join(tmp, "resume"), figures)
    task = figureqa.make_task(data_dir=data_dir, image_size=image_size, train_pad=8)
    t0, cpu0 = time.perf_counter(), harness.cpu_seconds()
    questions = len(task.source.examples("train1", 0, 1))  # reads the split, fills the cache
    startup = {
        "wall_s": round(time.perf_counter() - t0, 2),
        "cpu_s": round(harness.cpu_seconds() - cpu0, 2),
        "figures": figures,
        "questions": questions,
    }
    rows = []
    for step in start_steps:
        t0, cpu0 = time.perf_counter(), harness.cpu_seconds()
        batches = pipeline.train_batches(task, batch, 0, step, 0, 1)
        first = next(batches)
        wall = time.perf_counter() - t0
        rows.append(
            {
                "start_step": step,
                "examples_before": step * batch,
                "epochs_before": round(step * batch / questions, 1),
                "first_batch_s": round(wall, 3),
                "cpu_s": round(harness.cpu_seconds() - cpu0, 3),
                "batch": int(first["label"].shape[0]),
            }
        )
        harness.progress(rows[-1])
        del batches
    times = [r["first_batch_s"] for r in rows]
    return {
        "startup": startup,
        "rows": rows,
        "largest_over_smallest_start": round(times[-1] / times[0], 2),
    }


def bench_infer(tmp: str, charts: int, devices, batch: int) -> dict:
    """`chartjax-infer --task deplot` over `charts` generated charts with a tiny random
    Pix2Struct (HF layout) on each count of simulated CPU devices, each in a child process:
    examples per second and the devices its summary line names. Simulated devices share this
    host's cores, so the row shows the batches spread over the mesh at no extra cost, not a
    speed-up (that needs real accelerators)."""
    import json
    import subprocess

    import numpy as np
    from PIL import Image

    from chartjax.interop import hf
    from chartjax.models import tiny
    from chartjax.models.t5 import pix2struct as p2s_lib
    from chartjax.tools import train_vocab

    work = os.path.join(tmp, "infer")
    folder = os.path.join(work, "charts")
    os.makedirs(folder)
    rng = np.random.default_rng(0)
    for i in range(charts):
        arr = rng.integers(0, 256, (60 + i % 7 * 10, 80 + i % 5 * 12, 3), dtype=np.uint8)
        Image.fromarray(arr).save(os.path.join(folder, f"c{i:05d}.png"))
    vocab = train_vocab.train(
        ["Generate underlying data table of the figure below: TITLE | a 1 2 3"] * 8,
        os.path.join(work, "spm"),
        vocab_size=300,
        hard_vocab_limit=False,
    )
    ckpt = os.path.join(work, "p2s_hf")
    hf.save(p2s_lib.build(tiny.tiny_pix2struct(vocab_size=300), 0), ckpt)
    rows = []
    for n in devices:
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n}"
        args = ["--task", "deplot", "--checkpoint", ckpt, "--vocab", vocab, "--images", folder]
        args += ["--out", os.path.join(work, f"out{n}"), "--batch_size", str(batch)]
        args += ["--max_decode_len", "8", "--max_patches", "64", "--dtype", "float32"]
        code = "import sys; from chartjax.tools.infer import main; main(sys.argv[1:])"
        t0, load0 = time.perf_counter(), _load1()
        proc = subprocess.run(
            [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True
        )
        wall = time.perf_counter() - t0
        if proc.returncode:
            raise RuntimeError(f"chartjax-infer on {n} devices failed: {proc.stderr[-2000:]}")
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(
            {
                "devices": summary.get("devices"),
                "simulated_devices": n,
                "charts": charts,
                "wall_s": round(wall, 2),
                "examples_per_s": round(charts / wall, 2),
                "summary": summary,
                "load_1min": [load0, _load1()],
            }
        )
        harness.progress(rows[-1])
    return {"rows": rows}


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
    p.add_argument("--resume-figures", type=int, default=500, help="0 skips the resume section")
    p.add_argument("--resume-steps", type=int, nargs="+", default=[0, 10**4, 10**5, 10**6])
    p.add_argument("--resume-batch", type=int, default=640, help="the FigureQA RN recipe's")
    p.add_argument("--infer-charts", type=int, default=256, help="0 skips the infer section")
    p.add_argument("--infer-devices", type=int, nargs="+", default=[1, 4])
    p.add_argument("--infer-batch", type=int, default=16)
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
        if a.resume_figures:
            results["resume"] = bench_resume(
                tmp, a.resume_figures, a.resume_steps, a.resume_batch, image_size=64
            )
        if a.infer_charts:
            results["infer"] = bench_infer(tmp, a.infer_charts, a.infer_devices, a.infer_batch)
        if a.figureqa:
            results["build"] = bench_build(tmp, a.figureqa, a.build_modes, a.gen_workers)
        results["super_linear"] = sorted(
            f"{section}.{name}"
            for section, series in results.items()
            if isinstance(series, dict) and section not in ("resume", "infer")
            for name, s in series.items()
            if isinstance(s, dict) and "fit" in s
            if (s["fit"] or {}).get("super_linear") or s.get("fit_cpu", {}).get("super_linear")
        )
        results["sections_s"] = round(time.perf_counter() - t0, 1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    harness.emit(run.report(results), a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
