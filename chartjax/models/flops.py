"""Analytic training FLOPs per example (matmuls only, 2 FLOPs per multiply-add, training = 3 x
forward, no remat), per docs/design.md §9, and device peaks for MFU.

Counted per example with `enc_len` encoder tokens (patches for Pix2Struct) and `dec_len` targets:
- encoder layer: Q/K/V/O projections `4*d*inner` and MLP `n*d*d_ff` per token (n = 3 gated, 2
  plain), attention scores and values `4*S^2*inner`;
- decoder layer: the same self-attention and MLP on the targets, cross-attention Q/O on the
  targets and K/V on the encoder tokens (`2*d*inner` each), attention `4*T^2*inner` (self; the
  full masked square is computed, so it is not halved — set `causal_half=True` for MaxText's
  convention) and `4*T*S*inner` (cross);
- output projection `d*vocab` per target; Pix2Struct patch projection `patch_dim*d` per patch.
Embedding lookups, norms, softmax and activations are not counted.
"""

from __future__ import annotations

from chartjax.models.model_configs import Pix2StructConfig, T5Config
from chartjax.models.paligemma import PaliGemmaConfig

# Dense bf16 peak FLOP/s per device (vendor data sheets); CPU has none.
PEAK_FLOPS = {
    "h100": 989e12,
    "h200": 989e12,
    "a100": 312e12,
    "tpu v4": 275e12,
    "tpu v5 lite": 197e12,  # v5e
    "tpu v5e": 197e12,
    "tpu v5p": 459e12,
    "tpu v5": 459e12,
    "tpu v6 lite": 918e12,  # v6e (Trillium)
    "tpu v6e": 918e12,
}


def peak_flops(device_kind: str) -> float | None:
    """Peak bf16 FLOP/s for a `jax.Device.device_kind`, or None where unknown (e.g. CPU)."""
    kind = device_kind.lower()
    for key in sorted(PEAK_FLOPS, key=len, reverse=True):  # most specific name first
        if key in kind:
            return PEAK_FLOPS[key]
    return None


def forward_flops(
    cfg: T5Config | Pix2StructConfig, enc_len: int, dec_len: int, *, causal_half: bool = False
) -> dict[str, float]:
    """Forward matmul FLOPs per example: {"encoder", "decoder", "total"}."""
    d, inner, ff = cfg.emb_dim, cfg.num_heads * cfg.head_dim, cfg.mlp_dim
    n_mlp = len(cfg.mlp_activations) + 1
    s, t = enc_len, dec_len
    enc_layer = 2 * s * (4 * d * inner + n_mlp * d * ff) + 4 * s * s * inner
    encoder = cfg.num_encoder_layers * enc_layer
    if isinstance(cfg, Pix2StructConfig):
        encoder += 2 * s * cfg.patch_dim * d
    self_attn = 4 * t * t * inner * (0.5 if causal_half else 1.0)
    dec_layer = (
        2 * t * (4 * d * inner + 2 * d * inner + n_mlp * d * ff)
        + 2 * s * 2 * d * inner
        + self_attn
        + 4 * t * s * inner
    )
    decoder = cfg.num_decoder_layers * dec_layer + 2 * t * d * cfg.vocab_size
    return {"encoder": float(encoder), "decoder": float(decoder), "total": float(encoder + decoder)}


def train_flops_per_example(
    cfg: T5Config | Pix2StructConfig, enc_len: int, dec_len: int, *, causal_half: bool = False
) -> dict[str, float]:
    """Training (forward + backward = 3 x forward) FLOPs per example, split as forward_flops."""
    return {
        k: 3.0 * v for k, v in forward_flops(cfg, enc_len, dec_len, causal_half=causal_half).items()
    }


def mfu(
    examples_per_s: float, flops_per_example: float, num_devices: int, device_kind: str
) -> tuple[float, float | None]:
    """(TFLOP/s per device, MFU or None where the peak is unknown)."""
    per_device = examples_per_s * flops_per_example / num_devices
    peak = peak_flops(device_kind)
    return per_device / 1e12, (None if peak is None else per_device / peak)


def for_task(model_fn, lengths) -> float | None:
    """Training FLOPs per example of `model_fn`'s model at a seq2seq task's padded `lengths`
    (`tasks.task.SequenceLengths`), or None when the task has none or the model has no
    analytic count (only T5, Pix2Struct and PaliGemma have one). A PaliGemma reads the image
    tokens and `lengths.encoder + lengths.decoder` text tokens (prefix and suffix, padded)."""
    from flax import nnx

    if lengths is None:
        return None
    cfg = getattr(nnx.eval_shape(lambda: model_fn(rngs=nnx.Rngs(0))), "cfg", None)
    if isinstance(cfg, PaliGemmaConfig):
        return 3.0 * paligemma_forward_flops(cfg, lengths.encoder + lengths.decoder)["total"]
    if not isinstance(cfg, (T5Config, Pix2StructConfig)):
        return None
    return train_flops_per_example(cfg, lengths.encoder, lengths.decoder)["total"]


def paligemma_forward_flops(cfg, text_len: int) -> dict[str, float]:
    """Forward matmul FLOPs per example of a PaliGemma (models/paligemma.PaliGemmaConfig) with
    `text_len` text tokens after the image tokens: {"vision", "decoder", "total"}.

    SigLIP: patch projection `patch_dim*d_v` per patch, per layer Q/K/V/O `4*d_v^2` and MLP
    `2*d_v*f_v` per patch, attention `4*N^2*d_v`; projector `d_v*d` per image token. Gemma over
    the T = N + text_len tokens: Q/O `2*d*H*D`, K/V `2*d*K*D` (K kv heads), GeGLU `3*d*f` per
    token, attention `4*T^2*H*D` (the full square, as the other families), logits `d*vocab` at
    every position (the model computes them all)."""
    n = (cfg.image_size // cfg.patch_size) ** 2
    dv, fv = cfg.vision_emb_dim, cfg.vision_mlp_dim
    patch_dim = cfg.patch_size * cfg.patch_size * cfg.num_channels
    vision = 2 * n * patch_dim * dv + cfg.vision_num_layers * (
        2 * n * (4 * dv * dv + 2 * dv * fv) + 4 * n * n * dv
    )
    vision += 2 * n * dv * cfg.emb_dim
    t, d = n + text_len, cfg.emb_dim
    q_inner, kv_inner = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    layer = 2 * t * (2 * d * q_inner + 2 * d * kv_inner + 3 * d * cfg.mlp_dim)
    layer += 4 * t * t * q_inner
    decoder = cfg.num_layers * layer + 2 * t * d * cfg.vocab_size
    return {"vision": float(vision), "decoder": float(decoder), "total": float(vision + decoder)}
