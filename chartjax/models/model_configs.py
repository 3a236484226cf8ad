"""Model configuration dataclasses (T5 v1.1 / Flan-T5 and Pix2Struct / MatCha / DePlot).

Plain frozen dataclasses without a gin import, so benchmarks run where gin is absent (docs/design.md
§7); `chartjax.models.configurables` registers them with gin. Field meanings follow T5X's
`t5_1_1/*.gin` and pix2struct's `configs/{models,sizes}/*.gin` (docs/models.md §1.2, §3.6).
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from chartjax.models.remat import check_remat_policy

# How attention is computed (every family's config has `attention_impl`; layers.py holds the code):
# - "dot_product": `jax.nn.dot_product_attention` with `implementation=None` (JAX chooses; in
#   jax 0.10 that is always its XLA composite, on CPU and GPU alike);
# - "cudnn": the same call with `implementation="cudnn"`, the fused cuDNN kernel (NVIDIA GPUs,
#   bf16/fp16 activations, head_dim a multiple of 8 and <= 256 on Hopper; JAX raises otherwise);
# - "einsum": the plain two-einsum path with the additive mask bias (flaxformer's NEG_INF).
# Dropout on the attention probabilities is not in the fused call: a training call with a
# nonzero attention dropout rate runs the einsum path whatever the setting.
ATTENTION_IMPLS = ("dot_product", "cudnn", "einsum")


def check_attention_impl(owner: str, value) -> None:
    """ValueError naming `owner`.attention_impl unless it is one of ATTENTION_IMPLS."""
    if value not in ATTENTION_IMPLS:
        raise ValueError(f"{owner}.attention_impl={value!r}: expected one of {ATTENTION_IMPLS}")


@dataclasses.dataclass(frozen=True)
class T5Config:
    """T5 v1.1 encoder-decoder. `head_dim` is HF's `d_kv` (may differ from emb_dim / num_heads)."""

    vocab_size: int
    emb_dim: int
    num_heads: int
    head_dim: int
    mlp_dim: int
    num_encoder_layers: int
    num_decoder_layers: int
    dropout_rate: float = 0.0
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    mlp_activations: tuple[str, ...] = ("gelu", "linear")
    # True = original T5 1.0: logits via the shared embedding, rescaled by emb_dim**-0.5.
    logits_via_embedding: bool = False
    # The emb_dim**-0.5 rescale of the decoder output; None = iff logits_via_embedding (T5X,
    # HF 4). transformers 5 ties every T5's head and keeps the rescale apart (HF's field of this
    # name), so a T5 it trained from scratch is tied with False here.
    scale_decoder_outputs: bool | None = None
    dtype: str = "bfloat16"  # activation dtype; parameters are float32
    z_loss: float = 1e-4
    layer_norm_eps: float = 1e-6
    pad_id: int = 0
    eos_id: int = 1
    decoder_start_token_id: int = 0
    attention_impl: str = "dot_product"  # ATTENTION_IMPLS above
    # OCR boxes: a bias-free 4 -> emb_dim layer (zero at init) adds `encoder_input_boxes` to the
    # encoder's token embeddings (Chart-to-Text OCR-T5 with boxes; models/t5/__init__.py).
    box_embedding: bool = False
    # Activation checkpointing of each layer (models/remat.py REMAT_POLICIES); not an HF field.
    remat_policy: str = "none"

    def __post_init__(self):
        _check_positive(
            self,
            (
                "vocab_size",
                "emb_dim",
                "num_heads",
                "head_dim",
                "mlp_dim",
                "num_encoder_layers",
                "num_decoder_layers",
            ),
        )
        check_attention_impl(type(self).__name__, self.attention_impl)
        check_remat_policy(type(self).__name__, self.remat_policy)
        object.__setattr__(self, "mlp_activations", tuple(self.mlp_activations))
        jnp.dtype(self.dtype)  # raises TypeError on a bad name

    @property
    def activation_dtype(self):
        return jnp.dtype(self.dtype)


@dataclasses.dataclass(frozen=True)
class Pix2StructConfig:
    """Pix2Struct: patch-embedding image encoder + T5 v1.1 text decoder (untied logits)."""

    vocab_size: int
    emb_dim: int
    num_heads: int
    head_dim: int
    mlp_dim: int
    num_encoder_layers: int
    num_decoder_layers: int
    dropout_rate: float = 0.0
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    mlp_activations: tuple[str, ...] = ("gelu", "linear")
    logits_via_embedding: bool = False
    dtype: str = "bfloat16"
    z_loss: float = 1e-4
    layer_norm_eps: float = 1e-6
    pad_id: int = 0
    eos_id: int = 1
    decoder_start_token_id: int = 0
    patch_size: int = 16
    num_channels: int = 3
    # Row and column embedding tables (HF `seq_len`); ids >= this raise in preprocessing.
    max_position_embeddings: int = 4096
    attention_impl: str = "dot_product"  # ATTENTION_IMPLS above
    remat_policy: str = "none"  # models/remat.py REMAT_POLICIES; not an HF field

    def __post_init__(self):
        _check_positive(
            self,
            (
                "vocab_size",
                "emb_dim",
                "num_heads",
                "head_dim",
                "mlp_dim",
                "num_encoder_layers",
                "num_decoder_layers",
                "patch_size",
                "num_channels",
                "max_position_embeddings",
            ),
        )
        check_attention_impl(type(self).__name__, self.attention_impl)
        check_remat_policy(type(self).__name__, self.remat_policy)
        object.__setattr__(self, "mlp_activations", tuple(self.mlp_activations))
        jnp.dtype(self.dtype)

    @property
    def activation_dtype(self):
        return jnp.dtype(self.dtype)

    @property
    def patch_dim(self) -> int:
        """Pixel values per patch (16*16*3 = 768 for the released models)."""
        return self.patch_size * self.patch_size * self.num_channels


def _check_positive(cfg, fields):
    for f in fields:
        v = getattr(cfg, f)
        if not isinstance(v, int) or v <= 0:
            raise ValueError(f"{type(cfg).__name__}.{f} must be a positive int, got {v!r}")
