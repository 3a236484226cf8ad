"""Build throughput of the figureqa and chart_info TFDS builders, with and without Beam (JSON).

    python -m chartjax.tools.bench.build --charts 2000 [--builders figureqa chart_info]
        [--modes plain beam1 beam2] [--figureqa-dir DIR] [--chart-info-dir DIR] [--out FILE]

Without `--figureqa-dir` / `--chart-info-dir` a corpus of `--charts` charts is generated into a
temporary folder first (`chartjax.synth`; FigureQA: `--charts` train1 images, each with its
questions; CHART-Info: `--charts` synthetic_2019 charts). Each builder is then built once per
mode into a fresh data_dir:

  * `plain`: no Beam options, the builder's plain generator (one process);
  * `beamN`: Beam's FnApiRunner with `direct_num_workers=N`, `direct_running_mode=
    multi_processing` (what `--beam_pipeline_options=runner=DirectRunner,...` runs here: Beam
    2.77's DirectRunner tries to download the Prism runner first and falls back to the
    FnApiRunner offline; naming it skips that attempt).

Every build must write the corpus's records and examples (FigureQA: one record per figure with
its qa pairs inside; CHART-Info: one per annotation file), or the benchmark stops: Beam 2.77's
FnApiRunner used to drop examples between stages (tfds_builders/common/beam_build.py).

Each build runs in a child process. Reported per build: wall seconds of `download_and_prepare`
(pipeline and worker start-up included), examples/s and charts/s, CPU seconds of the build
process and its reaped children, the peak resident memory of the whole process tree (the build
and its Beam workers, sampled every 0.1 s: `peak_rss_bytes`), the bytes of the raw corpus (PNG
and JSON files) and of the build and their ratio, and the 1-minute load average before and
after: the machine may be shared, and a wall-clock rate means little without the load beside
it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time

from chartjax.data import tfds_records
from chartjax.tools.bench import harness

MODES = ("plain", "beam1", "beam2")
BUILDERS = ("figureqa", "chart_info")


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def generate(builder: str, out: str, charts: int, workers: int) -> dict:
    """Writes a `charts`-chart corpus for `builder` under `out`; returns timing."""
    load0, t0 = _load(), time.perf_counter()
    if builder == "figureqa":
        from chartjax.synth import figureqa

        figureqa.generate(out, train_images=charts, seed=0, workers=workers)
    else:
        from chartjax.synth import chart_info

        chart_info.generate(out, charts, seed=0, workers=workers)
    wall = time.perf_counter() - t0
    return {
        "charts": charts,
        "workers": workers,
        "wall_s": round(wall, 1),
        "charts_per_s": round(charts / wall, 2),
        "load_avg_1m_before": load0,
        "load_avg_1m_after": _load(),
    }


def _download_config(manual_dir: str, mode: str):
    import tensorflow_datasets as tfds

    kwargs = {}
    if mode != "plain":
        import apache_beam as beam
        from apache_beam.runners.portability.fn_api_runner import fn_runner

        workers = int(mode.removeprefix("beam"))
        kwargs = dict(
            beam_runner=fn_runner.FnApiRunner(),
            beam_options=beam.options.pipeline_options.PipelineOptions(
                [f"--direct_num_workers={workers}", "--direct_running_mode=multi_processing"]
            ),
        )
    return tfds.download.DownloadConfig(
        manual_dir=manual_dir, compute_stats=tfds.download.ComputeStatsMode.SKIP, **kwargs
    )


def build(builder: str, manual_dir: str, data_dir: str, mode: str, verify: bool = True) -> dict:
    """Builds `builder` from `manual_dir` once in `mode`; returns timing (and with `verify`,
    the counts and bytes, checked against the corpus)."""
    if builder == "figureqa":
        from tfds_builders.figureqa.figureqa import Builder

        b = Builder(data_dir=data_dir)
    else:
        from tfds_builders.chart_info.chart_info import Builder

        b = Builder(data_dir=data_dir, config="synthetic_2019")
    config = _download_config(manual_dir, mode)
    load0, cpu0, t0 = _load(), harness.cpu_seconds(), time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):  # TFDS prints progress: stdout is the report's
        b.download_and_prepare(download_config=config)
    wall = time.perf_counter() - t0
    cpu = harness.cpu_seconds() - cpu0
    row = {
        "builder": builder,
        "mode": mode,
        "beam_workers": 0 if mode == "plain" else int(mode.removeprefix("beam")),
        "build_dir": os.fspath(b.data_path),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "load_avg_1m_before": load0,
        "load_avg_1m_after": _load(),
    }
    return verified(row, manual_dir) if verify else row


def verified(row: dict, manual_dir: str) -> dict:
    """A build's row with its counts and bytes, after checking it holds the whole corpus."""
    builder, mode, build_dir = row["builder"], row["mode"], row["build_dir"]
    splits = list(tfds_records.builder(build_dir).info.splits.values())
    records = sum(s.num_examples for s in splits)
    examples = _built_examples(build_dir, [s.name for s in splits])
    expected = _expected(builder, manual_dir)
    if (records, examples) != expected:  # a rate over a build that lost data would mean nothing
        raise RuntimeError(
            f"{builder} {mode}: wrote {records} records of {examples} examples, the corpus in "
            f"{manual_dir} has {expected[0]} of {expected[1]}"
        )
    charts = _count_charts(builder, manual_dir)
    raw, built = _tree_bytes(manual_dir), _tree_bytes(build_dir)
    wall = row["wall_s"]
    return {
        **row,
        "builder": builder,
        "mode": mode,
        "beam_workers": 0 if mode == "plain" else int(mode.removeprefix("beam")),
        "charts": charts,
        "records": records,
        "examples": examples,
        "raw_bytes": raw,
        "build_bytes": built,
        "build_over_raw": round(built / raw, 3),
        "build_bytes_per_chart": round(built / charts),
        "build_bytes_per_example": round(built / examples),
        "examples_per_s": round(examples / wall, 1),
        "charts_per_s": round(charts / wall, 2),
    }


