"""Train-step throughput of the FigureQA baselines on synthetic inputs (JSON output).

    python -m chartjax.tools.bench.train_step --kind rn --image-size 256 --conv-layers 5 --batch 32

Times the jitted sharded step of chartjax.train (the one the loop runs) over all local
devices, excluding compilation; no TFDS, no input pipeline (see bench/input.py for that).
Each timed step blocks on its loss, so `examples_per_s` is batch / mean step time.
"""

from __future__ import annotations

import argparse

from chartjax.tools.bench import harness


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--kind", default="rn", choices=["rn", "cnn_lstm", "text_only"])
    p.add_argument("--image-size", type=int, default=256)
    p.add_argument("--conv-layers", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rules", default="data_parallel")
    harness.add_out_flag(p)
    args = p.parse_args(argv)
    run = harness.Run("train_step", vars(args), ("jax", "jaxlib", "flax", "optax"))
    from chartjax import host_memory

    host_memory.keep_freed_memory()  # as the chartjax-* entry points run

    import jax

    from chartjax import mesh as mesh_lib
    from chartjax import optim
    from chartjax import state as state_lib
    from chartjax import train as train_lib
    from chartjax.data import pipeline
    from chartjax.models import relation_network as rn
    from chartjax.tasks import synthetic

    cfg = rn.RNConfig(
        kind=args.kind,
        vocab_size=88,
        image_size=args.image_size,
        conv_layers=args.conv_layers,
        f_dim=256 if args.kind == "rn" else 512,
        embed_dim=32 if args.kind == "cnn_lstm" else 64,
    )
    mesh = mesh_lib.make_mesh((-1, 1))
    rules = mesh_lib.axis_rules(args.rules)
    task = synthetic.make_task(image_size=args.image_size, vocab_size=88, num_train=args.batch)
    tx, sched = optim.make_optimizer("adam", lr=2.5e-4)
    spec, init = state_lib.create(lambda rngs: rn.build(cfg, rngs=rngs), tx, mesh, rules, 0)
    step = jax.jit(
        train_lib.make_train_step(spec.model_def, task, tx, sched),
        in_shardings=(spec.shardings, None),
        out_shardings=(spec.shardings, None),
        donate_argnums=0,
    )
    state = {"s": init()}
    batch = pipeline.to_global(
        next(pipeline.train_batches(task, args.batch, 0, 0, 0, 1)), mesh, rules, task.model_inputs
    )

    def step_once():
        state["s"], m = step(state["s"], batch)
        jax.block_until_ready(m["loss"])

    t = harness.timeit(step_once, args.steps, warmup=1)  # warm-up: compilation
    results = {
        "model": args.kind,
        "objects": cfg.grid**2 if args.kind == "rn" else None,
        "devices": jax.device_count(),
        "params": state_lib.num_params(state["s"]),
        "compile_s": round(t["warmup_s"][0], 2),
        "step_s": round(t["mean_s"], 4),
        "examples_per_s": round(args.batch / t["mean_s"], 1),
        "step": t,
    }
    return harness.emit(run.report(results), args.out)


if __name__ == "__main__":
    main()
