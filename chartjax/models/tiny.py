"""Tiny configurations shared by tests (models, interop, and the train-loop tests)."""

from __future__ import annotations

from chartjax.models.model_configs import Pix2StructConfig, T5Config

# 2+2 layers, 4 heads of 8 (= emb 32), MLP 64, vocab 128.
_TINY = dict(
    vocab_size=128,
    emb_dim=32,
    num_heads=4,
    head_dim=8,
    mlp_dim=64,
    num_encoder_layers=2,
    num_decoder_layers=2,
)


def tiny_t5(dtype: str = "float32", **overrides) -> T5Config:
    """2+2 layers, 4 heads of 8 (= emb 32), MLP 64, vocab 128."""
    return T5Config(**{**_TINY, "dtype": dtype, **overrides})


def tiny_pix2struct(dtype: str = "float32", **overrides) -> Pix2StructConfig:
    """2+2 layers, 4 heads of 8 (= emb 32), MLP 64, vocab 128, 4x4x3 patches, 64 positions."""
    return Pix2StructConfig(
        **{**_TINY, "dtype": dtype, "patch_size": 4, "max_position_embeddings": 64, **overrides}
    )
