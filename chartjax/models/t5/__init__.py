"""T5 v1.1 / Flan-T5 encoder-decoder (Flax NNX), and the text decoder Pix2Struct reuses.

Structure and names follow flaxformer's T5 (T5X checkpoint names, docs/models.md §1.6 / §3.6):
pre-LN layers, one relative-position table per stack (bidirectional in the encoder, causal in the
decoder), a shared `token_embedder`, untied `logits_dense` unless `logits_via_embedding`.

With `T5Config.box_embedding` the encoder also reads `encoder_input_boxes [B, S, 4]` (one OCR box
per input token, [0, 1] coordinates, zeros where a token has none;
chartjax/tasks/chart_to_text/ocr_boxes.py) through a bias-free linear layer `box_embedding` whose
output is added to the token embeddings, as the Chart-to-Text paper's OCR-T5 with boxes ("feed the
bounding box coordinates ... into a linear layer to produce positional embeddings, added to the
corresponding embeddings of the OCR tokens", after Tan & Bansal 2019). Its kernel starts at zero, so
a pretrained T5 computes exactly what it did before fine-tuning; the kernel still learns from the
first step (its gradient is the boxes times the embeddings' gradient). No bias: the zero box of a
token without one (prefix, title, separators, padding) then adds nothing at any weights. Whether the
paper's layer had a bias, and its initialization, are [unverified] (its Appendix A.3 is not in the
seed).

Decoding uses explicit caches (a pytree of arrays) so the loops in `decoding.py` are pure
`lax.while_loop`s: `init_cache` projects the encoder keys/values once per layer and allocates the
self-attention caches; `decode_step` runs one token.

Packed training batches (several examples per row, chartjax/data/packing.py) add
`encoder_segment_ids` / `decoder_segment_ids`; attention stays inside each example and the
relative-position bias needs no positions (models/segments.py says why).

The T5 room (models/t5/): T5 here; pix2struct.py, Pix2Struct (MatCha, DePlot), an image
encoder before this decoder. Their configs are models/model_configs.py's, their blocks
models/layers.py's.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.models.layers import (
    Attention,
    Dense,
    Embed,
    MlpBlock,
    RelativePositionBias,
    RMSNorm,
    attention_inputs,
    constrain,
)
from chartjax.models.model_configs import Pix2StructConfig, T5Config
from chartjax.models.remat import checkpointed
from chartjax.models.segments import and_masks, same_segment

Cache = dict[str, Any]
ACT = ("batch", "length", "embed")  # logical axes of the hidden states


def _layer_kwargs(cfg) -> dict:
    return {"dropout_rate": cfg.dropout_rate, "dtype": cfg.activation_dtype}


def _attention_kwargs(cfg) -> dict:
    return {**_layer_kwargs(cfg), "attention_impl": cfg.attention_impl}


class EncoderLayer(nnx.Module):
    """Pre-LN self-attention + gated MLP (used by the T5 and Pix2Struct encoders)."""

    def __init__(self, cfg: T5Config | Pix2StructConfig, *, rngs: nnx.Rngs):
        dt = cfg.activation_dtype
        self.pre_attention_layer_norm = RMSNorm(
            cfg.emb_dim, eps=cfg.layer_norm_eps, dtype=dt, rngs=rngs
        )
        self.attention = Attention(
            cfg.emb_dim, cfg.num_heads, cfg.head_dim, rngs=rngs, **_attention_kwargs(cfg)
        )
        self.pre_mlp_layer_norm = RMSNorm(cfg.emb_dim, eps=cfg.layer_norm_eps, dtype=dt, rngs=rngs)
        self.mlp = MlpBlock(
            cfg.emb_dim, cfg.mlp_dim, cfg.mlp_activations, rngs=rngs, **_layer_kwargs(cfg)
        )
        self.dropout = nnx.Dropout(cfg.dropout_rate, rngs=rngs)

    def __call__(
        self, x: jax.Array, bias: jax.Array | None, *, mask=None, deterministic: bool
    ) -> jax.Array:
        h = self.pre_attention_layer_norm(x)
        h = self.attention(h, h, bias, mask=mask, deterministic=deterministic)
        x = x + self.dropout(h, deterministic=deterministic)
        h = self.mlp(self.pre_mlp_layer_norm(x), deterministic=deterministic)
        return x + self.dropout(h, deterministic=deterministic)


class EncoderStack(nnx.Module):
    """Layers + final `encoder_norm`; `relpos_bias` only where the family has one (T5)."""

    def __init__(self, cfg, *, relative_bias: bool, rngs: nnx.Rngs):
        self.relpos_bias = (
            RelativePositionBias(
                cfg.num_heads,
                num_buckets=cfg.relative_attention_num_buckets,
                max_distance=cfg.relative_attention_max_distance,
                bidirectional=True,
                rngs=rngs,
            )
            if relative_bias
            else None
        )
        self.layers = nnx.List(
            [EncoderLayer(cfg, rngs=rngs) for _ in range(cfg.num_encoder_layers)]
        )
        self.encoder_norm = RMSNorm(
            cfg.emb_dim, eps=cfg.layer_norm_eps, dtype=cfg.activation_dtype, rngs=rngs
        )
        self.dropout = nnx.Dropout(cfg.dropout_rate, rngs=rngs)
        self.attention_impl = cfg.attention_impl
        self.remat_policy = cfg.remat_policy

    def __call__(
        self, x: jax.Array, mask: jax.Array, *, deterministic: bool, segment_ids=None
    ) -> jax.Array:
        """`x [B, S, E]` embedded inputs, `mask [B, S]` bool (queries and keys are masked, so a
        padding query's row is fully masked: uniform, as flaxformer); `segment_ids [B, S]` of a
        packed batch keep attention inside each example (models/segments.py)."""
        s = x.shape[1]
        att_mask = and_masks(
            mask[:, None, :, None] & mask[:, None, None, :], same_segment(segment_ids, segment_ids)
        )
        pos = None if self.relpos_bias is None else self.relpos_bias(s, s)
        bias, att_mask, _ = attention_inputs(self.attention_impl, pos, att_mask)
        x = constrain(self.dropout(x, deterministic=deterministic), ACT)
        step = checkpointed(
            lambda layer, x, bias, m: layer(x, bias, mask=m, deterministic=deterministic),
            self.remat_policy,
        )
        for layer in self.layers:
            x = constrain(step(layer, x, bias, att_mask), ACT)
        return self.dropout(self.encoder_norm(x), deterministic=deterministic)


class DecoderLayer(nnx.Module):
    def __init__(self, cfg, *, rngs: nnx.Rngs):
        dt, eps, e = cfg.activation_dtype, cfg.layer_norm_eps, cfg.emb_dim
        kw, akw = _layer_kwargs(cfg), _attention_kwargs(cfg)
        self.pre_self_attention_layer_norm = RMSNorm(e, eps=eps, dtype=dt, rngs=rngs)
        self.self_attention = Attention(e, cfg.num_heads, cfg.head_dim, rngs=rngs, **akw)
        self.pre_cross_attention_layer_norm = RMSNorm(e, eps=eps, dtype=dt, rngs=rngs)
        self.encoder_decoder_attention = Attention(e, cfg.num_heads, cfg.head_dim, rngs=rngs, **akw)
        self.pre_mlp_layer_norm = RMSNorm(e, eps=eps, dtype=dt, rngs=rngs)
        self.mlp = MlpBlock(e, cfg.mlp_dim, cfg.mlp_activations, rngs=rngs, **kw)
        self.dropout = nnx.Dropout(cfg.dropout_rate, rngs=rngs)

    def __call__(
        self,
        x,
        self_kv,
        self_bias,
        cross_kv,
        cross_bias,
        *,
        deterministic: bool,
        self_mask=None,
        self_causal: bool = False,
        cross_mask=None,
    ):
        """`self_kv`/`cross_kv`: projected (k, v), or None to project from `x` / must be given.
        Biases float32, masks bool (`attention_core`); `self_causal` and-s the causal mask in."""
        h = self.pre_self_attention_layer_norm(x)
        k, v = self_kv if self_kv is not None else self.self_attention.project_kv(h)
        h = self.self_attention.attend(
            h, k, v, self_bias, mask=self_mask, is_causal=self_causal, deterministic=deterministic
        )
        x = x + self.dropout(h, deterministic=deterministic)
        h = self.pre_cross_attention_layer_norm(x)
        h = self.encoder_decoder_attention.attend(
            h, *cross_kv, cross_bias, mask=cross_mask, deterministic=deterministic
        )
        x = x + self.dropout(h, deterministic=deterministic)
        h = self.mlp(self.pre_mlp_layer_norm(x), deterministic=deterministic)
        return x + self.dropout(h, deterministic=deterministic)


class Decoder(nnx.Module):
    """T5 v1.1 decoder stack. With `own_embedder` (Pix2Struct) it holds `token_embedder`;
    otherwise (T5) the caller passes the shared embedder to each call."""

    def __init__(self, cfg, *, own_embedder: bool, rngs: nnx.Rngs):
        self.cfg = cfg
        dt = cfg.activation_dtype
        self.token_embedder = (
            Embed(cfg.vocab_size, cfg.emb_dim, dtype=dt, rngs=rngs) if own_embedder else None
        )
        self.relpos_bias = RelativePositionBias(
            cfg.num_heads,
            num_buckets=cfg.relative_attention_num_buckets,
            max_distance=cfg.relative_attention_max_distance,
            bidirectional=False,
            rngs=rngs,
        )
        self.layers = nnx.List(
            [DecoderLayer(cfg, rngs=rngs) for _ in range(cfg.num_decoder_layers)]
        )
        self.decoder_norm = RMSNorm(cfg.emb_dim, eps=cfg.layer_norm_eps, dtype=dt, rngs=rngs)
        self.logits_dense = (
            None
            if cfg.logits_via_embedding
            else Dense(
                cfg.emb_dim, cfg.vocab_size, ("embed", "vocab"), dtype=jnp.float32, rngs=rngs
            )
        )
        self.dropout = nnx.Dropout(cfg.dropout_rate, rngs=rngs)
        # Pix2StructConfig has no scale_decoder_outputs: its HF and T5X heads follow the tie.
        scale = getattr(cfg, "scale_decoder_outputs", None)
        self.scale_outputs = cfg.logits_via_embedding if scale is None else scale

    def _embedder(self, embedder: Embed | None) -> Embed:
        emb = self.token_embedder if self.token_embedder is not None else embedder
        if emb is None:
            raise ValueError("Decoder without its own token_embedder needs `embedder=`")
        return emb

    def _logits(self, x: jax.Array, emb: Embed, deterministic: bool) -> jax.Array:
        x = self.dropout(self.decoder_norm(x), deterministic=deterministic)
        logits = (
            emb.attend(x) if self.logits_dense is None else self.logits_dense(x.astype(jnp.float32))
        )
        return logits / jnp.sqrt(jnp.float32(x.shape[-1])) if self.scale_outputs else logits

    def __call__(
        self,
        tokens: jax.Array,
        encoded: jax.Array,
        encoder_mask: jax.Array,
        target_mask: jax.Array | None,
        *,
        deterministic: bool,
        embedder: Embed | None = None,
        segment_ids: jax.Array | None = None,
        encoder_segment_ids: jax.Array | None = None,
    ) -> jax.Array:
        """Teacher-forced logits `[B, T, vocab]` float32. `segment_ids [B, T]` and
        `encoder_segment_ids [B, S]` (packed batches) keep attention inside each example."""
        emb = self._embedder(embedder)
        t = tokens.shape[1]
        impl = self.cfg.attention_impl
        q_valid = jnp.ones(tokens.shape, bool) if target_mask is None else target_mask
        # Causal & padding (queries and keys: a padding target's row is fully masked, uniform).
        self_bias, self_mask, causal = attention_inputs(
            impl,
            self.relpos_bias(t, t),
            and_masks(
                q_valid[:, None, :, None] & q_valid[:, None, None, :],
                same_segment(segment_ids, segment_ids),
            ),
            is_causal=True,
            q_len=t,
            k_len=t,
        )
        cross_bias, cross_mask, _ = attention_inputs(
            impl,
            None,
            and_masks(
                q_valid[:, None, :, None] & encoder_mask[:, None, None, :],
                same_segment(segment_ids, encoder_segment_ids),
            ),
        )
        x = constrain(self.dropout(emb(tokens), deterministic=deterministic), ACT)

        def teacher_forced(layer, x, encoded, self_bias, self_mask, cross_bias, cross_mask):
            # The cross K/V projection sits inside the checkpoint, so remat keeps `encoded`
            # once instead of two [B, S_enc, H, D] arrays per layer.
            cross_kv = layer.encoder_decoder_attention.project_kv(encoded)
            return layer(
                x,
                None,
                self_bias,
                cross_kv,
                cross_bias,
                deterministic=deterministic,
                self_mask=self_mask,
                self_causal=causal,
                cross_mask=cross_mask,
            )

        step = checkpointed(teacher_forced, self.cfg.remat_policy)
        for layer in self.layers:
            x = step(layer, x, encoded, self_bias, self_mask, cross_bias, cross_mask)
            x = constrain(x, ACT)
        return constrain(self._logits(x, emb, deterministic), ("batch", "length", "vocab"))

    def init_cache(self, encoded: jax.Array, encoder_mask: jax.Array, max_len: int) -> Cache:
        """Cross-attention K/V of every layer and empty self-attention caches of `max_len`."""
        b = encoded.shape[0]
        dt = self.cfg.activation_dtype
        shape = (b, max_len, self.cfg.num_heads, self.cfg.head_dim)
        return {
            "cross": [layer.encoder_decoder_attention.project_kv(encoded) for layer in self.layers],
            "self": [(jnp.zeros(shape, dt), jnp.zeros(shape, dt)) for _ in self.layers],
            "encoder_mask": encoder_mask,
        }

    def decode_step(
        self, tokens: jax.Array, cache: Cache, index: jax.Array, *, embedder: Embed | None = None
    ) -> tuple[jax.Array, Cache]:
        """One step: `tokens [B]` at position `index` -> (logits `[B, vocab]` fp32, new cache)."""
        emb = self._embedder(embedder)
        max_len = cache["self"][0][0].shape[1]
        impl = self.cfg.attention_impl
        key_valid = jnp.arange(max_len) <= index  # the cache up to and including this token
        self_bias, self_mask, _ = attention_inputs(
            impl, self.relpos_bias.row(index, max_len), key_valid[None, None, None, :]
        )
        cross_bias, cross_mask, _ = attention_inputs(
            impl, None, cache["encoder_mask"][:, None, None, :]
        )
        x = emb(tokens[:, None])
        new_self = []
        for layer, (kc, vc), cross_kv in zip(self.layers, cache["self"], cache["cross"]):
            h = layer.pre_self_attention_layer_norm(x)
            k, v = layer.self_attention.project_kv(h)
            kc = jax.lax.dynamic_update_slice_in_dim(kc, k.astype(kc.dtype), index, axis=1)
            vc = jax.lax.dynamic_update_slice_in_dim(vc, v.astype(vc.dtype), index, axis=1)
            new_self.append((kc, vc))
            x = layer(
                x,
                (kc, vc),
                self_bias,
                cross_kv,
                cross_bias,
                deterministic=True,
                self_mask=self_mask,
                cross_mask=cross_mask,
            )
        logits = self._logits(x, emb, True)[:, 0]
        return logits, {**cache, "self": new_self}


class T5Transformer(nnx.Module):
    """T5 v1.1 / Flan-T5: `token_embedder` (shared), `encoder`, `decoder`."""

    def __init__(self, cfg: T5Config, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.token_embedder = Embed(
            cfg.vocab_size, cfg.emb_dim, dtype=cfg.activation_dtype, rngs=rngs
        )
        self.encoder = EncoderStack(cfg, relative_bias=True, rngs=rngs)
        self.decoder = Decoder(cfg, own_embedder=False, rngs=rngs)
        self.box_embedding = (
            Dense(
                4,
                cfg.emb_dim,
                (None, "embed"),
                kernel_init=jax.nn.initializers.zeros,
                rngs=rngs,
            )
            if cfg.box_embedding
            else None
        )

    def encoder_mask(self, batch) -> jax.Array:
        return batch["encoder_input_tokens"] > 0

    def embed_inputs(self, batch) -> jax.Array:
        """Token embeddings of the encoder input (+ the box embeddings when boxes are given)."""
        x = self.token_embedder(batch["encoder_input_tokens"])
        boxes = batch.get("encoder_input_boxes")
        if boxes is None:
            return x
        if self.box_embedding is None:
            raise ValueError(
                "the batch has encoder_input_boxes but T5Config.box_embedding is False: set "
                "T5Config.box_embedding = True to use the OCR boxes"
            )
        return x + self.box_embedding(boxes.astype(jnp.float32)).astype(x.dtype)

    def encode(self, batch, deterministic: bool = True) -> jax.Array:
        return self.encoder(
            self.embed_inputs(batch),
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
            embedder=self.token_embedder,
            segment_ids=batch.get("decoder_segment_ids"),
            encoder_segment_ids=batch.get("encoder_segment_ids"),
        )

    def init_cache(self, encoded, encoder_mask, max_len: int) -> Cache:
        return self.decoder.init_cache(encoded, encoder_mask, max_len)

    def decode_step(self, tokens, cache: Cache, index) -> tuple[jax.Array, Cache]:
        return self.decoder.decode_step(tokens, cache, index, embedder=self.token_embedder)


def build(config: T5Config, rngs: nnx.Rngs | int = 0) -> T5Transformer:
    """Factory used by the train loop: a freshly initialised T5 model."""
    if isinstance(rngs, int):
        rngs = nnx.Rngs(params=rngs, dropout=rngs + 1)
    return T5Transformer(config, rngs=rngs)
