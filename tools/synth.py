"""`chartjax-synth`: write synthetic chart corpora in their official release layouts.

One subcommand per corpus; each is a `_add_<name>(subparsers)` function that declares its flags
and sets `func` to the function that runs it.

    chartjax-synth figureqa --out DIR --train-images N --val-images M --test-images K \\
        --seed S --workers W [--figure-types vbar_categorical] [--max-elements 3] \\
        [--templates 0,1] [--colors-per-set 4]
    chartjax-synth chartqa --out DIR --train-charts N --val-charts M --test-charts K --seed S
    chartjax-synth plotqa --out DIR --train-plots N --val-plots M --test-plots K --seed S
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from chartjax import quiet


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _csv(text: str | None, kind=str) -> tuple | None:
    return None if text is None else tuple(kind(x) for x in text.split(",") if x.strip())


def _run_figureqa(args: argparse.Namespace) -> int:
    from chartjax.synth.figureqa import FIGURE_TYPES, Options, generate

    options = Options(
        figure_types=_csv(args.figure_types) or FIGURE_TYPES,
        max_elements=args.max_elements,
        templates=_csv(args.templates, int),
        colors_per_set=args.colors_per_set,
    )
    summaries = generate(
        args.out,
        train_images=args.train_images,
        val_images=args.val_images,
        test_images=args.test_images,
        seed=args.seed,
        workers=args.workers,
        overwrite=args.overwrite,
        log=_log,
        options=options,
    )
    print(json.dumps({"out": os.path.abspath(args.out), "splits": summaries}, indent=1))
    return 0


def _add_figureqa(subparsers) -> None:
    p = subparsers.add_parser(
        "figureqa",
        help="FigureQA (Kahou et al. 2017): train1, validation1/2, no_annot_test1/2",
        description="Generate a FigureQA-style corpus in the official release layout.",
    )
    p.add_argument("--out", required=True, help="output folder (the builder's manual_dir)")
    p.add_argument("--train-images", type=int, default=0, help="images in train1")
    p.add_argument(
        "--val-images", type=int, default=0, help="images in each of validation1 and validation2"
    )
    p.add_argument(
        "--test-images", type=int, default=0, help="images in each of no_annot_test1 and _test2"
    )
    p.add_argument("--seed", type=int, default=0, help="same seed, same corpus")
    p.add_argument("--workers", type=int, default=1, help="rendering processes")
    p.add_argument("--overwrite", action="store_true", help="replace existing split folders")
    # Quick learning checks; each departs from the release, which is unchanged without them.
    p.add_argument("--figure-types", help="comma-separated figure types (default all five)")
    p.add_argument("--max-elements", type=int, help="at most this many bars/slices/curves (>= 2)")
    p.add_argument("--templates", help="comma-separated question ids 0-14 to keep (default all)")
    p.add_argument(
        "--colors-per-set", type=int, help="shrink each colour set to N hue-spread colours"
    )
    p.set_defaults(func=_run_figureqa)


def _add_chart_info(subparsers) -> None:
    from chartjax.synth import chart_info

    p = subparsers.add_parser(
        "chart_info",
        help="ICDAR 2019 CHART-Infographics synthetic layout: png/, json_gt/ (+ tables/)",
        description=chart_info.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chart_info.add_arguments(p)
    p.set_defaults(func=chart_info.run)


def _add_chartqa(subparsers) -> None:
    from chartjax.synth import chartqa

    p = subparsers.add_parser(
        "chartqa",
        help="ChartQA (Masry et al. 2022): train/, val/, test/ with png/, tables/, QA JSON",
        description=chartqa.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chartqa.add_arguments(p)
    p.set_defaults(func=chartqa.run)


def _add_plotqa(subparsers) -> None:
    from chartjax.synth import plotqa

    p = subparsers.add_parser(
        "plotqa",
        help="PlotQA (Methani et al. 2020): train/, val/, test/ with annotations.json, QA V1/V2",
        description=plotqa.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    plotqa.add_arguments(p)
    p.set_defaults(func=plotqa.run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chartjax-synth", description=__doc__.split("\n")[0])
    quiet.add_flag(parser)
    subparsers = parser.add_subparsers(dest="corpus", required=True)
    _add_figureqa(subparsers)
    _add_chart_info(subparsers)
    _add_chartqa(subparsers)
    _add_plotqa(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(quiet.setup(argv))
    try:
        return args.func(args)
    except (ValueError, FileExistsError) as e:
        _log(f"chartjax-synth {args.corpus}: error: {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
