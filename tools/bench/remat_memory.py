"""Memory of the Pix2Struct train step per `remat_policy`, and the largest batch one H200 fits.

    python -m chartjax.tools.bench.remat_memory [--models base,large] [--policies ...] \
        [--targets 128] [--budget-gb 139] [--headroom 0.9] [--out remat_memory.json]

Nothing runs. Pix2Struct-base (sizes/pix2struct_base.gin) at 2,048 patches and Pix2Struct-large
(sizes/pix2struct_large.gin) at 4,096, both with 128 decoder tokens, bf16 activations, fp32
parameters and the recipes' T5X Adafactor (runs/adafactor_t5x.gin). Two measurements a policy:
- `xla_cpu`: the full train step (forward, backward, Adafactor update, the state donated as
  train.py does) lowered at abstract shapes and compiled; `compiled.memory_analysis()` gives
  argument, output, alias, temp and generated-code bytes, and peak = arguments + outputs -
  aliases + temps. XLA:CPU does not realize remat's saving: its schedule keeps the recomputed
  activations alive as long as the originals (the same temp bytes for every policy, also for a
  plain jax.checkpoint toy), so these numbers are the no-remat memory whatever the policy.
  XLA:GPU fuses, schedules and assigns buffers differently again.
- `residual_gb`: the bytes the forward pass keeps for the backward pass (jax's saved residuals
  of the loss, inputs left out), which is exactly what a policy changes, before any backend.

H200 estimate, per policy, linear in the batch b (two probe batches each):
    peak(b) = CPU peak without remat(b) - residuals without remat(b) + residuals of the policy(b)
              + residuals without remat(b) / encoder layers  (one layer recomputed at a time)
For "none" that is the XLA:CPU peak itself, and the predicted largest batch is compiled once
to check the line. The largest batch is the largest b with peak(b) <= budget_gb * headroom;
the headroom leaves room for the CUDA context, cuBLAS/cuDNN workspaces and fragmentation. JAX
preallocates only XLA_PYTHON_CLIENT_MEM_FRACTION (0.75 by default) of the GPU: a batch near the
limit needs that raised (e.g. to 0.95). The estimate is a planning number, to be replaced by a
measurement on the H200 (tools/gpu).

Compiles use backend (LLVM) optimization level 0 (as JAX_DISABLE_MOST_OPTIMIZATIONS): code
generation only, not the HLO passes and buffer assignment the analysis reads. No step is timed:
a Pix2Struct-base step at 2,048 patches takes seconds per example on these CPUs.
"""

from __future__ import annotations

import argparse
import math
import time

from chartjax.tools.bench import harness

SIZES = {  # gin_configs/sizes/pix2struct_{base,large}.gin, and the patches each is run at
    "base": dict(
        emb_dim=768,
        num_heads=12,
        head_dim=64,
        mlp_dim=2048,
        num_encoder_layers=12,
        num_decoder_layers=12,
        patches=2048,
    ),
    "large": dict(
        emb_dim=1536,
        num_heads=24,
        head_dim=64,
        mlp_dim=3968,
        num_encoder_layers=18,
        num_decoder_layers=18,
        patches=4096,
    ),
}
POLICIES = ("none", "full", "dots_saveable", "dots_with_no_batch_dims_saveable")
NOTE = (
    "Compile-time analysis on XLA:CPU, nothing executed. xla_cpu: memory_analysis() of the "
    "whole train step (peak = arguments + outputs - aliases + temps); XLA:CPU keeps the "
    "recomputed activations as long as the originals, so it shows no remat saving, and XLA:GPU "
    "schedules and assigns buffers differently. residual_gb: jax's saved residuals (what the "
    "policy changes). h200_estimate: CPU no-remat peak - its residuals + the policy's residuals "
    "+ one encoder layer's residuals, linear in batch; a planning estimate, not a GPU measurement."
)
# Backend-only switches (as JAX_DISABLE_MOST_OPTIMIZATIONS): faster CPU compiles, same buffers.
FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="base,large", help="comma list of " + ",".join(SIZES))
    p.add_argument("--policies", default=",".join(POLICIES))
    p.add_argument("--targets", type=int, default=128, help="decoder tokens")
    p.add_argument("--vocab", type=int, default=50244)
    p.add_argument("--base-batches", default="4,8", help="Pix2Struct-base's two probe batches")
    p.add_argument("--large-batches", default="1,2", help="Pix2Struct-large's two probe batches")
    p.add_argument("--budget-gb", type=float, default=139.0, help="H200 memory, 1e9 bytes")
    p.add_argument("--headroom", type=float, default=0.9, help="usable fraction of the budget")
    p.add_argument("--no-check", action="store_true", help="skip the checking compile")
    harness.add_out_flag(p)
    return p.parse_args(argv)


