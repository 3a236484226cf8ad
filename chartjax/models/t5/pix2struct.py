"""Pix2Struct (also MatCha and DePlot): patch-embedding image encoder + T5 v1.1 text decoder.

As pix2struct's `models.py` (docs/models.md §1.3): `encoder_input_tokens` is float32
`[B, P, 2 + ph*pw*C]` with 1-based row id, col id first (0 = padding); the encoder embedding is
`patch_projection(pixels) + row_embed[row] + col_embed[col]` with no other position information;
the padding mask is `row id > 0` for encoder self-attention and decoder cross-attention keys.
Packed batches (several charts per row, chartjax/data/packing.py) add `encoder_segment_ids` and
`decoder_segment_ids` (models/segments.py); each patch keeps its own chart's row/col ids.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.models.layers import Dense, Embed
from chartjax.models.model_configs import Pix2StructConfig
from chartjax.models.t5 import Cache, Decoder, EncoderStack


class PatchEmbed(nnx.Module):
    """`embedders_0` (row) and `embedders_1` (col) tables + `patch_projection` (with bias)."""

    def __init__(self, cfg: Pix2StructConfig, *, rngs: nnx.Rngs):
        dt = cfg.activation_dtype
        n = cfg.max_position_embeddings
        self.patch_projection = Dense(
            cfg.patch_dim, cfg.emb_dim, ("patch", "embed"), use_bias=True, dtype=dt, rngs=rngs
        )
        self.embedders_0 = Embed(n, cfg.emb_dim, ("abspos_buckets", "embed"), dtype=dt, rngs=rngs)
        self.embedders_1 = Embed(n, cfg.emb_dim, ("abspos_buckets", "embed"), dtype=dt, rngs=rngs)

    def __call__(self, patches: jax.Array) -> jax.Array:
        row = patches[..., 0].astype(jnp.int32)
        col = patches[..., 1].astype(jnp.int32)
        return (
            self.patch_projection(patches[..., 2:]) + self.embedders_0(row) + self.embedders_1(col)
        )


class Pix2Struct(nnx.Module):
    """Names as the T5X tree: `encoder.{token_embedder, layers, encoder_norm}`, `decoder.*`."""

    def __init__(self, cfg: Pix2StructConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.token_embedder = PatchEmbed(cfg, rngs=rngs)
        self.encoder = EncoderStack(cfg, relative_bias=False, rngs=rngs)
        self.decoder = Decoder(cfg, own_embedder=True, rngs=rngs)

    def encoder_mask(self, batch) -> jax.Array:
        return batch["encoder_input_tokens"][..., 0] > 0

    def encode(self, batch, deterministic: bool = True) -> jax.Array:
        patches = batch["encoder_input_tokens"]
        if patches.shape[-1] != 2 + self.cfg.patch_dim:
            raise ValueError(
                f"encoder_input_tokens: last dim {patches.shape[-1]} != 2 + {self.cfg.patch_dim}"
            )
        return self.encoder(
            self.token_embedder(patches),
            self.encoder_mask(batch),
            deterministic=deterministic,
            segment_ids=batch.get("encoder_segment_ids"),
        )

    def __call__(self, batch, *, deterministic: bool) -> jax.Array:
        encoded = self.encode(batch, deterministic=deterministic)
        targets = batch.get("decoder_target_tokens")
        return self.decoder(
            batch["decoder_input_tokens"],
            encoded,
            self.encoder_mask(batch),
            None if targets is None else targets > 0,
            deterministic=deterministic,
            segment_ids=batch.get("decoder_segment_ids"),
            encoder_segment_ids=batch.get("encoder_segment_ids"),
        )

    def init_cache(self, encoded, encoder_mask, max_len: int) -> Cache:
        return self.decoder.init_cache(encoded, encoder_mask, max_len)

    def decode_step(self, tokens, cache: Cache, index) -> tuple[jax.Array, Cache]:
        return self.decoder.decode_step(tokens, cache, index)


def build(config: Pix2StructConfig, rngs: nnx.Rngs | int = 0) -> Pix2Struct:
    """Factory used by the train loop: a freshly initialised Pix2Struct model."""
    if isinstance(rngs, int):
        rngs = nnx.Rngs(params=rngs, dropout=rngs + 1)
    return Pix2Struct(config, rngs=rngs)
