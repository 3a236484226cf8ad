"""Optimizers and learning-rate schedules (optax).

Adam as the FigureQA paper trained its baselines; Adafactor configured as the T5X/Pix2Struct
original (models reference §1.8) for the encoder-decoder models; AdamW with HF Trainer's
defaults (linear decay after a linear warmup, weight decay off biases and LayerNorms, gradient
norm clipped at 1.0) for the rows the authors trained with HF. `accumulate_steps` k sums the
gradients of k train-loop steps into one update (`optax.MultiSteps`, HF's
`gradient_accumulation_steps`): the schedule counts updates, the loop counts its steps, so a run
of N updates sets `train.num_train_steps = k * N`; the logged learning rate is the update's.
"""

from __future__ import annotations

import gin
import optax


@gin.configurable
def schedule(
    peak: float = 1e-3,
    kind: str = "constant",
    warmup_steps: int = 0,
    total_steps: int = 0,
    end_value: float = 0.0,
) -> optax.Schedule:
    """`constant`, `cosine` or `linear` (to `end_value` at `total_steps`; `linear` is HF's
    default decay) or `rsqrt`, with linear warmup."""
    if kind == "constant":
        main = optax.constant_schedule(peak)
    elif kind == "linear":
        if total_steps <= warmup_steps:
            raise ValueError(
                f"linear schedule: total_steps={total_steps} must exceed "
                f"warmup_steps={warmup_steps}"
            )
        main = optax.linear_schedule(peak, end_value, total_steps - warmup_steps)
    elif kind == "cosine":
        if total_steps <= warmup_steps:
            raise ValueError(
                f"cosine schedule: total_steps={total_steps} must exceed "
                f"warmup_steps={warmup_steps}"
            )
        main = optax.cosine_decay_schedule(
            peak, total_steps - warmup_steps, alpha=end_value / peak if peak else 0.0
        )
    elif kind == "rsqrt":
        # T5's inverse square root, continuous with the warmup peak.
        scale = max(warmup_steps, 1) ** 0.5

        def main(step):
            return peak * scale / (step + max(warmup_steps, 1)) ** 0.5
    else:
        raise ValueError(f"unknown schedule kind {kind!r}")
    if warmup_steps <= 0:
        return main
    warm = optax.linear_schedule(0.0, peak, warmup_steps)
    return optax.join_schedules([warm, main], [warmup_steps])


@gin.configurable
def make_optimizer(
    name: str = "adam",
    lr: optax.Schedule | float | None = None,
    grad_clip_norm: float | None = None,
    weight_decay: float = 0.0,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    decay_exclude: tuple[str, ...] = (),
    accumulate_steps: int = 1,
) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Returns (transformation, schedule); the schedule is logged in train_metrics.jsonl.

    decay_exclude: AdamW does not decay parameters whose path has a part containing one of
      these strings (("bias", "norm"): HF Trainer's biases and LayerNorm weights).
    accumulate_steps: gradients of this many steps are averaged into one update (module doc).
    """
    if accumulate_steps < 1:
        raise ValueError(f"accumulate_steps must be >= 1, not {accumulate_steps}")
    sched = schedule() if lr is None else (lr if callable(lr) else optax.constant_schedule(lr))
    if name == "adam":
        tx = optax.adam(sched, b1=b1, b2=b2, eps=eps)
    elif name == "adamw":
        mask = _decay_mask(tuple(decay_exclude)) if decay_exclude else None
        tx = optax.adamw(sched, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay, mask=mask)
    elif name == "adafactor":
        # T5X adafactor.gin: factored second moments, decay_rate 0.8, update clipping 1.0,
        # epsilon 1e-30 (eps2 1e-3 as the scale floor), multiply_by_parameter_scale,
        # weight_decay_rate 1e-5 (decoupled, applied to the update as T5X does).
        tx = optax.adafactor(
            sched,
            decay_rate=0.8,
            clipping_threshold=1.0,
            eps=1e-30,
            min_dim_size_to_factor=128,
            multiply_by_parameter_scale=True,
            weight_decay_rate=weight_decay or None,
        )
    elif name == "sgd":
        tx = optax.sgd(sched)
    else:
        raise ValueError(f"unknown optimizer {name!r}")
    if grad_clip_norm:
        tx = optax.chain(optax.clip_by_global_norm(grad_clip_norm), tx)
    if accumulate_steps > 1:
        k = accumulate_steps
        # Clipping and the optimizer see the averaged gradient of k steps, as in HF.
        tx = optax.MultiSteps(tx, every_k_schedule=k).gradient_transformation()

        def logged(step, inner=sched):
            return inner(step // k)

        return tx, logged
    return tx, sched


def _decay_mask(exclude: tuple[str, ...]):
    """params -> a tree of bools: False where a part of the leaf's path contains an `exclude`
    string (lower case)."""
    import jax

    def mask(params):
        def keep(path, _):
            parts = [str(getattr(k, "key", getattr(k, "idx", k))).lower() for k in path]
            return not any(e in part for part in parts for e in exclude)

        return jax.tree_util.tree_map_with_path(keep, params)

    return mask
