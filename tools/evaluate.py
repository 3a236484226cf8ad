"""chartjax-eval: flags -> gin -> evaluation of a checkpoint (chartjax/evaluate.py).

    chartjax-eval --gin_file=gin_configs/tasks/figureqa_rn.gin --workdir=runs/rn \\
        [--checkpoint=runs/rn/checkpoints/1200] [--split=validation2]
"""

from __future__ import annotations

from chartjax import config, host_memory, quiet
from chartjax import evaluate as eval_lib


def main(argv=None) -> None:
    argv = quiet.setup(argv)  # before anything imports TensorFlow

    def extra(p):
        quiet.add_flag(p)
        p.add_argument("--checkpoint", default=None, help="a checkpoint step folder")
        p.add_argument("--split", action="append", default=None)

    args = config.parse_flags(argv, description=__doc__, extra=extra)
    host_memory.keep_freed_memory()
    for split, out in eval_lib.evaluate(args.workdir, args.checkpoint, args.split).items():
        if out.get("metrics"):
            print(split, {k: round(v, 4) for k, v in out["metrics"].items()}, out["dir"])


if __name__ == "__main__":
    main()
