"""chartjax-eval: flags -> gin -> evaluation of a checkpoint (chartjax/evaluate.py).

    chartjax-eval --gin_file=gin_configs/tasks/figureqa_rn.gin --workdir=runs/rn \\
        [--checkpoint=runs/rn/checkpoints/1200] [--split=validation2]

A missing gin file, a misspelt binding, a bad setting or a --split the dataset lacks is one
line on stderr naming it (and the nearest valid name), exit status 2, before the model is built.

A split without answers (FigureQA's `--split=no_annot_test2`) is predicted only:
`eval/<split>/step_<N>/predictions.jsonl` (id, prediction 0/1, prediction_text yes/no) and a
metrics.json that lists every metric as unavailable. Each split's metrics also go to
`<workdir>/tensorboard` (`eval/<split>/<metric>`); `evaluate.progress = False` hides the bar.
"""

from __future__ import annotations

import os
import sys

from chartjax import config, host_memory, quiet
from chartjax import evaluate as eval_lib
from chartjax.data import loader, tfds_records

EXIT_USAGE = 2


def main(argv=None) -> int:
    argv = quiet.setup(argv)  # before anything imports TensorFlow

    def extra(p):
        quiet.add_flag(p)
        p.add_argument(
            "--checkpoint",
            default=None,
            help="what to evaluate: a run's checkpoints/<step> folder or a run workdir (its "
            "latest step); default: the latest checkpoint in --workdir, else the recipe's "
            "init weights (init/*.gin) as they are",
        )
        p.add_argument(
            "--split",
            action="append",
            default=None,
            help="a split of the task's dataset (repeatable; a TFDS slice such as "
            "'validation[:100]' too); default: the recipe's evaluation splits",
        )

    try:
        args = config.parse_flags(
            argv,
            description=__doc__,
            extra=extra,
            workdir_help="where eval/<split>/step_<N>/ (metrics.json, predictions.jsonl, "
            "report.html) and tensorboard/ are written; its run's config.gin and latest "
            "checkpoint are the defaults of --gin_file and --checkpoint",
        )
        host_memory.keep_freed_memory()
        results = eval_lib.evaluate(args.workdir, args.checkpoint, args.split)
    except config.ConfigError as err:
        # gin appends "In call to configurable 'evaluate' (...)" to errors raised inside it.
        for line in str(err).split("\n  In call to configurable")[0].splitlines():
            print(f"chartjax-eval: error: {line}", file=sys.stderr)
        return EXIT_USAGE
    except (loader.WorkerDied, tfds_records.DamagedBuild) as err:
        message = str(err).split("\n  In call to configurable")[0]
        print(f"chartjax-eval: stopped: {message}", file=sys.stderr)
        return 1
    for split, out in results.items():  # one readable line a split, and where to look
        if out.get("metrics") or out.get("predictions_only"):
            print(f"{split}: {eval_lib.summary(out)}")
        if out.get("dir"):
            print(f"  {os.path.join(out['dir'], 'report.html')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
