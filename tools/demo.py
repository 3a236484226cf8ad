"""`make demo`: FigureQA from generator to metric JSON on one CPU machine.

1. generate a small FigureQA-style corpus in the official release layout (chartjax-synth);
2. build it with the real `tfds build` command line;
3. train the Relation Network and the text-only baseline for a bounded wall-clock budget;
4. evaluate both on the alternated-colour split (validation2) and print accuracy overall and
   per figure type with 95% confidence intervals, and where metrics.json and the plots are.

The corpus and the TFDS build are reused when present; the runs start fresh every time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from chartjax import quiet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIGURE_TYPES = ("vbar_categorical", "hbar_categorical", "pie", "line", "dot_line")


def _step(msg: str) -> None:
    print(f"\n== {msg}", flush=True)


def _generate(raw: str, args) -> None:
    if os.path.exists(os.path.join(raw, "validation2", "qa_pairs.json")):
        print(f"reusing corpus {raw}")
        return
    from chartjax.synth import figureqa

    t = time.time()
    figureqa.generate(
        raw,
        train_images=args.train_images,
        val_images=args.val_images,
        test_images=0,
        seed=args.seed,
        workers=args.workers,
        overwrite=True,
    )
    print(
        f"generated {args.train_images} + 2x{args.val_images} figures in "
        f"{time.time() - t:.0f} s -> {raw}"
    )


def _tfds_build(raw: str, data_dir: str) -> None:
    if os.path.isdir(os.path.join(data_dir, "figureqa")):
        print(f"reusing TFDS build {data_dir}/figureqa")
        return
    tfds_cli = os.path.join(os.path.dirname(sys.executable), "tfds")
    cmd = [
        tfds_cli,
        "build",
        os.path.join(ROOT, "tfds_builders", "figureqa"),
        f"--manual_dir={raw}",
        f"--data_dir={data_dir}",
    ]
    print(" ".join(cmd), flush=True)
    t = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode:
        sys.stderr.write(proc.stdout[-5000:] + proc.stderr[-5000:])
        raise SystemExit(f"tfds build failed (exit {proc.returncode})")
    print(f"built in {time.time() - t:.0f} s")


def _train(name: str, gin_file: str, workdir: str, data_dir: str, budget_s: float | None):
    import gin

    from chartjax import config as config_lib
    from chartjax import train as train_lib

    gin.clear_config()
    bindings = [f"figureqa_task.data_dir = '{data_dir}'"]
    if budget_s is not None:
        bindings.append(f"train.max_train_time_s = {budget_s}")
    config_lib.parse_gin([gin_file], bindings)
    shutil.rmtree(workdir, ignore_errors=True)
    _step(f"train {name} ({gin_file})")
    return train_lib.train(workdir)


def _row(label, m):
    lo, hi = m["accuracy_ci95_low"], m["accuracy_ci95_high"]
    return f"{label:<18} {100 * m['accuracy']:6.2f}  [{100 * lo:5.1f}, {100 * hi:5.1f}]  n={m['n']}"


def _report(runs: dict, out: str) -> None:
    from chartjax.plots import plot_training_curves

    _step("results on validation2 (alternated colours): accuracy % [95% CI]")
    tables = {}
    for name, workdir in runs.items():
        step_dirs = os.path.join(workdir, "eval", "validation2")
        last = max(os.listdir(step_dirs), key=lambda d: int(d.split("_")[1]))
        path = os.path.join(step_dirs, last, "metrics.json")
        with open(path) as f:
            tables[name] = (json.load(f), path)
    for name, (m, path) in tables.items():
        overall = dict(m["metrics"], n=m["num_examples"])
        print(f"\n{name} (step {m['step']})")
        print(_row("overall", overall))
        for ft in FIGURE_TYPES:
            if ft in m["breakdowns"].get("figure_type", {}):
                print(_row(ft, m["breakdowns"]["figure_type"][ft]))
        print(f"metrics.json: {path}")
        print(f"per-group plot: {os.path.join(os.path.dirname(path), 'accuracy_by_group.png')}")
        print(f"report (open in a browser): {os.path.join(os.path.dirname(path), 'report.html')}")
    curves = plot_training_curves(runs, os.path.join(out, "training_curves.png"))
    print(f"\ntraining curves: {curves}")
    # Where the RN beats text-only beyond both confidence intervals.
    if {"rn", "text_only"} <= set(tables):
        rn_ft = tables["rn"][0]["breakdowns"]["figure_type"]
        tx_ft = tables["text_only"][0]["breakdowns"]["figure_type"]
        wins = [
            ft
            for ft in FIGURE_TYPES
            if ft in rn_ft
            and ft in tx_ft
            and rn_ft[ft]["accuracy_ci95_low"] > tx_ft[ft]["accuracy_ci95_high"]
        ]
        print("RN above text-only beyond the 95% CIs on: " + (", ".join(wins) or "none"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default="demo_out")
    p.add_argument("--train-images", type=int, default=1000)
    p.add_argument("--val-images", type=int, default=150)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rn-budget-s", type=float, default=None, help="override the gin budget")
    p.add_argument("--text-budget-s", type=float, default=None)
    quiet.add_flag(p)
    args = p.parse_args(quiet.setup(argv))  # before anything imports TensorFlow
    from chartjax import host_memory

    host_memory.keep_freed_memory()  # as the chartjax-* entry points run
    out = os.path.abspath(args.out)
    raw, data_dir = os.path.join(out, "figureqa_raw"), os.path.join(out, "tfds")
    t0 = time.time()
    _step("1/4 generate a FigureQA-style corpus (official layout)")
    _generate(raw, args)
    _step("2/4 tfds build tfds_builders/figureqa")
    _tfds_build(raw, data_dir)
    runs = {
        "rn": os.path.join(out, "runs", "rn"),
        "text_only": os.path.join(out, "runs", "text_only"),
    }
    _step("3/4 train and evaluate")
    _train("RN", "tasks/figureqa_demo_rn.gin", runs["rn"], data_dir, args.rn_budget_s)
    _train(
        "text-only",
        "tasks/figureqa_demo_text_only.gin",
        runs["text_only"],
        data_dir,
        args.text_budget_s,
    )
    _step("4/4 report")
    _report(runs, out)
    print(f"\ndemo wall time: {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
