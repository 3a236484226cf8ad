"""Input-pipeline throughput of a task's training batches (JSON output).

    python -m chartjax.tools.bench.input --data_dir demo_out/tfds --image-size 64 --batch 32
    python -m chartjax.tools.bench.input --image-size 64 --with-step   # also times the RN step

Without --data_dir a small FigureQA-style corpus is generated and built into a temp folder.
The loader must deliver at least 2x what the train step consumes (MaxText's methodology:
loader-only throughput vs synthetic-input step time, measured separately): `--with-step` runs
the runner's `step` bench (arm rn_256: chartjax-train on synthetic inputs, its logged step_s)
at the same sizes in a child process, after the loader is timed, and reports `input_over_step`.

Can the host feed one accelerator (issue 18, item 3; issue 25, item 4)? Each path runs with
each loader worker count of `--workers` (0: the feature map in a thread of this process; more
workers than cores simulate a larger host: the per-core rate must hold) and reports its rate per
CPU core, `examples_per_cpu_s` (examples over the CPU seconds of this process and its loader
worker processes while the batches are drawn: on a shared machine this holds where wall-clock
rates do not), and `cores_per_h200`: the host cores it takes to feed one H200 at 40% MFU,
`0.4 * 989e12 / train FLOPs per example` examples/s. A closed 0-worker stream's thread finishes
its batch before the next count is timed (that batch used to count against 1 worker), and
`--pix2struct-rounds` passes through the worker counts several times, pooled, as load drifts.

* FigureQA: the task's own batches (TFDS read of the questions, tokenization, the figures'
  images gathered from the image cache and cropped per batch; the cache, every figure decoded
  and resized once, is built during start-up and reported apart) as above; the
  FLOPs per example are XLA's cost analysis of the RN training step at `--image-size` /
  `--conv-layers` (the RN is conv-heavy: models/flops.py counts transformers only).
* Pix2Struct (`--pix2struct-images`, 0 skips): the seq2seq tasks' featurize map
  (tasks/core/seq2seq.py `_featurize_fn`: PNG decode, header rendering, NumPy patch extraction at
  `--max-patches`, SentencePiece tokenization of the target) and batching, over 800x600
  matplotlib charts held as PNG bytes in memory, each with a ChartCheck-length claim as its
  header and a Chart-to-Text-length target; the TFDS record read is left out (the FigureQA
  path has it). The vocabulary is a 400-piece SentencePiece model (byte fallback) trained here (a real
  32k-50k one tokenizes at a similar rate: tokenization is well under 1% of the path).
  The FLOPs are models/flops.py's for Pix2Struct-base at 2048 patches and 128 targets (217
  examples/s at 40% MFU). `stages` times each step alone on one core to show where it goes.

Measured before the loader left TensorFlow (tf.data threads; 2 cores, load 3; `--data_dir` a
2,000-figure generated corpus, 8,000 questions, `--image-size 256 --conv-layers 5 --batch 64
--batches 80 --pix2struct-images 16`): FigureQA 5,518 questions per CPU second with the paper's
8-pixel crop, 11.5 cores per H200 (the RN at 6.23 GFLOP per question needs 63,462/s); the
cache's start-up 4.5 CPU ms per figure, once. Before the image cache (a PNG decoded per
question) the same corpus gave ~770/s, 82 cores. Pix2Struct 19.4 images per CPU second.

Before and after, one session (this 2-core machine type, load 3.4-6; compare as ratios),
`--data_dir` a 1,000-figure generated corpus, `--image-size 256 --conv-layers 5 --batch 64
--batches 80 --no-flops --pix2struct-images 32 --pix2struct-batch 8 --pix2struct-batches 8
--pix2struct-rounds 3` (the tf.data path, commit c04f29e: `--pix2struct-batches 24`): the tf.data
path gave FigureQA 2,036 questions and Pix2Struct 13.5 images per CPU second. Pix2Struct with 0
/ 1 / 2 / 4 workers: the loader of 8d1ac65 11.8 / 10.2 / 9.8 / 9.5 images per CPU second
(13-19% below 0; below in every round), the loader now 11.7 / 13.5 / 13.3 / 13.1 (11-15% above);
a second pair at load 6-6.6: 10.9 / 10.2 / 10.2 / 9.8 before, 11.1 / 11.4 / 12.0 / 12.9 after.
The workers lost to memory, not to the round trip: spawned, they ran without the parent's
`keep_freed_memory` (19 CPU ms of page faults per image), and the batch's 50 MB were faulted
into shared memory page by page and copied out (chartjax/data/loader.py's docstring). Workers
now beat the 0-worker thread, whose malloc arena still faults (300-1,500 faults, 5-17 CPU ms
per image; 130 with MALLOC_ARENA_MAX=1). Stages per image: header rendering 32-37 CPU ms, patches
39-44 in NumPy against 24 in TF (tf.data run). FigureQA (workers only tokenize; unchanged) swings
+-40% between runs of 80 batches: 300 batches gave 9,773 / 8,489 / 9,666 questions per CPU
second with 0 / 1 / 2 workers, a worker's round trip costing ~1.3 CPU ms per 64-question batch
in the parent's executor threads against ~6.6 ms of work. At 6.23 GFLOP per question one H200
then needs about 7 cores of FigureQA feeding; Pix2Struct-base at 2048 patches (217 images/s)
about 16-17.
"""

