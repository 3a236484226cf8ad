"""chartjax-train: flags -> gin -> the training loop (chartjax/train.py).

    chartjax-train --gin_file=gin_configs/tasks/figureqa_rn.gin --workdir=runs/rn \\
        [--gin_file=hardware/fsdp.gin] [--gin_bindings='train.num_train_steps = 100']
        [--allow_config_change] [--compile_only]

One run per workdir: a second run on a workdir in use is refused, naming the run that holds it,
and so is a rerun whose config differs from the workdir's config.gin, naming each differing
binding, unless --allow_config_change is given. A first Ctrl-C saves a checkpoint and stops, as
SIGTERM does; a second one aborts without saving. At the end it prints where each evaluated
split's report.html went (`<split> report: <path>`, on stdout).

--compile_only compiles the train step at one real batch's shapes, writes XLA's memory analysis
and FLOPs to <workdir>/compile_only.json and exits: no training, no checkpoint (docs/runs.md).

Exit status, for schedulers: 0 the run finished (its steps or its time budget, or
--compile_only's report); 143 (128 + SIGTERM) it was stopped by SIGTERM or a preemption notice
after saving a checkpoint (rerun to resume); 130 (128 + SIGINT) Ctrl-C stopped it, after saving
unless pressed twice; 3 a NaN/Inf loss or parameters stopped it (the message names the last
good checkpoint); 2 bad flags or settings (a missing gin file, a misspelt binding, a zero
checkpoint_every), the workdir is in use or its config differs, or its checkpoints cannot be
resumed (the model changed, none readable); 1 any other error.
"""

from __future__ import annotations

import glob
import os
import sys

import jax

from chartjax import checkpoint as ckpt_lib
from chartjax import config, host_memory, quiet, recipe, workdir_lock
from chartjax import evaluate as eval_lib
from chartjax import train as train_lib
from chartjax.data import loader, tfds_records

EXIT_DONE = 0
EXIT_CANNOT_RESUME = 2  # as argparse's usage errors: the run cannot start as asked
EXIT_USAGE = 2
EXIT_NON_FINITE = 3  # NaN/Inf loss or parameters
EXIT_PREEMPTED = 128 + 15  # SIGTERM, as a shell reports a terminated process
EXIT_INTERRUPTED = 128 + 2  # SIGINT (Ctrl-C), likewise


def exit_status(stop_reason: str) -> int:
    """The exit status of a run that returned with `stop_reason` (train.train's)."""
    return {ckpt_lib.PREEMPTED: EXIT_PREEMPTED, ckpt_lib.INTERRUPTED: EXIT_INTERRUPTED}.get(
        stop_reason, EXIT_DONE
    )


def _message(err: BaseException) -> str:
    # gin appends "In call to configurable 'train' (...)" to errors raised inside train().
    return str(err).split("\n  In call to configurable")[0]


def _error(err: BaseException, status: int) -> int:
    # A ConfigError has one line per problem; other messages may go on with indented details.
    lines = _message(err).splitlines() if isinstance(err, config.ConfigError) else [_message(err)]
    for line in lines:
        print(f"chartjax-train: error: {line}", file=sys.stderr)
    return status


def reports(workdir: str, result: dict) -> list[tuple[str, str]]:
    """(split, report.html) of the run's last evaluation of each split, and of the selected
    parameters' (`eval_best/`), as written by chartjax/evaluate.py."""

    def latest(folder: str, split: str) -> str | None:
        found = glob.glob(os.path.join(folder, eval_lib.split_folder(split), "step_*"))
        steps = [int(p.rsplit("_", 1)[1]) for p in found if p.rsplit("_", 1)[1].isdigit()]
        if not steps:
            return None
        return os.path.join(
            folder, eval_lib.split_folder(split), f"step_{max(steps)}", "report.html"
        )

    evals = result.get("eval") or {}  # none with --compile_only
    out = [(split, latest(os.path.join(workdir, "eval"), split)) for split in evals]
    best = os.path.join(workdir, "eval_best")
    if result.get("selected") and os.path.isdir(best):
        step = result["selected"]["step"]
        out += [
            (f"{name} (selected update {step})", path)
            for name in sorted(os.listdir(best))
            if os.path.isfile(path := os.path.join(best, name, f"step_{step}", "report.html"))
        ]
    return [(split, path) for split, path in out if path and os.path.isfile(path)]


def _add_flags(parser) -> None:
    quiet.add_flag(parser)
    parser.add_argument(
        "--allow_config_change",
        action="store_true",
        help="resume a workdir whose config.gin differs from this run's config",
    )
    parser.add_argument(
        "--compile_only",
        action="store_true",
        help="compile the train step at one real batch's shapes, write XLA's memory analysis "
        "and FLOPs to <workdir>/compile_only.json and exit without training "
        "(as train.compile_only = True)",
    )


def main(argv=None) -> int:
    argv = quiet.setup(argv)  # before anything imports TensorFlow
    try:
        args = config.parse_flags(
            argv,
            description=__doc__,
            extra=_add_flags,
            workdir_help="the run's folder: checkpoints/, config.gin, train_metrics.jsonl, "
            "tensorboard/; a rerun on it resumes from its latest checkpoint",
            first_check=recipe.check_trainable,  # an evaluation-only recipe exits with what to run
        )
    except config.ConfigError as err:
        return _error(err, EXIT_USAGE)
    host_memory.keep_freed_memory()
    try:
        # --compile_only overrides train.compile_only; without it gin's binding holds.
        only = {"compile_only": True} if args.compile_only else {}
        result = train_lib.train(args.workdir, allow_config_change=args.allow_config_change, **only)
    except FloatingPointError as err:
        print(f"chartjax-train: stopped: {_message(err)}", file=sys.stderr)
        return EXIT_NON_FINITE
    except (config.ConfigError, workdir_lock.RunRefusedError) as err:
        return _error(err, EXIT_USAGE)
    except ckpt_lib.CheckpointError as err:
        return _error(err, EXIT_CANNOT_RESUME)
    except (loader.WorkerDied, tfds_records.DamagedBuild) as err:
        print(f"chartjax-train: stopped: {_message(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C (or one before the loop could save)
        print(
            "chartjax-train: aborted by Ctrl-C; nothing saved since the last checkpoint",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if jax.process_index() == 0:  # where to look, as chartjax-eval says
        for split, path in reports(args.workdir, result):
            print(f"{split} report: {path}")
    return exit_status(result["stop_reason"])


if __name__ == "__main__":
    sys.exit(main())
