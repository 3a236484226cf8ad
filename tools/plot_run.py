"""Plot the training curves and evaluations of one or more runs:
chartjax-plot --out c.png rn=runs/rn text=runs/text_only

One panel per training metric (--keys, from train_metrics.jsonl) and one per evaluation metric
(--eval_keys, from eval/<split>/step_<N>/metrics.json: one line per split; by default the
runs' headline metric, e.g. accuracy; --eval_keys= leaves them out)."""

import argparse

from chartjax.plots import plot_training_curves


def main(argv=None):
    p = argparse.ArgumentParser(prog="chartjax-plot", description=__doc__)
    p.add_argument("--out", required=True, help="the PNG to write")
    p.add_argument(
        "--keys", default="loss,accuracy", help="comma-separated training metrics to plot"
    )
    p.add_argument(
        "--eval_keys",
        default=None,
        help="comma-separated evaluation metrics (default: the runs' headline metric)",
    )
    p.add_argument("runs", nargs="+", help="label=workdir")
    args = p.parse_args(argv)
    runs = dict(r.split("=", 1) if "=" in r else (r, r) for r in args.runs)
    eval_keys = None
    if args.eval_keys is not None:
        eval_keys = tuple(k for k in args.eval_keys.split(",") if k)
    print(plot_training_curves(runs, args.out, tuple(args.keys.split(",")), eval_keys))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
