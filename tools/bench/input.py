"""Input-pipeline throughput of a task's training batches (JSON output).

    python -m chartjax.tools.bench.input --data_dir demo_out/tfds --image-size 64 --batch 32
    python -m chartjax.tools.bench.input --image-size 64 --with-step   # also times the RN step

Without --data_dir a small FigureQA-style corpus is generated and built into a temp folder.
The loader must deliver at least 2x what the train step consumes (MaxText's methodology:
loader-only throughput vs synthetic-input step time, measured separately).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time


def _build_corpus(tmp: str, images: int) -> str:
    import tensorflow_datasets as tfds

    from chartjax.synth import figureqa
    from tfds_builders.figureqa import figureqa as builder_mod

    raw = os.path.join(tmp, "raw")
    figureqa.generate(raw, train_images=images, val_images=0, test_images=0, seed=0, workers=2)
    data_dir = os.path.join(tmp, "tfds")
    builder = builder_mod.Builder(data_dir=data_dir)
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=raw))
    return data_dir


def main(argv=None):
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
    args = p.parse_args(argv)
    from chartjax import host_memory

    host_memory.keep_freed_memory()  # as the chartjax-* entry points run

    from chartjax.tasks import figureqa

    tmp = tempfile.mkdtemp(prefix="chartjax_bench_input_")
    data_dir = args.data_dir or _build_corpus(tmp, args.images)
    task = figureqa.make_task(
        data_dir=data_dir, image_size=args.image_size, antialias=True, shuffle_buffer=2000
    )
    it = task.train_batches(args.batch, 0, 0, 0, 1)
    t = time.time()
    next(it)  # pipeline start-up
    startup = time.time() - t
    t = time.time()
    for _ in range(args.batches):
        next(it)
    dt = time.time() - t
    out = {
        "benchmark": "input_pipeline",
        "task": "figureqa",
        "image_size": args.image_size,
        "batch": args.batch,
        "batches": args.batches,
        "startup_s": round(startup, 2),
        "examples_per_s": round(args.batch * args.batches / dt, 1),
        "cpu_cores": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    if args.with_step:
        from chartjax.tools.bench import train_step as bench_train_step

        step = bench_train_step.main(
            [
                "--kind",
                "rn",
                "--image-size",
                str(args.image_size),
                "--conv-layers",
                str(args.conv_layers),
                "--batch",
                str(args.batch),
                "--steps",
                "10",
            ]
        )
        out["step_examples_per_s"] = step["examples_per_s"]
        out["input_over_step"] = round(out["examples_per_s"] / step["examples_per_s"], 2)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
