"""LoRA against full fine-tuning: trainable parameters, optimizer-state bytes and step time.

    python -m chartjax.tools.bench.peft [--models pix2struct_base,t5_1_1_base] [--batch 2]
        [--patches 128] [--input_len 128] [--target_len 32] [--rank 8] [--out bench_peft.json]

For each model (the family's models/*.gin with sizes/<model>.gin: Pix2Struct-base, the size of
MatCha and DePlot, and T5 v1.1-base, the size of Flan-T5-base) two train states are built with
the real train step (chartjax.train.make_train_step) and the optimizer of the model's LoRA recipe
(tasks/chartcheck_*_finetune_class_lora.gin: HF Adafactor for MatCha, AdamW for Flan-T5):
`full` trains every weight, `lora` adds peft/lora.gin's adapters (rank `--rank`, query and value
of every attention block) and freezes the rest (chartjax/trainable.py). Reported per side:
parameters, trainable parameters, optimizer-state bytes (from the abstract state: nothing is
executed for them) and train-step time on random data at a small batch and short lengths (the
shapes are in the report: CPU numbers, for the ratio, not for throughput claims), the two sides
timed interleaved (harness.interleaved), the first call of each the compile.
"""

from __future__ import annotations

import argparse
import gc

import numpy as np

from chartjax.tools.bench import harness

FAMILIES = {  # sizes/<prefix>_*.gin -> (family gin, the LoRA recipe's optimizer)
    "pix2struct": ("models/pix2struct.gin", "adafactor_hf"),
    "t5_1_1": ("models/t5_1_1.gin", "adamw"),
}


def family(name: str) -> tuple[str, str]:
    for prefix, value in FAMILIES.items():
        if name.startswith(prefix + "_"):
            return value
    raise SystemExit(f"--models: {name!r} is not a sizes/pix2struct_* or sizes/t5_1_1_* size")


def model_config(name: str, dtype: str):
    import dataclasses

    import gin

    from chartjax import config as config_lib

    gin.clear_config()
    try:
        config_lib.parse_gin([family(name)[0], f"sizes/{name}.gin"])
        return dataclasses.replace(config_lib._model_config("train"), dtype=dtype)
    finally:
        gin.clear_config()


def batch(cfg, a) -> dict:
    rng = np.random.default_rng(0)
    b = a.batch
    targets = rng.integers(2, cfg.vocab_size, (b, a.target_len)).astype(np.int32)
    out = {
        "decoder_target_tokens": targets,
        "decoder_input_tokens": np.concatenate([np.zeros((b, 1), np.int32), targets[:, :-1]], 1),
    }
    if hasattr(cfg, "patch_size"):  # row id, column id, pixels
        side = int(a.patches**0.5)
        ids = np.stack(np.meshgrid(np.arange(1, side + 1), np.arange(1, side + 1)), -1)
        ids = np.broadcast_to(ids.reshape(1, -1, 2), (b, side * side, 2))
        pixels = rng.normal(size=(b, side * side, cfg.patch_size**2 * cfg.num_channels))
        out["encoder_input_tokens"] = np.concatenate([ids, pixels], -1).astype(np.float32)
    else:
        out["encoder_input_tokens"] = rng.integers(2, cfg.vocab_size, (b, a.input_len)).astype(
            np.int32
        )
    return out


def _bytes(tree) -> int:
    import jax

    return sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(tree))


def side(cfg, lora_cfg, optimizer: str, data: dict):
    """(stats, step callable, its state holder) of one train state. The state is built eagerly,
    not through state.create's jitted init: compiling the initializers of a base-size model
    takes minutes on two cores and is not what is measured."""
    import types

    import jax
    import jax.numpy as jnp
    from flax import nnx

    from chartjax import optim, trainable
    from chartjax import state as state_lib
    from chartjax import train as train_lib
    from chartjax.models import configurables, losses

    def model_fn(rngs):
        return configurables.build_model(cfg, rngs, lora=lora_cfg)

    tx, sched = optim.make_optimizer(optimizer, lr=1e-4)
    labels = trainable.model_labels(model_fn)
    tx = trainable.wrap(tx, labels)
    model = model_fn(nnx.Rngs(params=0, dropout=1, default=2))
    graphdef, params, rng_state, rest = nnx.split(model, nnx.Param, nnx.RngState, ...)
    params = nnx.to_pure_dict(params)
    stats = {
        "params": sum(int(x.size) for x in jax.tree.leaves(params)),
        "trainable_params": trainable.count(params, labels),
        "opt_state_bytes": _bytes(jax.eval_shape(tx.init, params)),  # abstract: exact
        "params_bytes": _bytes(params),
    }
    state = {
        "step": jnp.zeros((), jnp.int32),
        "params": params,
        "opt_state": tx.init(params),
        "model_state": nnx.to_pure_dict(rest),
        "rng": jax.random.key_data(jax.random.key(0)),
    }
    model_def = state_lib.ModelDef(graphdef=graphdef, rng_state=rng_state)
    task = types.SimpleNamespace(
        loss=lambda model, b, *, train: losses.seq2seq_loss(model, b, deterministic=not train)
    )
    step = jax.jit(train_lib.make_train_step(model_def, task, tx, sched, labels), donate_argnums=0)
    holder = {"state": state}
    data = jax.device_put(data)

    def run():
        holder["state"], metrics = step(holder["state"], data)
        jax.block_until_ready(metrics["loss"])

    return stats, run, holder


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="pix2struct_base,t5_1_1_base")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--patches", type=int, default=256, help="Pix2Struct patches (a square)")
    p.add_argument("--input_len", type=int, default=256, help="T5 input tokens")
    p.add_argument("--target_len", type=int, default=32)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--dtype", default="bfloat16", help="activations (the recipes' bfloat16)")
    p.add_argument("--alternations", type=int, default=harness.MIN_ALTERNATIONS)
    harness.add_out_flag(p)
    a = p.parse_args(argv)
    run = harness.Run("peft", vars(a), libs=("jax", "flax", "optax"))

    from chartjax.models import lora

    lora_cfg = lora.LoraConfig(rank=a.rank, alpha=2.0 * a.rank, dropout=0.05)
    results = {}
    for name in a.models.split(","):
        cfg = model_config(name, a.dtype)
        optimizer = family(name)[1]
        data = batch(cfg, a)
        full_stats, full_step, full_state = side(cfg, None, optimizer, data)
        lora_stats, lora_step, lora_state = side(cfg, lora_cfg, optimizer, data)
        t = harness.interleaved(full_step, lora_step, alternations=a.alternations)
        row = {
            "optimizer": optimizer,
            "shapes": {
                "batch": a.batch,
                "encoder": a.patches if hasattr(cfg, "patch_size") else a.input_len,
                "decoder": a.target_len,
                "activations": a.dtype,
            },
            "full": {**full_stats, "step_s": t["a"]},
            "lora": {**lora_stats, "step_s": t["b"]},
            "trainable_fraction": lora_stats["trainable_params"] / full_stats["trainable_params"],
            "opt_state_ratio": lora_stats["opt_state_bytes"] / full_stats["opt_state_bytes"],
            "step_speedup_lora_over_full": t["speedup_a_over_b"]["median"] ** -1,
        }
        harness.progress({"model": name, **{k: v for k, v in row.items() if k != "shapes"}})
        results[name] = row
        del full_step, lora_step, full_state, lora_state
        gc.collect()
    return harness.emit(run.report(results), a.out)


if __name__ == "__main__":
    main()
