"""`make demo`: FigureQA from generator to metric JSON on one CPU machine.

The demo's corpus is a reduced FigureQA, named `figureqa-demo-vbar-minmax` in its output:
vertical bar charts only, 2-3 bars, the questions "Is X the minimum?" and "Is X the maximum?",
four colours per colour set; 2,000 training figures (8,000 questions) and 250 figures (1,000
questions) per validation split. On 2 CPU cores the Relation Network learns it within minutes,
where the full five-type, fifteen-template mix needs far more steps than a CPU budget allows
(README, "What to expect"). The comparison is on validation1: held-out figures in the
training colours. validation2 is not used: with one figure type its alternated colours never
occur in training, so it measures transfer to unseen colour names, not the task.

1. generate the corpus in the official release layout (chartjax-synth's generator);
2. build it with the real `tfds build` command line;
3. train the Relation Network and the text-only baseline through their recipes
   (gin_configs/tasks/figureqa_demo_{rn,text_only}.gin: a step count, with a wall-clock cap);
4. evaluate both on validation1 (metrics.json per run), print accuracy overall and per
   template with 95% confidence intervals and which model beats which beyond both intervals,
   and write the comparison to <out>/comparison.json.

The corpus and the TFDS build are reused when they match these settings; the runs start fresh.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time

from chartjax import quiet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS_NAME = "figureqa-demo-vbar-minmax"
# chartjax.synth.figureqa.Options for the reduced corpus (the sanity benchmark's, too).
CORPUS = {
    "figure_types": ("vbar_categorical",),
    "max_elements": 3,
    "templates": (0, 1),
    "colors_per_set": 4,
}
SPLIT = "validation1"
TEMPLATES = {"0": "Is X the minimum?", "1": "Is X the maximum?"}
RUNS = (  # (name, label, recipe, flag of its budget override)
    ("rn", "RN", "tasks/figureqa_demo_rn.gin", "rn_budget_s"),
    ("text_only", "text-only", "tasks/figureqa_demo_text_only.gin", "text_budget_s"),
)


def _step(msg: str) -> None:
    print(f"\n== {msg}", flush=True)


def corpus_stamp(args) -> dict:
    """What the corpus depends on; a corpus or build with another stamp is redone."""
    stamp = {"name": CORPUS_NAME, "train_images": args.train_images}
    stamp.update(val_images=args.val_images, seed=args.seed, **CORPUS)
    return json.loads(json.dumps(stamp))  # tuples -> lists, as read back


def _prepare(out: str, args) -> str:
    """Generates and builds the corpus unless `out` holds one of the same stamp; returns the
    TFDS data_dir."""
    from chartjax.tools.bench import corpora

    raw, data_dir = os.path.join(out, "figureqa_raw"), os.path.join(out, "tfds")
    _step(f"1/4 generate {CORPUS_NAME} (chartjax-synth figureqa, official layout)")
    print(
        f"{args.train_images} + 2x{args.val_images} figures (vertical bars, 2-3 bars, "
        "minimum/maximum questions, 4 colours per set)",
        flush=True,
    )
    generate = dict(
        train_images=args.train_images,
        val_images=args.val_images,
        test_images=0,
        seed=args.seed,
        workers=args.workers,
        overwrite=True,
        options=CORPUS,
    )
    reused = corpora.figureqa_stamped(
        raw,
        data_dir,
        os.path.join(out, "corpus.json"),
        corpus_stamp(args),
        generate,
        log=lambda line: print(line, flush=True),
        before_build=lambda: _step("2/4 tfds build tfds_builders/figureqa"),
    )
    if reused:
        print(f"reusing corpus {raw}")
        _step("2/4 tfds build tfds_builders/figureqa")
        print(f"reusing TFDS build {data_dir}/figureqa")
    return data_dir


def _train(label: str, gin_file: str, workdir: str, data_dir: str, budget_s: float | None):
    import gin

    from chartjax import config as config_lib
    from chartjax import train as train_lib

    gin.clear_config()
    bindings = [f"figureqa_task.data_dir = '{data_dir}'"]
    if budget_s is not None:
        bindings.append(f"train.max_train_time_s = {budget_s}")
    config_lib.parse_gin([gin_file], bindings)
    shutil.rmtree(workdir, ignore_errors=True)
    _step(f"train {label} ({gin_file})")
    t = time.time()
    out = train_lib.train(workdir)
    print(f"{label}: {out['step']} steps ({out['stop_reason']}) in {time.time() - t:.0f} s")
    return out


def _row(label, m):
    lo, hi = m["accuracy_ci95_low"], m["accuracy_ci95_high"]
    return (
        f"  {label:<34} {100 * m['accuracy']:6.2f}  [{100 * lo:5.1f}, {100 * hi:5.1f}]  n={m['n']}"
    )


def latest_metrics(workdir: str, split: str = SPLIT) -> tuple[dict, str]:
    """(metrics.json of the latest evaluated step of `split`, its path)."""
    step_dirs = os.path.join(workdir, "eval", split)
    if not os.path.isdir(step_dirs) or not os.listdir(step_dirs):
        raise SystemExit(f"{workdir} has no evaluation of {split} ({step_dirs} is missing)")
    last = max(os.listdir(step_dirs), key=lambda d: int(d.split("_")[1]))
    path = os.path.join(step_dirs, last, "metrics.json")
    with open(path) as f:
        return json.load(f), path


def verdict(a: tuple[str, dict], b: tuple[str, dict]) -> tuple[str, str | None]:
    """(sentence, winner or None): who beats whom on SPLIT beyond both 95% intervals."""

    def cell(m):
        return f"{100 * m['accuracy']:.2f}% [{100 * m['accuracy_ci95_low']:.1f}, {100 * m['accuracy_ci95_high']:.1f}]"

    (na, ma), (nb, mb) = a, b
    both = f"{na} {cell(ma)} vs {nb} {cell(mb)}"
    if ma["accuracy_ci95_low"] > mb["accuracy_ci95_high"]:
        return f"{na} beats {nb} on {SPLIT} beyond the 95% CIs: {both}", na
    if mb["accuracy_ci95_low"] > ma["accuracy_ci95_high"]:
        return f"{nb} beats {na} on {SPLIT} beyond the 95% CIs: {both}", nb
    return f"{na} and {nb} do not differ on {SPLIT} beyond the 95% CIs: {both}", None


def report(runs: dict, out: str) -> dict:
    """Prints the per-run tables and the verdict; writes and returns <out>/comparison.json."""
    from chartjax.plots import plot_training_curves

    _step(
        f"4/4 results on {SPLIT} of {CORPUS_NAME} (held-out figures, training colours): "
        "accuracy % [95% CI]"
    )
    overall, summary = {}, {}
    for name, (label, workdir) in runs.items():
        m, path = latest_metrics(workdir)
        overall[label] = dict(m["metrics"], n=m["num_examples"])
        print(f"\n{label} (step {m['step']})")
        print(_row("overall", overall[label]))
        for q, text in TEMPLATES.items():
            if q in m["breakdowns"].get("question_template", {}):
                print(_row(f"template {q} ({text})", m["breakdowns"]["question_template"][q]))
        print(f"  metrics.json: {path}")
        print(f"  per-group plot: {os.path.join(os.path.dirname(path), 'accuracy_by_group.png')}")
        print(f"  report (open in a browser): {os.path.join(os.path.dirname(path), 'report.html')}")
        summary[name] = {"label": label, "step": m["step"], "metrics_json": path}
        summary[name].update({k: overall[label][k] for k in ("accuracy", "n")})
        summary[name]["ci95"] = [
            overall[label][k] for k in ("accuracy_ci95_low", "accuracy_ci95_high")
        ]
    logged = {  # a run shorter than train.log_every has no train_metrics.jsonl
        label: wd
        for label, wd in runs.values()
        if os.path.exists(os.path.join(wd, "train_metrics.jsonl"))
    }
    if logged:
        curves = plot_training_curves(logged, os.path.join(out, "training_curves.png"))
        print(f"\ntraining curves: {curves}")
    result = {"corpus": CORPUS_NAME, "split": SPLIT, "models": summary}
    if len(overall) == 2:
        sentence, winner = verdict(*overall.items())
        print(f"\n{sentence}")
        result.update(verdict=sentence, winner=winner)
    with open(os.path.join(out, "comparison.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"comparison: {os.path.join(out, 'comparison.json')}")
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="demo_out")
    p.add_argument("--train-images", type=int, default=2000)
    p.add_argument("--val-images", type=int, default=250)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rn-budget-s", type=float, default=None, help="override the gin time cap")
    p.add_argument("--text-budget-s", type=float, default=None)
    quiet.add_flag(p)
    args = p.parse_args(quiet.setup(argv))  # before anything imports TensorFlow
    from chartjax import host_memory

    host_memory.keep_freed_memory()  # as the chartjax-* entry points run
    out = os.path.abspath(args.out)
    t0 = time.time()
    data_dir = _prepare(out, args)
    _step(f"3/4 train and evaluate on {SPLIT}")
    runs = {}
    for name, label, gin_file, flag in RUNS:
        runs[name] = (label, os.path.join(out, "runs", name))
        _train(label, gin_file, runs[name][1], data_dir, getattr(args, flag))
    report(runs, out)
    print(f"\ndemo wall time: {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
