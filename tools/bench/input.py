"""Input-pipeline throughput of a task's training batches (JSON output).

    python -m chartjax.tools.bench.input --data_dir demo_out/tfds --image-size 64 --batch 32
    python -m chartjax.tools.bench.input --image-size 64 --with-step   # also times the RN step

Without --data_dir a small FigureQA-style corpus is generated and built into a temp folder.
The loader must deliver at least 2x what the train step consumes (MaxText's methodology:
loader-only throughput vs synthetic-input step time, measured separately): `--with-step` runs
bench/train_step.py at the same sizes in a child process, after the loader is timed, and
reports `input_over_step`.

Can the host feed one accelerator (issue 18, item 3)? Each path reports its rate per CPU core,
`examples_per_cpu_s` (examples over the CPU seconds of this process, all of tf.data's threads
included, while the batches are drawn: on a shared machine this holds where wall-clock rates do
not), and `cores_per_h200`: the host cores it takes to feed one H200 at 40% MFU,
`0.4 * 989e12 / train FLOPs per example` examples/s.

* FigureQA: the task's own batches (TFDS read of the questions, tokenization, the figures'
  images gathered from the image cache and cropped per batch; the cache, every figure decoded
  and resized once, is built during start-up and reported apart) as above; the
  FLOPs per example are XLA's cost analysis of the RN training step at `--image-size` /
  `--conv-layers` (the RN is conv-heavy: models/flops.py counts transformers only).
* Pix2Struct (`--pix2struct-images`, 0 skips): the seq2seq tasks' featurize map
  (tasks/seq2seq.py `_featurize_fn`: PNG decode, header rendering, patch extraction at
  `--max-patches`, SentencePiece tokenization of the target) and batching, over 800x600
  matplotlib charts held as PNG bytes in memory, each with a ChartCheck-length claim as its
  header and a Chart-to-Text-length target; the TFDS record read is left out (the FigureQA
  path has it). The vocabulary is a 400-piece SentencePiece model (byte fallback) trained here (a real
  32k-50k one tokenizes at a similar rate: tokenization is well under 1% of the path).
  The FLOPs are models/flops.py's for Pix2Struct-base at 2048 patches and 128 targets (217
  examples/s at 40% MFU). `stages` times each step alone on one core to show where it goes.

Measured (2 cores, load 3; `--data_dir` a 2,000-figure generated corpus, 8,000 questions,
`--image-size 256 --conv-layers 5 --batch 64 --batches 80 --pix2struct-images 16`): FigureQA
5,518 questions per CPU second with the paper's 8-pixel crop, 11.5 cores per H200 (the RN at
6.23 GFLOP per question needs 63,462/s); the cache's start-up 4.5 CPU ms per figure, once.
Before the image cache (a PNG decoded per question) the same corpus gave ~770/s, 82 cores.
Pix2Struct 19.4 images per CPU second, 11.2 cores.
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
import time

from chartjax.data import pipeline
from chartjax.tools.bench import corpora, harness

H200_MFU = 0.4  # the operating point
CLAIM = (
    "The revenue of the company in 2021 was lower than in 2020 but it recovered by 2023, "
    "reaching its highest value of the period."
)  # ~130 characters: a ChartCheck claim rendered as the header (2 lines at 80 characters)
SUMMARY = " ".join(
    ["In 2023 revenue reached 15.1 billion US dollars, up from 9.8 billion in 2021."] * 4
)  # ~60 words: a Chart-to-Text summary


def feed_rate(examples: int, cpu_s: float, flops_per_example: float | None) -> dict:
    """Per-core rate and the host cores one H200 at 40% MFU needs at that rate."""
    from chartjax.models import flops

    rate = examples / cpu_s
    out = {"examples_per_cpu_s": rate, "train_flops_per_example": flops_per_example}
    if flops_per_example:
        need = H200_MFU * flops.PEAK_FLOPS["h200"] / flops_per_example
        out.update({"h200_examples_per_s_at_40pct_mfu": need, "cores_per_h200": need / rate})
    return out


def _timed_batches(it, batches: int) -> dict:
    """Draws one batch (start-up), then `batches` timed ones: wall and process CPU seconds."""
    t0 = time.perf_counter()
    next(it)
    startup = time.perf_counter() - t0
    cpu0, t0 = harness.cpu_seconds(), time.perf_counter()
    for _ in range(batches):
        next(it)
    return {
        "startup_s": startup,
        "wall_s": time.perf_counter() - t0,
        "cpu_s": harness.cpu_seconds() - cpu0,
    }


def rn_train_flops_per_example(image_size: int, conv_layers: int, batch: int = 4) -> float:
    """XLA's FLOP count of the RN training step (chartjax.train's, as bench/train_step.py
    builds it) per example."""
    import jax

    from chartjax import mesh as mesh_lib
    from chartjax import optim
    from chartjax import state as state_lib
    from chartjax import train as train_lib
    from chartjax.data import pipeline
    from chartjax.models import relation_network as rn
    from chartjax.tasks import synthetic

    cfg = rn.RNConfig(kind="rn", vocab_size=88, image_size=image_size, conv_layers=conv_layers)
    mesh, rules = mesh_lib.make_mesh((-1, 1)), mesh_lib.axis_rules("data_parallel")
    task = synthetic.make_task(image_size=image_size, vocab_size=88, num_train=batch)
    tx, sched = optim.make_optimizer("adam", lr=2.5e-4)
    spec, init = state_lib.create(lambda rngs: rn.build(cfg, rngs=rngs), tx, mesh, rules, 0)
    b = next(pipeline.train_batches(task, batch, 0, 0, 0, 1))
    b = {k: b[k] for k in task.model_inputs}
    step = jax.jit(train_lib.make_train_step(spec.model_def, task, tx, sched))
    cost = step.lower(jax.eval_shape(init), b).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost["flops"]) / batch


def _chart_pngs(n: int) -> list[bytes]:
    """`n` distinct 800x600 bar charts (matplotlib Agg), PNG-encoded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        fig, ax = plt.subplots(figsize=(8, 6), dpi=100)
        ax.bar([str(2019 + k) for k in range(5)], rng.uniform(5, 25, 5))
        ax.set_title(f"Revenue by year, segment {i} (billion USD)")
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        plt.close(fig)
        out.append(buf.getvalue())
    return out