def build_measured(builder: str, manual_dir: str, data_dir: str, mode: str) -> dict:
    """`build` in a child process, with the peak resident memory of its whole process tree
    (the build and any Beam workers) sampled from outside: `peak_rss_bytes`."""
    from chartjax.tools.bench import process_memory

    code = (
        "import json, sys; from chartjax.tools.bench import build; "
        "print(json.dumps(build.build(*sys.argv[1:], verify=False)))"
    )
    cmd = [sys.executable, "-c", code, builder, manual_dir, data_dir, mode]
    proc, peak = process_memory.run(cmd)
    if proc.returncode:
        raise RuntimeError(f"{builder} {mode} build failed:\n{proc.stderr[-3000:]}")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**verified(row, manual_dir), "peak_rss_bytes": peak}  # counted outside the peak


def _tree_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def _built_examples(build_dir: str, splits) -> int:
    """Examples of a build: FigureQA's questions inside their figures' records."""
    from chartjax.data import tfds_records

    total = 0
    for split in splits:
        source = tfds_records.data_source(build_dir, split)
        total += sum(tfds_records.num_items(source[i]) for i in range(len(source)))
    return total


def _expected(builder: str, manual_dir: str) -> tuple[int, int]:
    """(records, examples) a complete build has: FigureQA's figures with questions and its qa
    pairs, or the CHART-Info annotation files (one record each)."""
    if builder == "figureqa":
        from tfds_builders.figureqa.figureqa import SPLIT_NAMES

        figures = questions = 0
        for split in SPLIT_NAMES:
            path = os.path.join(manual_dir, split, "qa_pairs.json")
            if os.path.exists(path):
                with open(path) as f:
                    rows = json.load(f)["qa_pairs"]
                questions += len(rows)
                figures += len({r["image_index"] for r in rows})
        return figures, questions
    from tfds_builders.chart_info.chart_info import synthetic_2019_items

    n = len(synthetic_2019_items(manual_dir))
    return n, n


def _count_charts(builder: str, manual_dir: str) -> int:
    sub = os.path.join(manual_dir, "train1", "png") if builder == "figureqa" else None
    sub = sub or os.path.join(manual_dir, "png")
    return sum(1 for name in os.listdir(sub) if name.endswith(".png"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--charts", type=int, default=2000, help="corpus size when generating")
    p.add_argument("--builders", nargs="+", choices=BUILDERS, default=list(BUILDERS))
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--figureqa-dir", help="existing FigureQA-layout root (with train1/)")
    p.add_argument("--chart-info-dir", help="existing synthetic_2019 root (png/, json_gt/)")
    p.add_argument("--gen-workers", type=int, default=2, help="processes for generating")
    p.add_argument("--keep", help="generate corpora into this folder and keep them")
    harness.add_out_flag(p)
    args = p.parse_args(argv)
    run = harness.Run("build", vars(args), ("tensorflow-datasets", "apache-beam", "array-record"))

    # Import TensorFlow (which tfds loads lazily, in its writer) and Beam before any timing:
    # on a loaded 2-core machine the import alone takes 10-20 s and would be charged to
    # whichever build runs first. Beam workers still import them, inside their builds' times.
    import apache_beam  # noqa: F401
    import tensorflow  # noqa: F401

    tmp = tempfile.mkdtemp(prefix="chartjax_bench_build_")
    corpus_root = args.keep or os.path.join(tmp, "raw")
    given = {"figureqa": args.figureqa_dir, "chart_info": args.chart_info_dir}
    result = {"generation": {}, "builds": []}
    try:
        for builder in args.builders:
            manual_dir = given[builder]
            if manual_dir is None:
                manual_dir = os.path.join(corpus_root, builder)
                gen = generate(builder, manual_dir, args.charts, args.gen_workers)
                result["generation"][builder] = gen
                harness.progress({"generated": builder, **gen})
            for mode in args.modes:
                data_dir = os.path.join(tmp, f"tfds_{builder}_{mode}")
                row = build_measured(builder, manual_dir, data_dir, mode)
                result["builds"].append(row)
                harness.progress(row)
                shutil.rmtree(data_dir, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    harness.emit(run.report(result), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
