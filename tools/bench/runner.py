"""Benchmarks that run the product: a bench is data (tools/bench/benches.py), this runs it.

    python -m chartjax.tools.bench.runner --list
    python -m chartjax.tools.bench.runner NAME [--out FILE] [--workdir DIR] [--rerun]
        [--steps N] [--arms a,b] [--gin_bindings 'X = 1' ...] [--cache DIR]

A bench names
* a corpus: shell commands (`chartjax-synth ...`, `tfds build ...`, `chartjax-train-vocab ...`)
  that write into `{corpus}`, a folder under `--cache` (default runs/bench/corpora) named by a
  hash of the commands: a second bench with the same commands reuses the build;
* its arms: each a recipe (gin files under gin_configs/) and bindings, trained by
  `chartjax-train` in `<workdir>/<arm>` (or compiled only: `--compile_only`), then evaluated by
  `chartjax-eval` where the bench says so (another build's split, say);
* a baseline (tools/bench/baselines.py: a small function of the corpus's labels), where it has
  one; another recipe is an arm;
* what to read: the keys of the last `train_metrics.jsonl` row, the loop's own timing
  (`step_s`, `input_wait_fraction`, `compile_s`, ...: their median over the logged rows), each
  evaluated split's latest `metrics.json` (and `eval_best/`'s, under `train.selection`), and
  `compile_only.json`;
* and a check on the results (an ordering, a margin over the baseline).

It prints the harness's one JSON object (tools/bench/harness.py); `results.commands` holds
every command it ran, so each figure can be rerun by hand, and `results.cpu_s` the user + system
CPU seconds of the corpus build (about 0 when cached), each arm (its commands' process trees)
and the baseline and check. The runner never steps an optimizer: every update is
`chartjax-train`'s. Commands run from the current folder (the repository root: `tfds build
tfds_builders/...`), with this Python's scripts first on PATH.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from chartjax.tools.bench import baselines, harness
from chartjax.tools.bench.benches import Arm, Bench  # noqa: F401  (the data a bench is)

TIMING = ("step_s", "input_wait_s", "input_wait_fraction", "examples_per_s")
FIRST_ROW = ("compile_s", "first_batch_s")
LIBS = ("jax", "jaxlib", "flax", "optax")


class BenchError(RuntimeError):
    pass


def corpus_dir(bench: Bench, cache: str) -> str:
    key = hashlib.sha1(json.dumps(bench.corpus).encode()).hexdigest()[:12]
    return os.path.abspath(os.path.join(cache, key))


def _env() -> dict:
    bin_dir = os.path.dirname(sys.executable)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}


def _run(cmd: list[str] | str, log: str) -> float:
    """Runs `cmd` (an argv list, or a shell line), its output appended to `log`; returns its
    wall seconds, or raises BenchError with the last lines of its output."""
    t0 = time.perf_counter()
    harness.progress({"run": cmd if isinstance(cmd, str) else " ".join(cmd)})
    with open(log, "a", encoding="utf-8") as f:
        res = subprocess.run(
            cmd, shell=isinstance(cmd, str), stdout=f, stderr=subprocess.STDOUT, env=_env()
        )
    if res.returncode != 0:
        with open(log, encoding="utf-8", errors="replace") as f:
            tail = f.read().strip().splitlines()[-5:]
        raise BenchError(f"exit {res.returncode}: {cmd}\n  " + "\n  ".join(tail))
    return time.perf_counter() - t0


def prepare_corpus(bench: Bench, cache: str) -> tuple[str | None, list[str]]:
    """The corpus folder, built unless a finished build of the same commands is there."""
    if not bench.corpus:
        return None, []
    out = corpus_dir(bench, cache)
    commands = [c.format(corpus=out) for c in bench.corpus]
    stamp = os.path.join(out, "corpus.json")
    if not os.path.exists(stamp):
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        wall = sum(_run(c, os.path.join(out, "log.txt")) for c in commands)
        with open(stamp, "w", encoding="utf-8") as f:
            json.dump({"commands": commands, "wall_s": round(wall, 1)}, f, indent=1)
    return out, commands


def _median(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def read_train(workdir: str, keys: tuple[str, ...]) -> dict:
    """The last logged row's `keys`, the loop's timing (medians over the rows that have it;
    compile and first-batch seconds from the first row) and real tokens per second."""
    with open(os.path.join(workdir, "train_metrics.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if not rows:
        raise BenchError(f"{workdir}: train_metrics.jsonl has no rows")
    out = {"step": rows[-1]["step"], "logged_rows": len(rows)}
    out.update({k: rows[-1][k] for k in keys if k in rows[-1]})
    out.update({k: rows[0][k] for k in FIRST_ROW if k in rows[0]})
    out.update({f"median_{k}": _median(rows, k) for k in TIMING})
    tokens = [r["num_tokens"] / r["step_s"] for r in rows if r.get("step_s") and "num_tokens" in r]
    if tokens:
        out["median_target_tokens_per_s"] = statistics.median(tokens)
    return out


def read_metrics(folder: str, keys: tuple[str, ...]) -> dict:
    """Per split under `folder` (a workdir's eval/ or eval_best/), its latest metrics.json:
    `keys` of its metrics (all when empty), the step and the example count."""
    out = {}
    for path in glob.glob(os.path.join(folder, "*", "step_*", "metrics.json")):
        split = os.path.basename(os.path.dirname(os.path.dirname(path)))
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
        if split in out and out[split]["step"] >= m["step"]:
            continue
        values = (
            m["metrics"] if not keys else {k: m["metrics"][k] for k in keys if k in m["metrics"]}
        )
        out[split] = {"step": m["step"], "num_examples": m.get("num_examples"), **values}
    return out


def train_argv(arm: Arm, bench: Bench, workdir: str, extra: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "chartjax.tools.train", f"--workdir={workdir}"]
    cmd += [f"--gin_file={g}" for g in arm.recipe]
    cmd += [f"--gin_bindings={b}" for b in (*bench.bindings, *arm.bindings, *extra)]
    return cmd + (["--compile_only"] if bench.compile_only else [])


def eval_argv(workdir: str, split: str, bindings: tuple[str, ...]) -> list[str]:
    cmd = [sys.executable, "-m", "chartjax.tools.evaluate", f"--workdir={workdir}"]
    return cmd + [f"--split={split}"] + [f"--gin_bindings={b}" for b in bindings]


def run_arm(name: str, arm: Arm, bench: Bench, root: str, corpus: str | None, extra: list[str]):
    """Trains (or compiles) one arm, evaluates it as asked; (results, commands)."""
    workdir = os.path.join(root, name)
    os.makedirs(workdir, exist_ok=True)
    log = os.path.join(root, f"{name}.log")
    fill = {"corpus": corpus or "", "workdir": workdir, "runs": root}
    arm = dataclasses.replace(
        arm,
        bindings=tuple(b.format(**fill) for b in arm.bindings),
        evals=tuple((s, tuple(b.format(**fill) for b in bs)) for s, bs in arm.evals),
    )
    bench = dataclasses.replace(bench, bindings=tuple(b.format(**fill) for b in bench.bindings))
    commands = [train_argv(arm, bench, workdir, extra)]
    out: dict = {"workdir": workdir, "train_wall_s": round(_run(commands[0], log), 1)}
    if bench.compile_only:
        with open(os.path.join(workdir, "compile_only.json"), encoding="utf-8") as f:
            return {**out, "compile_only": json.load(f)}, commands
    for split, bindings in arm.evals:
        commands.append(eval_argv(workdir, split, bindings))
        _run(commands[-1], log)
    out["train"] = read_train(workdir, bench.train_keys)
    out["eval"] = read_metrics(os.path.join(workdir, "eval"), bench.metric_keys)
    if arm.evals:  # an evaluation with other bindings writes to eval_<digest>/, not eval/
        out["eval_folders"] = {s: baselines.eval_folder_of(workdir, s) for s, _ in arm.evals}
        for split, folder in out["eval_folders"].items():
            out["eval"][split] = read_metrics(folder, bench.metric_keys)[split]
    if os.path.isdir(os.path.join(workdir, "eval_best")):
        out["eval_best"] = read_metrics(os.path.join(workdir, "eval_best"), bench.metric_keys)
    return out, commands


def run(bench: Bench, workdir: str, cache: str, extra=(), arms=None, rerun=False) -> dict:
    """Runs `bench` (its `arms`, all by default) under `workdir`; returns `results`."""
    if rerun:
        shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir, exist_ok=True)
    cpu = {"start": harness.cpu_seconds()}  # user + system: the runner and its reaped children
    corpus, commands = prepare_corpus(bench, cache)
    cpu["corpus"] = harness.cpu_seconds()
    results: dict = {"corpus": corpus, "commands": {"corpus": commands}, "arms": {}}
    for name in arms or bench.arms:
        results["arms"][name], results["commands"][name] = run_arm(
            name, bench.arms[name], bench, workdir, corpus, list(extra)
        )
        cpu[name] = harness.cpu_seconds()
    if bench.baseline is not None and corpus:
        results["baseline"] = bench.baseline(corpus)
    if bench.check is not None:
        results["check"] = bench.check(results)
    ends = [*cpu.values(), harness.cpu_seconds()]
    names = [*list(cpu)[1:], "baseline_and_check"]
    results["cpu_s"] = {n: round(b - a, 1) for n, a, b in zip(names, ends, ends[1:])}
    results["cpu_s"]["total"] = round(ends[-1] - ends[0], 1)
    return results


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("name", nargs="?", help="the bench (--list names them)")
    p.add_argument("--list", action="store_true", help="name and describe every bench")
    p.add_argument("--workdir", help="runs go to <workdir>/<arm> (default runs/bench/<name>)")
    p.add_argument("--cache", default=os.path.join("runs", "bench", "corpora"))
    p.add_argument("--rerun", action="store_true", help="remove the workdir first")
    p.add_argument("--arms", help="comma-separated subset of the bench's arms")
    p.add_argument("--steps", type=int, help="train.num_train_steps (and the schedule's)")
    p.add_argument("--gin_bindings", action="append", default=[], help="to every arm, last")
    harness.add_out_flag(p)
    return p.parse_args(argv)


def main(argv=None, benches: dict[str, Bench] | None = None) -> dict | None:
    a = parse_args(argv)
    if benches is None:
        from chartjax.tools.bench.benches import BENCHES

        benches = BENCHES
    if a.list or not a.name:
        for b in benches.values():
            print(f"{b.name}: {b.doc}")
        return None
    if a.name not in benches:
        raise SystemExit(f"runner: no bench {a.name!r}; --list names them")
    bench = benches[a.name]
    extra = list(a.gin_bindings)
    if a.steps:
        extra = [f"train.num_train_steps = {a.steps}", f"schedule.total_steps = {a.steps}", *extra]
    config = {k: v for k, v in vars(a).items() if k != "list"}
    run_ = harness.Run(f"runner/{a.name}", config, LIBS)
    workdir = a.workdir or os.path.join("runs", "bench", a.name)
    arms = a.arms.split(",") if a.arms else None
    try:
        results = run(bench, workdir, a.cache, extra, arms, a.rerun)
    except BenchError as err:
        raise SystemExit(f"runner: {a.name}: {err}") from None
    return harness.emit(run_.report(results), a.out)


if __name__ == "__main__":
    main()
