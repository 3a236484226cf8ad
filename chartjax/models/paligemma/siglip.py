"""SigLIP vision encoder (Flax NNX) without a pooling head, numerically as HF transformers'
`SiglipVisionModel` (`modeling_siglip.py`; PaliGemma's image encoder, docs/models.md §8).

Patch embedding: the stride-`patch_size` "valid" convolution of HF, computed as Pix2Struct's
patch projection: the image `[B, H, W, C]` (NHWC, values in [-1, 1]) cut into row-major
`patch_size x patch_size` patches, each flattened in (row, column, channel) order, times one
`[p*p*C, width]` kernel plus bias (the same products and sums as the convolution; the HF
`[width, C, p, p]` weight is that kernel transposed, interop/hf_paligemma.py). A learned position
embedding per patch. Pre-LN layers (torch LayerNorm, biased attention with 1/sqrt(head_dim),
GELU-tanh MLP; post_ln/blocks.py's pieces), then `post_norm`. No pooling head: every patch token is
kept.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.models.layers import Dense, Embed, constrain
from chartjax.models.model_configs import check_attention_impl
from chartjax.models.post_ln.blocks import Attention, FeedForward, LayerNorm
from chartjax.models.remat import check_remat_policy, checkpointed

ACT = ("batch", "length", "embed")
_STD = 0.02  # init of the attention / MLP kernels (loading replaces them)


@dataclasses.dataclass(frozen=True)
class SiglipConfig:
    """HF `siglip_vision_model` fields: `emb_dim` = hidden_size, `mlp_dim` = intermediate_size."""

    emb_dim: int
    num_heads: int
    mlp_dim: int
    num_layers: int
    image_size: int = 224
    patch_size: int = 14
    num_channels: int = 3
    layer_norm_eps: float = 1e-6
    dropout_rate: float = 0.0
    dtype: str = "bfloat16"
    attention_impl: str = "dot_product"
    remat_policy: str = "none"

    def __post_init__(self):
        name = type(self).__name__
        for f in ("emb_dim", "num_heads", "mlp_dim", "num_layers", "image_size", "patch_size"):
            v = getattr(self, f)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name}.{f} must be a positive int, got {v!r}")
        if self.emb_dim % self.num_heads:
            raise ValueError(f"{name}: emb_dim {self.emb_dim} not a multiple of num_heads")
        if self.image_size % self.patch_size:
            raise ValueError(f"{name}: image_size {self.image_size} not a multiple of patch_size")
        check_attention_impl(name, self.attention_impl)
        check_remat_policy(name, self.remat_policy)
        jnp.dtype(self.dtype)

    @property
    def activation_dtype(self):
        return jnp.dtype(self.dtype)

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2

    @property
    def patch_dim(self) -> int:
        return self.patch_size * self.patch_size * self.num_channels


def patchify(images: jax.Array, patch: int) -> jax.Array:
    """`[B, H, W, C]` -> `[B, (H/p)*(W/p), p*p*C]`, patches row-major, pixels (row, col, chan)."""
    b, h, w, c = images.shape
    x = images.reshape(b, h // patch, patch, w // patch, patch, c)
    return x.transpose(0, 1, 3, 2, 4, 5).reshape(b, (h // patch) * (w // patch), patch * patch * c)


class SiglipLayer(nnx.Module):
    """Pre-LN: `x + attn(LN(x))`, then `x + mlp(LN(x))`."""

    def __init__(self, cfg: SiglipConfig, *, rngs: nnx.Rngs):
        dt, e = cfg.activation_dtype, cfg.emb_dim
        kw = {"std": _STD, "dtype": dt, "rngs": rngs}
        self.pre_attention_norm = LayerNorm(e, eps=cfg.layer_norm_eps, dtype=dt, rngs=rngs)
        self.attention = Attention(
            e, cfg.num_heads, dropout_rate=0.0, attention_impl=cfg.attention_impl, **kw
        )
        self.pre_mlp_norm = LayerNorm(e, eps=cfg.layer_norm_eps, dtype=dt, rngs=rngs)
        self.mlp = FeedForward(e, cfg.mlp_dim, "gelu_pytorch_tanh", inner_dropout_rate=0.0, **kw)
        self.dropout = nnx.Dropout(cfg.dropout_rate, rngs=rngs)

    def __call__(self, x: jax.Array, *, deterministic: bool) -> jax.Array:
        h = self.pre_attention_norm(x)
        h = self.attention(h, h, None, deterministic=deterministic)
        x = x + self.dropout(h, deterministic=deterministic)
        h = self.mlp(self.pre_mlp_norm(x), deterministic=deterministic)
        return x + self.dropout(h, deterministic=deterministic)


class SiglipEncoder(nnx.Module):
    """`patch_embedding`, `position_embedding`, `layers`, `post_norm` -> `[B, patches, width]`."""

    def __init__(self, cfg: SiglipConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        dt = cfg.activation_dtype
        self.patch_embedding = Dense(
            cfg.patch_dim, cfg.emb_dim, ("patch", "embed"), use_bias=True, dtype=dt, rngs=rngs
        )
        # normal(1 / sqrt(width)), as big_vision's ViT and HF's SigLIP initialize it: Embed's
        # default, normal(1.0), drowned a from-scratch model's patch contents in position noise.
        self.position_embedding = Embed(
            cfg.num_patches,
            cfg.emb_dim,
            ("abspos_buckets", "embed"),
            stddev=cfg.emb_dim**-0.5,
            dtype=dt,
            rngs=rngs,
        )
        self.layers = nnx.List([SiglipLayer(cfg, rngs=rngs) for _ in range(cfg.num_layers)])
        self.post_norm = LayerNorm(cfg.emb_dim, eps=cfg.layer_norm_eps, dtype=dt, rngs=rngs)

    def __call__(self, images: jax.Array, *, deterministic: bool = True) -> jax.Array:
        cfg = self.cfg
        want = (cfg.image_size, cfg.image_size, cfg.num_channels)
        if tuple(images.shape[1:]) != want:
            raise ValueError(f"SigLIP: images of shape [B, *{want}] expected, got {images.shape}")
        x = self.patch_embedding(patchify(images.astype(jnp.float32), cfg.patch_size))
        x = constrain(x + self.position_embedding.embedding[...].astype(x.dtype)[None], ACT)
        step = checkpointed(
            lambda layer, x: layer(x, deterministic=deterministic), cfg.remat_policy
        )
        for layer in self.layers:
            x = constrain(step(layer, x), ACT)
        return self.post_norm(x)
