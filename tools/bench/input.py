"""Input-pipeline throughput of a task's training batches (JSON output).

    python -m chartjax.tools.bench.input --data_dir demo_out/tfds --image-size 64 --batch 32
    python -m chartjax.tools.bench.input --image-size 64 --with-step   # also times the RN step

Without --data_dir a small FigureQA-style corpus is generated and built into a temp folder.
The loader must deliver at least 2x what the train step consumes (MaxText's methodology:
loader-only throughput vs synthetic-input step time, measured separately): `--with-step` runs
bench/train_step.py at the same sizes in a child process, after the loader is timed, and
reports `input_over_step`.
"""

from __future__ import annotations

import argparse
import tempfile

from chartjax.data import pipeline
from chartjax.tools.bench import corpora, harness


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data_dir", default=None)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--conv-layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--batches", type=int, default=60)
    p.add_argument("--images", type=int, default=200, help="corpus size when generating")
    p.add_argument(
        "--with-step", action="store_true", help="also run chartjax.tools.bench.train_step"
    )
    harness.add_out_flag(p)
    args = p.parse_args(argv)
    run = harness.Run("input", vars(args), ("tensorflow-cpu", "tensorflow", "tensorflow-datasets"))
    from chartjax import host_memory

    host_memory.keep_freed_memory()  # as the chartjax-* entry points run

    from chartjax.tasks import figureqa

    with tempfile.TemporaryDirectory(prefix="chartjax_bench_input_") as tmp:
        data_dir = args.data_dir or corpora.figureqa(tmp, args.images)
        task = figureqa.make_task(
            data_dir=data_dir, image_size=args.image_size, antialias=True, shuffle_buffer=2000
        )
        it = pipeline.train_batches(task, args.batch, 0, 0, 0, 1)
        t = harness.timeit(lambda: next(it), args.batches, warmup=1)  # warm-up: start-up
    results = {
        "task": "figureqa",
        "startup_s": round(t["warmup_s"][0], 2),
        "examples_per_s": round(args.batch / t["mean_s"], 1),
        "batch": t,
    }
    if args.with_step:
        argv = ["--kind", "rn", "--image-size", str(args.image_size)]
        argv += ["--conv-layers", str(args.conv_layers), "--batch", str(args.batch)]
        step = harness.child_json("chartjax.tools.bench.train_step", argv + ["--steps", "10"])
        results["step_examples_per_s"] = step["results"]["examples_per_s"]
        results["input_over_step"] = round(
            results["examples_per_s"] / results["step_examples_per_s"], 2
        )
    return harness.emit(run.report(results), args.out)


if __name__ == "__main__":
    main()