def pix2struct_feed(
    tmp: str, images: int, batch: int, batches: int, max_patches: int, workers: int
) -> dict:
    """The Pix2Struct input path's per-core rate (see the module docstring)."""
    import numpy as np
    import tensorflow as tf

    from chartjax.data import vocab as vocab_lib
    from chartjax.data.images import decode_image_bytes
    from chartjax.models import flops
    from chartjax.models.model_configs import Pix2StructConfig
    from chartjax.tasks import seq2seq
    from chartjax.tools import train_vocab
    from chartjax.tools.bench.t5x_load import BASE

    features = seq2seq.Features(
        vocab_file=train_vocab.train(
            [CLAIM, SUMMARY] * 8, os.path.join(tmp, "spm"), vocab_size=400, hard_vocab_limit=False
        ),
        max_patches=max_patches,
        max_target_len=128,
    )
    vocab = vocab_lib.open_vocabulary(features.vocab_file)
    pngs = _chart_pngs(images)
    recs = {
        "image_bytes": pngs,
        "prompt": [CLAIM] * images,
        "target": [SUMMARY] * images,
    }
    ds = tf.data.Dataset.from_tensor_slices(recs).repeat()
    ds = ds.map(seq2seq._featurize_fn(features, vocab, False), num_parallel_calls=workers)
    ds = ds.batch(batch, drop_remainder=True).prefetch(2)
    t = _timed_batches(ds.as_numpy_iterator(), batches)
    fpe = flops.train_flops_per_example(Pix2StructConfig(**BASE), max_patches, 128)["total"]
    out = {
        "max_patches": max_patches,
        "batch": batch,
        "examples": batch * batches,
        "map_workers": workers,
        **t,
        "examples_per_s": batch * batches / t["wall_s"],
        **feed_rate(batch * batches, t["cpu_s"], fpe),
    }
    # Each stage alone (one thread, eager Python / one tf.function), CPU seconds per image.
    patch_fn = tf.function(
        lambda x: seq2seq.image_features(x, features),
        input_signature=[tf.TensorSpec([None, None, 3], tf.uint8)],
    )
    decoded = [decode_image_bytes(p) for p in pngs]
    rendered = [seq2seq.image_with_header(im, CLAIM, features) for im in decoded]
    patch_fn(rendered[0])  # trace
    stages = {
        "png_decode": lambda i: decode_image_bytes(pngs[i]),
        "header_render": lambda i: seq2seq.image_with_header(decoded[i], CLAIM, features),
        "patches": lambda i: np.asarray(patch_fn(rendered[i])),
        "tokenize": lambda i: seq2seq.target_arrays(vocab, SUMMARY, 128),
    }
    out["stages_cpu_s_per_image"] = {}
    for name, fn in stages.items():
        cpu0 = harness.cpu_seconds()
        for i in range(images):
            fn(i)
        out["stages_cpu_s_per_image"][name] = (harness.cpu_seconds() - cpu0) / images
    out["rendered_size"] = list(rendered[0].shape[:2])
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data_dir", default=None)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--conv-layers", type=int, default=4)
    p.add_argument("--train-pad", type=int, default=8, help="the paper's pad-and-crop (0: none)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--batches", type=int, default=60)
    p.add_argument("--images", type=int, default=200, help="corpus size when generating")
    p.add_argument(
        "--with-step", action="store_true", help="also run chartjax.tools.bench.train_step"
    )
    p.add_argument("--pix2struct-images", type=int, default=32, help="0: skip that path")
    p.add_argument("--pix2struct-batch", type=int, default=8)
    p.add_argument("--pix2struct-batches", type=int, default=8)
    p.add_argument("--max-patches", type=int, default=2048)
    p.add_argument(
        "--map-workers", type=int, default=0, help="Pix2Struct map threads (0: tf.data AUTOTUNE)"
    )
    p.add_argument("--no-flops", action="store_true", help="skip the RN FLOP count (a compile)")
    harness.add_out_flag(p)
    args = p.parse_args(argv)
    run = harness.Run("input", vars(args), ("tensorflow-cpu", "tensorflow", "tensorflow-datasets"))
    from chartjax import host_memory

    host_memory.keep_freed_memory()  # as the chartjax-* entry points run

    from chartjax.tasks import figureqa

    with tempfile.TemporaryDirectory(prefix="chartjax_bench_input_") as tmp:
        data_dir = args.data_dir or corpora.figureqa(tmp, args.images)
        task = figureqa.make_task(
            data_dir=data_dir,
            image_size=args.image_size,
            antialias=True,
            train_pad=args.train_pad,
            shuffle_buffer=2000,
        )
        t0, cpu0 = time.perf_counter(), harness.cpu_seconds()
        it = pipeline.train_batches(task, args.batch, 0, 0, 0, 1)
        next(it)  # start-up (the figure image cache is built here), kept out of the rate
        startup, startup_cpu = time.perf_counter() - t0, harness.cpu_seconds() - cpu0
        figures = task.source.cached_figures
        cpu0 = harness.cpu_seconds()
        t = harness.timeit(lambda: next(it), args.batches, warmup=0)
        cpu = harness.cpu_seconds() - cpu0
        results = {
            "task": "figureqa",
            "startup_s": round(startup, 2),
            "startup_cpu_s": round(startup_cpu, 2),
            "figures_cached": figures,  # decoded once each, during start-up
            "startup_cpu_s_per_figure": round(startup_cpu / max(figures, 1), 5),
            "examples_per_s": round(args.batch / t["mean_s"], 1),
            "batch": t,
        }
        fpe = (
            None if args.no_flops else rn_train_flops_per_example(args.image_size, args.conv_layers)
        )
        results["feed"] = {
            "cpu_s": cpu,
            **feed_rate(args.batch * args.batches, cpu, fpe),
        }
        if args.pix2struct_images:
            import tensorflow as tf

            results["pix2struct"] = pix2struct_feed(
                tmp,
                args.pix2struct_images,
                args.pix2struct_batch,
                args.pix2struct_batches,
                args.max_patches,
                args.map_workers or tf.data.AUTOTUNE,
            )
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
