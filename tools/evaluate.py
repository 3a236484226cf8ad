"""chartjax-eval: flags -> gin -> evaluation of a checkpoint (chartjax/evaluate.py).

    chartjax-eval --gin_file=gin_configs/tasks/figureqa_rn.gin --workdir=runs/rn \\
        [--checkpoint=runs/rn/checkpoints/1200] [--split=validation2]

A missing gin file, a misspelt binding, a bad setting or a --split the dataset lacks is one
line on stderr naming it (and the nearest valid name), exit status 2, before the model is built.
"""

from __future__ import annotations

import sys

from chartjax import config, host_memory, quiet
from chartjax import evaluate as eval_lib

EXIT_USAGE = 2


def main(argv=None) -> int:
    argv = quiet.setup(argv)  # before anything imports TensorFlow

    def extra(p):
        quiet.add_flag(p)
        p.add_argument("--checkpoint", default=None, help="a checkpoint step folder")
        p.add_argument("--split", action="append", default=None)

    try:
        args = config.parse_flags(argv, description=__doc__, extra=extra)
        host_memory.keep_freed_memory()
        results = eval_lib.evaluate(args.workdir, args.checkpoint, args.split)
    except config.ConfigError as err:
        # gin appends "In call to configurable 'evaluate' (...)" to errors raised inside it.
        for line in str(err).split("\n  In call to configurable")[0].splitlines():
            print(f"chartjax-eval: error: {line}", file=sys.stderr)
        return EXIT_USAGE
    for split, out in results.items():
        if out.get("metrics"):
            print(split, {k: round(v, 4) for k, v in out["metrics"].items()}, out["dir"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
