"""Optimizers and learning-rate schedules (optax).

Adam as the FigureQA paper trained its baselines; Adafactor configured as the T5X/Pix2Struct
original (models reference §1.8) for the encoder-decoder models.
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
    """`constant`, `cosine` (to `end_value` at `total_steps`) or `rsqrt`, with linear warmup."""
    if kind == "constant":
        main = optax.constant_schedule(peak)
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
) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Returns (transformation, schedule); the schedule is logged in train_metrics.jsonl."""
    sched = schedule() if lr is None else (lr if callable(lr) else optax.constant_schedule(lr))
    if name == "adam":
        tx = optax.adam(sched, b1=b1, b2=b2, eps=eps)
    elif name == "adamw":
        tx = optax.adamw(sched, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay)
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
    return tx, sched