def _config(size: str, policy: str, vocab: int):
    from chartjax.models.model_configs import Pix2StructConfig

    kw = {k: v for k, v in SIZES[size].items() if k != "patches"}
    return Pix2StructConfig(vocab_size=vocab, dtype="bfloat16", remat_policy=policy, **kw)


def _pieces(cfg, batch: int, patches: int, targets: int):
    """(loss_fn(params, rest, batch), train step(state, batch), abstract state, abstract batch):
    shapes only, no parameter is allocated."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from chartjax import optim
    from chartjax.models import losses, pix2struct

    graphdef, params, rest = nnx.split(
        nnx.eval_shape(lambda: pix2struct.build(cfg, 0)), nnx.Param, ...
    )
    tx, _ = optim.make_optimizer("adafactor", lr=1e-2, weight_decay=1e-5)  # adafactor_t5x.gin
    state = {"params": params, "opt": jax.eval_shape(tx.init, params), "rest": rest}
    sds = jax.ShapeDtypeStruct
    abstract_batch = {
        "encoder_input_tokens": sds((batch, patches, 2 + cfg.patch_dim), jnp.float32),
        "decoder_input_tokens": sds((batch, targets), jnp.int32),
        "decoder_target_tokens": sds((batch, targets), jnp.int32),
    }

    def loss_fn(p, rest, b):
        model = nnx.merge(graphdef, p, jax.tree.map(lambda x: x, rest))  # Variables at this trace
        return losses.seq2seq_loss(model, b, deterministic=False)[0]

    def step(state, b):
        loss, grads = jax.value_and_grad(loss_fn)(state["params"], state["rest"], b)
        updates, opt = tx.update(grads, state["opt"], state["params"])
        params = optax.apply_updates(state["params"], updates)
        return {"params": params, "opt": opt, "rest": state["rest"]}, loss

    return loss_fn, step, state, abstract_batch


def compile_step(cfg, batch: int, patches: int, targets: int):
    """(compiled train step, compile seconds), the state donated as train.py does."""
    import jax

    _, step, state, abstract_batch = _pieces(cfg, batch, patches, targets)
    t0 = time.perf_counter()
    lowered = jax.jit(step, donate_argnums=0).lower(state, abstract_batch)
    compiled = lowered.compile(compiler_options=FAST_COMPILE)
    return compiled, time.perf_counter() - t0


def residual_bytes(cfg, batch: int, patches: int, targets: int) -> int:
    """Bytes the forward pass keeps for the backward pass (jax's saved residuals of the loss,
    the inputs themselves left out): what the remat policy decides, before any backend."""
    from jax._src.ad_checkpoint import saved_residuals  # what jax.ad_checkpoint.print_... uses

    loss_fn, _, state, abstract_batch = _pieces(cfg, batch, patches, targets)
    res = saved_residuals(loss_fn, state["params"], state["rest"], abstract_batch)
    return sum(
        a.size * a.dtype.itemsize for a, why in res if not why.startswith("from the argument")
    )


def memory(compiled) -> dict:
    m = compiled.memory_analysis()
    out = {
        k: int(getattr(m, k + "_in_bytes"))
        for k in ("argument_size", "output_size", "alias_size", "temp_size", "generated_code_size")
    }
    out["peak_bytes"] = (
        out["argument_size"] + out["output_size"] - out["alias_size"] + out["temp_size"]
    )
    return out


def _gb(x: float) -> float:
    return round(x / 1e9, 2)


def _cpu(size: str, policy: str, batch: int, a) -> dict:
    cfg = _config(size, policy, a.vocab)
    compiled, seconds = compile_step(cfg, batch, SIZES[size]["patches"], a.targets)
    row = {"model": size, "policy": policy, "batch": batch, **memory(compiled)}
    row.update(peak_gb=_gb(row["peak_bytes"]), compile_s=round(seconds, 1))
    harness.progress(row)
    return row


def _residuals(size: str, policy: str, batch: int, a) -> int:
    t0 = time.perf_counter()
    n = residual_bytes(_config(size, policy, a.vocab), batch, SIZES[size]["patches"], a.targets)
    harness.progress(
        {
            "model": size,
            "policy": policy,
            "batch": batch,
            "residual_gb": _gb(n),
            "trace_s": round(time.perf_counter() - t0, 1),
        }
    )
    return n


def _line(points: list[tuple[int, float]]) -> tuple[float, float]:
    (b1, m1), (b2, m2) = points
    slope = (m2 - m1) / (b2 - b1)
    return m1 - slope * b1, slope


def model_entry(size: str, a, limit: float) -> dict:
    """XLA:CPU memory of every policy at the first probe batch; the H200 estimate of each
    policy from the no-remat CPU peak and the residuals (module docstring), its largest batch,
    and for "none" a compile at that batch to check the line."""
    probes = [int(b) for b in getattr(a, f"{size}_batches").split(",")]
    policies = a.policies.split(",")
    n_enc = SIZES[size]["num_encoder_layers"]
    cpu = {p: _cpu(size, p, probes[0], a) for p in policies}
    none_peak = [(probes[0], cpu.get("none") or _cpu(size, "none", probes[0], a))]
    none_peak.append((probes[1], _cpu(size, "none", probes[1], a)))
    res = {p: [(b, _residuals(size, p, b, a)) for b in probes] for p in {"none", *policies}}
    base0, base_slope = _line([(b, r["peak_bytes"]) for b, r in none_peak])
    rn0, rn_slope = _line(res["none"])
    out = {}
    for p in policies:
        r0, r_slope = _line(res[p])
        # peak(b) = CPU peak without remat - its residuals + this policy's residuals
        #           + one encoder layer's residuals recomputed at a time in the backward pass.
        if p == "none":
            fixed, slope = base0, base_slope
        else:
            fixed = base0 - rn0 + r0 + rn0 / n_enc
            slope = base_slope - rn_slope + r_slope + rn_slope / n_enc
        max_batch = max(0, math.floor((limit - fixed) / slope))
        out[p] = {
            "xla_cpu": cpu[p],
            "residual_gb": {str(b): _gb(n) for b, n in res[p]},
            "h200_estimate": {
                "fixed_gb": _gb(fixed),
                "per_example_gb": round(slope / 1e9, 3),
                "max_batch": max_batch,
                "peak_gb_at_max_batch": _gb(fixed + slope * max_batch),
            },
        }
    if "none" in out and not a.no_check and out["none"]["h200_estimate"]["max_batch"] > 0:
        b = out["none"]["h200_estimate"]["max_batch"]
        row = _cpu(size, "none", b, a)
        out["none"]["h200_estimate"]["checked_peak_gb"] = row["peak_gb"]
    return out


def main(argv=None) -> dict:
    a = _args(argv)
    run = harness.Run("remat_memory", dict(vars(a)), libs=("jax", "jaxlib", "flax", "optax"))
    import jax

    limit = a.budget_gb * 1e9 * a.headroom
    results = {
        "device": jax.devices()[0].device_kind,
        "platform": jax.devices()[0].platform,
        "limit_gb": _gb(limit),
        "note": NOTE,
        "models": {},
    }
    for size in a.models.split(","):
        shape = {k: SIZES[size][k] for k in ("patches", "num_encoder_layers", "emb_dim")}
        results["models"][size] = {
            **shape,
            "targets": a.targets,
            "policies": model_entry(size, a, limit),
        }
    return harness.emit(run.report(results), a.out)


if __name__ == "__main__":
    main()
