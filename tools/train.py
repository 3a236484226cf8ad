"""chartjax-train: flags -> gin -> the training loop (chartjax/train.py).

    chartjax-train --gin_file=gin_configs/tasks/figureqa_rn.gin --workdir=runs/rn \\
        [--gin_file=hardware/fsdp.gin] [--gin_bindings='train.num_train_steps = 100']

Exit status, for schedulers: 0 the run finished (its steps or its time budget); 143 (128 +
SIGTERM) it was stopped by SIGTERM or a preemption notice after saving a checkpoint (rerun to
resume); 3 a NaN/Inf loss or parameters stopped it (the message names the last good
checkpoint); 2 bad flags, or the workdir's checkpoints cannot be resumed (the model changed,
none readable); 1 any other error.
"""

from __future__ import annotations

import sys

from chartjax import checkpoint as ckpt_lib
from chartjax import config, host_memory, quiet, recipe
from chartjax import train as train_lib

EXIT_DONE = 0
EXIT_CANNOT_RESUME = 2  # as argparse's usage errors: the run cannot start as asked
EXIT_NON_FINITE = 3  # NaN/Inf loss or parameters
EXIT_PREEMPTED = 128 + 15  # SIGTERM, as a shell reports a terminated process


def exit_status(stop_reason: str) -> int:
    """The exit status of a run that returned with `stop_reason` (train.train's)."""
    return EXIT_PREEMPTED if stop_reason.startswith("preempted") else EXIT_DONE


def _message(err: BaseException) -> str:
    # gin appends "In call to configurable 'train' (...)" to errors raised inside train().
    return str(err).split("\n  In call to configurable")[0]


def main(argv=None) -> int:
    argv = quiet.setup(argv)  # before anything imports TensorFlow
    args = config.parse_flags(argv, description=__doc__, extra=quiet.add_flag)
    recipe.check_trainable()  # an evaluation-only recipe exits here with what to run instead
    host_memory.keep_freed_memory()
    try:
        result = train_lib.train(args.workdir)
    except FloatingPointError as err:
        print(f"chartjax-train: stopped: {_message(err)}", file=sys.stderr)
        return EXIT_NON_FINITE
    except ckpt_lib.CheckpointError as err:
        print(f"chartjax-train: error: {_message(err)}", file=sys.stderr)
        return EXIT_CANNOT_RESUME
    return exit_status(result["stop_reason"])


if __name__ == "__main__":
    sys.exit(main())