from __future__ import annotations

import argparse
import functools
import io
import os
import tempfile
import threading
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


def rn_train_flops_per_example(image_size: int, conv_layers: int, batch: int = 4) -> float:
    """XLA's FLOP count of the RN training step (chartjax.train's) per example."""
    import jax

    from chartjax import mesh as mesh_lib
    from chartjax import optim
    from chartjax import state as state_lib
    from chartjax import train as train_lib
    from chartjax.data import pipeline
    from chartjax.models import relation_network as rn
    from chartjax.tasks.smoke import synthetic

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


def _feed(batches, n: int, batch: int) -> dict:
    """Draws one batch (start-up), then `n` timed ones: wall seconds and the CPU seconds of
    this process and its loader workers."""
    t0 = time.perf_counter()
    next(batches)
    startup = time.perf_counter() - t0
    cpu0, t0 = harness.tree_cpu_seconds(), time.perf_counter()
    for _ in range(n):
        next(batches)
    wall, cpu = time.perf_counter() - t0, harness.tree_cpu_seconds() - cpu0
    return {
        "startup_s": round(startup, 3),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "examples_per_s": round(batch * n / wall, 1),
    }


def _settle(timeout: float = 120.0) -> None:
    """Waits for the thread of a closed 0-worker stream to finish the batch it was computing,
    which would otherwise count in the next worker count's CPU seconds (a closed worker stream
    waits for its batches in flight itself)."""
    from chartjax.data import loader

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(
        t.name == loader.THREAD_NAME for t in threading.enumerate()
    ):
        time.sleep(0.05)


def _with_workers(workers: int):
    os.environ["CHARTJAX_LOADER_WORKERS"] = str(workers)  # read by loader.map_ordered


def pix2struct_feed(
    tmp: str,
    images: int,
    batch: int,
    batches: int,
    max_patches: int,
    workers: list[int],
    rounds: int = 1,
) -> dict:
    """The Pix2Struct input path's per-core rate per worker count (module docstring), over
    `rounds` passes through the worker counts (a shared machine's load drifts)."""
    import itertools

    import numpy as np

    from chartjax.data import loader
    from chartjax.data import vocab as vocab_lib
    from chartjax.data.images import decode_image_bytes
    from chartjax.models import flops
    from chartjax.models.model_configs import Pix2StructConfig
    from chartjax.tasks.core import seq2seq
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
    recs = [{"image_bytes": p, "prompt": CLAIM, "target": SUMMARY} for p in pngs]
    fpe = flops.train_flops_per_example(Pix2StructConfig(**BASE), max_patches, 128)["total"]
    fn = functools.partial(loader.batch_of, seq2seq._featurize_fn(features, vocab, False))
    n = batch * batches * rounds
    out = {"max_patches": max_patches, "batch": batch, "examples": n, "rounds": rounds}
    runs: dict[int, list[dict]] = {w: [] for w in workers}
    for _ in range(rounds):
        for w in workers:
            _with_workers(w)
            stream = loader.chunked(itertools.cycle(recs), batch, drop_remainder=True)
            it = loader.map_ordered(fn, stream)
            runs[w].append(_feed(it, batches, batch))
            it.close()
            _settle()
    out["workers"] = {}
    for w, ts in runs.items():
        wall, cpu = sum(t["wall_s"] for t in ts), sum(t["cpu_s"] for t in ts)
        out["workers"][str(w)] = {
            "startup_s": ts[0]["startup_s"],
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3),
            "examples_per_s": round(n / wall, 1),
            "round_examples_per_cpu_s": [round(batch * batches / t["cpu_s"], 2) for t in ts],
            **feed_rate(n, cpu, fpe),
        }
    # Each stage alone (this process, one image at a time), CPU seconds per image.
    decoded = [decode_image_bytes(p) for p in pngs]
    rendered = [seq2seq.image_with_header(im, CLAIM, features) for im in decoded]
    stages = {
        "png_decode": lambda i: decode_image_bytes(pngs[i]),
        "header_render": lambda i: seq2seq.image_with_header(decoded[i], CLAIM, features),
        "patches": lambda i: np.asarray(seq2seq.image_features(rendered[i], features)),
        "tokenize": lambda i: seq2seq.target_arrays(vocab, SUMMARY, 128),
    }
    out["stages_cpu_s_per_image"] = {}
    for name, stage in stages.items():
        cpu0 = harness.cpu_seconds()
        for i in range(images):
            stage(i)
        out["stages_cpu_s_per_image"][name] = (harness.cpu_seconds() - cpu0) / images
    out["rendered_size"] = list(rendered[0].shape[:2])
    return out


