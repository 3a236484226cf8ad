"""Optimizers and learning-rate schedules (optax).

Adam as the FigureQA paper trained its baselines; Adafactor in two flavours: `adafactor`, the
T5X/Pix2Struct original (docs/models.md §1.8), whose step is multiplied by each weight's RMS,
and `adafactor_hf`, HF transformers' `Adafactor(scale_parameter=False, relative_step=False)`
(the ChartCheck authors' MatCha fine-tuning), whose step is the learning rate itself; AdamW with
HF Trainer's defaults (linear decay after a linear warmup, weight decay off biases and
LayerNorms, gradient norm clipped at 1.0) for the rows the authors trained with HF. `accumulate_steps` k sums the
gradients of k train-loop steps into one update (`optax.MultiSteps`, HF's
`gradient_accumulation_steps`): the schedule counts updates, the loop counts its steps, so a run
of N updates sets `train.num_train_steps = k * N`; the logged learning rate is the update's.
"""

from __future__ import annotations

from typing import NamedTuple

import gin
import jax
import jax.numpy as jnp
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

    name: "adam", "adamw", "adafactor" (T5X's), "adafactor_hf" (HF transformers' with an
      external rate: `hf_adafactor`; weight_decay as HF's) or "sgd".
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
    elif name == "adafactor_hf":
        # HF's own advice for this flavour is no gradient clipping beside its update clipping:
        # leave grad_clip_norm unset to match Adafactor(scale_parameter=False, relative_step=False).
        tx = hf_adafactor(sched, weight_decay=weight_decay)
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

    def mask(params):
        def keep(path, _):
            parts = [str(getattr(k, "key", getattr(k, "idx", k))).lower() for k in path]
            return not any(e in part for part in parts for e in exclude)

        return jax.tree_util.tree_map_with_path(keep, params)

    return mask


class HfAdafactorState(NamedTuple):
    count: jax.Array  # updates done so far
    exp_avg_sq_row: optax.Updates  # factored leaves (ndim >= 2): means over the last dim
    exp_avg_sq_col: optax.Updates  # ... and over the second-to-last dim
    exp_avg_sq: optax.Updates  # the others: the full second moment
    exp_avg: optax.Updates  # beta1's moving average of the update (beta1 set only)


def hf_adafactor(
    learning_rate: optax.Schedule | float,
    *,
    eps: tuple[float, float] = (1e-30, 1e-3),
    clip_threshold: float = 1.0,
    decay_rate: float = -0.8,
    beta1: float | None = None,
    weight_decay: float = 0.0,
    scale_parameter: bool = False,
) -> optax.GradientTransformation:
    """`transformers.optimization.Adafactor` with an external learning rate (relative_step=False,
    warmup_init=False), step for step: its defaults are the ones above.

    Where it differs from `optax.adafactor` (the `adafactor` flavour): every tensor of 2 or more
    dimensions is factored, over its last two dimensions (optax: the two largest, and only from
    128 on); the step is the learning rate, times max(eps[1], RMS(param)) only with
    `scale_parameter`; weight decay is `lr * weight_decay * param`. As in HF, the second-moment
    decay is `1 - t ** decay_rate` at update t (1-based), the update is divided by
    max(1, RMS(update) / clip_threshold) before the learning rate, and beta1 (None: off)
    averages the scaled update without bias correction. float32 throughout, as HF computes.
    """
    sched = learning_rate if callable(learning_rate) else optax.constant_schedule(learning_rate)
    eps1, eps2 = eps

    def zeros(shape):
        return jnp.zeros(shape, jnp.float32)

    def init(params):
        def row(p):
            return zeros(p.shape[:-1] if p.ndim >= 2 else ())

        def col(p):
            return zeros(p.shape[:-2] + p.shape[-1:] if p.ndim >= 2 else ())

        def full(p):
            return zeros(() if p.ndim >= 2 else p.shape)

        def first(p):
            return zeros(p.shape if beta1 is not None else ())

        return HfAdafactorState(
            count=jnp.zeros((), jnp.int32),
            exp_avg_sq_row=jax.tree.map(row, params),
            exp_avg_sq_col=jax.tree.map(col, params),
            exp_avg_sq=jax.tree.map(full, params),
            exp_avg=jax.tree.map(first, params),
        )

    def update(updates, state, params=None):
        if params is None and (scale_parameter or weight_decay):
            raise ValueError("adafactor_hf needs params for scale_parameter / weight_decay")
        count = state.count + 1
        lr = sched(state.count)  # the rate of this update, as HF's LambdaLR sets it
        beta2t = 1.0 - count.astype(jnp.float32) ** decay_rate

        def leaf(g, row, col, full, avg, p):
            g = g.astype(jnp.float32)
            sq = g * g + eps1
            if g.ndim >= 2:
                row = beta2t * row + (1.0 - beta2t) * sq.mean(axis=-1)
                col = beta2t * col + (1.0 - beta2t) * sq.mean(axis=-2)
                r = jax.lax.rsqrt(row / row.mean(axis=-1, keepdims=True))[..., None]
                u = g * r * jax.lax.rsqrt(col)[..., None, :]
            else:
                full = beta2t * full + (1.0 - beta2t) * sq
                u = g * jax.lax.rsqrt(full)
            u = u / jnp.maximum(jnp.sqrt(jnp.mean(u * u)) / clip_threshold, 1.0)
            step = lr
            if scale_parameter:
                step = step * jnp.maximum(eps2, jnp.sqrt(jnp.mean(p.astype(jnp.float32) ** 2)))
            u = u * step
            if beta1 is not None:
                avg = beta1 * avg + (1.0 - beta1) * u
                u = avg
            if weight_decay:
                u = u + weight_decay * step * p.astype(jnp.float32)
            return -u, row, col, full, avg

        leaves_params = params if params is not None else updates
        out = jax.tree.map(
            leaf,
            updates,
            state.exp_avg_sq_row,
            state.exp_avg_sq_col,
            state.exp_avg_sq,
            state.exp_avg,
            leaves_params,
        )
        treedef = jax.tree.structure(updates)
        parts = [
            jax.tree.unflatten(treedef, [t[i] for t in treedef.flatten_up_to(out)])
            for i in range(5)
        ]
        new_updates, row, col, full, avg = parts
        return new_updates, HfAdafactorState(count, row, col, full, avg)

    return optax.GradientTransformation(init, update)
