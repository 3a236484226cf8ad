"""chartjax-train: flags -> gin -> the training loop (chartjax/train.py).

    chartjax-train --gin_file=gin_configs/tasks/figureqa_rn.gin --workdir=runs/rn \\
        [--gin_file=hardware/fsdp.gin] [--gin_bindings='train.num_train_steps = 100']
"""

from __future__ import annotations

from chartjax import config, host_memory
from chartjax import train as train_lib


def main(argv=None) -> None:
    args = config.parse_flags(argv, description=__doc__)
    host_memory.keep_freed_memory()
    train_lib.train(args.workdir)


if __name__ == "__main__":
    main()