def figureqa_feed(args, data_dir: str, fpe: float | None) -> dict:
    """The FigureQA task's training batches per worker count (module docstring)."""
    from chartjax.tasks import figureqa

    out = {}
    for w in args.workers:
        _with_workers(w)
        task = figureqa.make_task(
            data_dir=data_dir,
            image_size=args.image_size,
            antialias=True,
            train_pad=args.train_pad,
        )
        t0, cpu0 = time.perf_counter(), harness.tree_cpu_seconds()
        it = pipeline.train_batches(task, args.batch, 0, 0, 0, 1)
        next(it)  # start-up (the figure image cache is built here), kept out of the rate
        startup, startup_cpu = time.perf_counter() - t0, harness.tree_cpu_seconds() - cpu0
        figures = task.source.cached_figures
        t = _feed(it, args.batches, args.batch)
        del it  # closes the stream
        _settle()
        out[str(w)] = {
            "startup_s": round(startup, 2),
            "startup_cpu_s_per_figure": round(startup_cpu / max(figures, 1), 5),
            "figures_cached": figures,  # decoded once each, during start-up
            **t,
            **feed_rate(args.batch * args.batches, t["cpu_s"], fpe),
        }
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
        "--workers",
        type=lambda s: [int(v) for v in s.split(",")],
        default=[0, 1, 2, 4],
        help="loader worker counts to run, comma-separated (0: in this process)",
    )
    p.add_argument(
        "--with-step",
        action="store_true",
        help="also time the product's RN step (runner bench `step`, arm rn_256)",
    )
    p.add_argument("--pix2struct-images", type=int, default=32, help="0: skip that path")
    p.add_argument("--pix2struct-batch", type=int, default=8)
    p.add_argument("--pix2struct-batches", type=int, default=8)
    p.add_argument(
        "--pix2struct-rounds",
        type=int,
        default=1,
        help="passes through the worker counts, pooled (load drifts on a shared machine)",
    )
    p.add_argument("--max-patches", type=int, default=2048)
    p.add_argument("--no-flops", action="store_true", help="skip the RN FLOP count (a compile)")
    harness.add_out_flag(p)
    args = p.parse_args(argv)
    run = harness.Run("input", vars(args), ("tensorflow-datasets", "numpy", "pillow"))
    from chartjax import host_memory

    host_memory.keep_freed_memory()  # as the chartjax-* entry points run

    with tempfile.TemporaryDirectory(prefix="chartjax_bench_input_") as tmp:
        data_dir = args.data_dir or corpora.figureqa(tmp, args.images)
        fpe = (
            None if args.no_flops else rn_train_flops_per_example(args.image_size, args.conv_layers)
        )
        results = {"task": "figureqa", "figureqa": figureqa_feed(args, data_dir, fpe)}
        if args.pix2struct_images:
            results["pix2struct"] = pix2struct_feed(
                tmp,
                args.pix2struct_images,
                args.pix2struct_batch,
                args.pix2struct_batches,
                args.max_patches,
                args.workers,
                args.pix2struct_rounds,
            )
    if args.with_step:  # the product's RN step at these sizes, timed by its own loop
        sizes = [f"RNConfig.image_size = {args.image_size}"]
        sizes += [f"synthetic_task.image_size = {args.image_size}"]
        sizes += [f"RNConfig.conv_layers = {args.conv_layers}"]
        sizes += [f"train.global_batch_size = {args.batch}"]
        argv = ["step", "--arms", "rn_256", "--rerun", "--workdir", "runs/bench/input_step"]
        step = harness.child_json(
            "chartjax.tools.bench.runner", argv + [f"--gin_bindings={b}" for b in sizes]
        )
        train = step["results"]["arms"]["rn_256"]["train"]
        results["step_examples_per_s"] = train["median_examples_per_s"]
        best = max(r["examples_per_s"] for r in results["figureqa"].values())
        results["input_over_step"] = round(best / results["step_examples_per_s"], 2)
    return harness.emit(run.report(results), args.out)


if __name__ == "__main__":
    main()
