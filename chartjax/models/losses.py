"""T5X cross-entropy with z-loss (docs/models.md §1.3), all in float32.

`cross_entropy_with_z_loss` returns sums over tokens as T5X does (`loss_normalizing_factor=None`);
`seq2seq_loss` divides by the number of target tokens for the train loop's per-token loss.
BART is trained with the same loss and z_loss 0 (its config's), in fp32 like the others.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def cross_entropy_with_z_loss(
    logits: jax.Array, targets: jax.Array, weights: jax.Array | None, z_loss: float
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """-> (total_loss, z_loss_term, weight_sum), each summed over weighted tokens.

    Per token: `logsumexp(z) - z[target] + z_loss * logsumexp(z)**2` (no label smoothing).
    """
    logits = logits.astype(jnp.float32)
    log_z = jax.nn.logsumexp(logits, axis=-1)
    target_logit = jnp.take_along_axis(logits, targets[..., None].astype(jnp.int32), axis=-1)[
        ..., 0
    ]
    z_term = z_loss * jnp.square(log_z)
    loss = log_z - target_logit + z_term
    w = jnp.ones_like(loss) if weights is None else weights.astype(jnp.float32)
    return jnp.sum(loss * w), jnp.sum(z_term * w), jnp.sum(w)


def seq2seq_loss(model, batch, *, deterministic: bool) -> tuple[jax.Array, dict]:
    """Mean per-token loss over the target tokens that are not padding, and aux metrics.

    Padding is the model's `cfg.pad_id`: 0 for T5 / Pix2Struct, 1 for BART, whose targets start
    with `<s>` = 0 (HF's labels mask only the padding, -100, so BOS is a trained token there too).
    aux: `z_loss` (mean per token), `num_tokens`, `accuracy` (argmax == target over weighted),
    and for packed rows `examples_per_row`. The mean is over the batch's target tokens, so a
    packed batch (several examples per row, chartjax/data/packing.py) and the same examples
    unpacked give the same loss.
    """
    logits = model(batch, deterministic=deterministic)
    targets = batch["decoder_target_tokens"]
    weights = (targets != getattr(model.cfg, "pad_id", 0)).astype(jnp.float32)
    total, z_term, n = cross_entropy_with_z_loss(logits, targets, weights, model.cfg.z_loss)
    denom = jnp.maximum(n, 1.0)
    correct = (jnp.argmax(logits, axis=-1) == targets).astype(jnp.float32) * weights
    aux = {"z_loss": z_term / denom, "num_tokens": n, "accuracy": jnp.sum(correct) / denom}
    if "decoder_segment_ids" in batch:  # packed rows (data/packing.py): examples per row
        aux["examples_per_row"] = jnp.mean(jnp.max(batch["decoder_segment_ids"], axis=-1))
    return total / denom, aux
