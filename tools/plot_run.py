"""Plot training curves of one or more runs: python -m chartjax.tools.plot_run --out c.png rn=runs/rn."""

import argparse

from chartjax.plots import plot_training_curves


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--keys", default="loss,accuracy")
    p.add_argument("runs", nargs="+", help="label=workdir")
    args = p.parse_args(argv)
    runs = dict(r.split("=", 1) if "=" in r else (r, r) for r in args.runs)
    print(plot_training_curves(runs, args.out, tuple(args.keys.split(","))))


if __name__ == "__main__":
    main()
