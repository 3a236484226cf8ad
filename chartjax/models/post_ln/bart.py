"""BART encoder-decoder (Flax NNX), as HF `BartForConditionalGeneration` (transformers 5.24).

One shared token table (`token_embedder`, scaled by sqrt(d_model) when `scale_embedding`) feeds
both stacks and, tied, the output projection, plus a `final_logits_bias` buffer. Each stack adds
learned positions (table of `max_position_embeddings + 2` rows, looked up at position + 2),
applies `layernorm_embedding`, then post-LN layers: `LN(x + self_attn(x))`,
(`LN(x + cross_attn(x, encoded))` in the decoder), `LN(x + fc2(act(fc1(x))))`. Attention scales
queries by head_dim**-0.5; every projection has a bias.

Batch and decoding as T5 (`models/t5`, `models/decoding.py`): `encoder_input_tokens [B, S]` (the
padding mask is `!= pad_id`, and BART's pad id is 1), `decoder_input_tokens [B, T]`; `init_cache` /
`decode_step` keep explicit K/V caches so `decoding.greedy_decode`/`beam_search`/`sample_decode`
drive BART unchanged (start token `decoder_start_token_id`, 2 for BART; stop at `eos_id`).
`forced_bos_token_id` / `forced_eos_token_id` are applied inside `decode_step` exactly as HF's
ForcedBOS/ForcedEOS logits processors: the first generated token is forced to BOS, the token at the
last cache position (max_decode_len - 1) to EOS. The teacher-forced call never forces.

Packed training batches (chartjax/data/packing.py) add `encoder_segment_ids` /
`decoder_segment_ids` (attention stays inside each example, models/segments.py) and
`encoder_positions` / `decoder_positions` (the learned positions restart in each example).

Numerics: fp32 parameters; matmuls in `dtype` (bf16 allowed); LayerNorm, softmax and logits
in fp32.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.models.layers import attention_inputs, constrain
from chartjax.models.model_configs import check_attention_impl
from chartjax.models.post_ln.blocks import (
    SUPPORTED_ACTIVATIONS,
    Attention,
    Embedding,
    EncoderLayer,
    FeedForward,
    LayerNorm,
    check_activation,
    key_padding_inputs,
    refuse,
)
from chartjax.models.remat import check_remat_policy, checkpointed
from chartjax.models.segments import same_segment

Cache = dict[str, Any]
ACT = ("batch", "length", "embed")
POSITION_OFFSET = 2  # HF BartLearnedPositionalEmbedding (fairseq's padding offset)


class Buffer(nnx.Variable):
    """A weight that is loaded and saved but not trained (HF registers it as a buffer)."""


# --------------------------------------------------------------------------- config


@dataclasses.dataclass(frozen=True)
class BartConfig:
    """BART. Field names follow HF's BartConfig; token ids as T5Config (`pad_id`, `eos_id`)."""

    vocab_size: int
    d_model: int
    encoder_layers: int
    decoder_layers: int
    encoder_attention_heads: int
    decoder_attention_heads: int
    encoder_ffn_dim: int
    decoder_ffn_dim: int
    max_position_embeddings: int = 1024
    activation_function: str = "gelu"
    scale_embedding: bool = False
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    init_std: float = 0.02
    layer_norm_eps: float = 1e-5  # torch nn.LayerNorm default; not an HF config field
    pad_id: int = 1
    bos_id: int = 0
    eos_id: int = 2
    decoder_start_token_id: int = 2
    forced_bos_token_id: int | None = None
    forced_eos_token_id: int | None = None
    z_loss: float = 0.0  # BART trains without z-loss (chartjax.models.losses reads cfg.z_loss)
    dtype: str = "bfloat16"  # activation dtype; parameters are float32
    attention_impl: str = "dot_product"  # model_configs.ATTENTION_IMPLS
    remat_policy: str = "none"  # models/remat.py REMAT_POLICIES; not an HF field

    def __post_init__(self):
        check_attention_impl("BartConfig", self.attention_impl)
        check_remat_policy("BartConfig", self.remat_policy)
        for f in (
            "vocab_size",
            "d_model",
            "encoder_layers",
            "decoder_layers",
            "encoder_attention_heads",
            "decoder_attention_heads",
            "encoder_ffn_dim",
            "decoder_ffn_dim",
            "max_position_embeddings",
        ):
            v = getattr(self, f)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"BartConfig.{f} must be a positive int, got {v!r}")
        for f in ("encoder_attention_heads", "decoder_attention_heads"):
            if self.d_model % getattr(self, f):
                raise ValueError(f"BartConfig: d_model {self.d_model} is not a multiple of {f}")
        check_activation("activation_function", self.activation_function)
        jnp.dtype(self.dtype)

    @property
    def activation_dtype(self):
        return jnp.dtype(self.dtype)

    @property
    def embed_scale(self) -> float:
        return math.sqrt(self.d_model) if self.scale_embedding else 1.0

    @classmethod
    def from_hf_config(
        cls, hf: dict, *, dtype: str = "float32", where: str = "config.json"
    ) -> BartConfig:
        """From an HF BART `config.json` dict (defaults as HF's BartConfig); a field value
        chartjax does not implement raises ValueError naming the field. Generation settings other
        than the forced BOS/EOS ids (beams, lengths, no_repeat_ngram_size) are not model fields."""
        mt = hf.get("model_type", "bart")
        if mt != "bart":
            refuse(where, "model_type", mt, "expected 'bart'")
        # Legacy (fairseq-era) fields that later BART code dropped: only their BART values work.
        legacy = {
            "normalize_before": False,  # pre-LN blocks are not implemented
            "add_final_layer_norm": False,
            "add_bias_logits": False,
            "static_position_embeddings": False,
            "normalize_embedding": True,
            "extra_pos_embeddings": POSITION_OFFSET,
            "is_encoder_decoder": True,
            "tie_word_embeddings": True,  # HF 5 unties encoder/decoder tables too: not supported
        }
        for field, ok in legacy.items():
            if field in hf and hf[field] != ok:
                refuse(where, field, hf[field], f"only {ok!r} is implemented")
        for field in ("encoder_layerdrop", "decoder_layerdrop"):
            if hf.get(field, 0.0):
                refuse(where, field, hf[field], "LayerDrop is not implemented")
        act = hf.get("activation_function", "gelu")
        if act not in SUPPORTED_ACTIVATIONS:
            refuse(where, "activation_function", act, f"have {SUPPORTED_ACTIVATIONS}")
        for field in ("eos_token_id", "forced_eos_token_id", "forced_bos_token_id"):
            if isinstance(hf.get(field), list):
                refuse(where, field, hf[field], "one token id")
        try:
            return cls(
                vocab_size=hf["vocab_size"],
                d_model=hf.get("d_model", 1024),
                encoder_layers=hf.get("encoder_layers", 12),
                decoder_layers=hf.get("decoder_layers", 12),
                encoder_attention_heads=hf.get("encoder_attention_heads", 16),
                decoder_attention_heads=hf.get("decoder_attention_heads", 16),
                encoder_ffn_dim=hf.get("encoder_ffn_dim", 4096),
                decoder_ffn_dim=hf.get("decoder_ffn_dim", 4096),
                max_position_embeddings=hf.get("max_position_embeddings", 1024),
                activation_function=act,
                scale_embedding=bool(hf.get("scale_embedding", False)),
                dropout=hf.get("dropout", 0.1),
                attention_dropout=hf.get("attention_dropout", 0.0),
                activation_dropout=hf.get("activation_dropout", 0.0),
                init_std=hf.get("init_std", 0.02),
                pad_id=hf.get("pad_token_id", 1),
                bos_id=hf.get("bos_token_id", 0),
                eos_id=hf.get("eos_token_id", 2),
                decoder_start_token_id=hf.get("decoder_start_token_id", 2),
                forced_bos_token_id=hf.get("forced_bos_token_id"),
                forced_eos_token_id=hf.get("forced_eos_token_id", 2),
                dtype=dtype,
            )
        except KeyError as e:
            raise ValueError(f"{where}: missing field {e}") from None

    def to_hf_config(self) -> dict:
        return {
            "model_type": "bart",
            "architectures": ["BartForConditionalGeneration"],
            "vocab_size": self.vocab_size,
            "d_model": self.d_model,
            "encoder_layers": self.encoder_layers,
            "decoder_layers": self.decoder_layers,
            "encoder_attention_heads": self.encoder_attention_heads,
            "decoder_attention_heads": self.decoder_attention_heads,
            "encoder_ffn_dim": self.encoder_ffn_dim,
            "decoder_ffn_dim": self.decoder_ffn_dim,
            "max_position_embeddings": self.max_position_embeddings,
            "activation_function": self.activation_function,
            "scale_embedding": self.scale_embedding,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "activation_dropout": self.activation_dropout,
            "init_std": self.init_std,
            "pad_token_id": self.pad_id,
            "bos_token_id": self.bos_id,
            "eos_token_id": self.eos_id,
            "decoder_start_token_id": self.decoder_start_token_id,
            "forced_bos_token_id": self.forced_bos_token_id,
            "forced_eos_token_id": self.forced_eos_token_id,
            "tie_word_embeddings": True,
            "is_encoder_decoder": True,
        }


# --------------------------------------------------------------------------- model


def _common(cfg: BartConfig) -> dict:
    return {"std": cfg.init_std, "dtype": cfg.activation_dtype}


def _attention_common(cfg: BartConfig) -> dict:
    return {**_common(cfg), "attention_impl": cfg.attention_impl}


class BartDecoderLayer(nnx.Module):
    def __init__(self, cfg: BartConfig, *, rngs: nnx.Rngs):
        e, h, eps, kw = cfg.d_model, cfg.decoder_attention_heads, cfg.layer_norm_eps, _common(cfg)
        dt, akw = cfg.activation_dtype, _attention_common(cfg)
        self.self_attention = Attention(e, h, dropout_rate=cfg.attention_dropout, rngs=rngs, **akw)
        self.self_attention_norm = LayerNorm(e, eps=eps, dtype=dt, rngs=rngs)
        self.cross_attention = Attention(e, h, dropout_rate=cfg.attention_dropout, rngs=rngs, **akw)
        self.cross_attention_norm = LayerNorm(e, eps=eps, dtype=dt, rngs=rngs)
        self.mlp = FeedForward(
            e,
            cfg.decoder_ffn_dim,
            cfg.activation_function,
            inner_dropout_rate=cfg.activation_dropout,
            rngs=rngs,
            **kw,
        )
        self.mlp_norm = LayerNorm(e, eps=eps, dtype=dt, rngs=rngs)
        self.dropout = nnx.Dropout(cfg.dropout, rngs=rngs)

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
        """`self_kv`: projected (k, v) of the cache, or None to project from `x`. Biases fp32,
        masks bool (`layers.attention_core`); `self_causal` and-s the causal mask in."""
        drop = lambda h: self.dropout(h, deterministic=deterministic)  # noqa: E731
        k, v = self_kv if self_kv is not None else self.self_attention.project_kv(x)
        h = self.self_attention.attend(
            x, k, v, self_bias, mask=self_mask, is_causal=self_causal, deterministic=deterministic
        )
        x = self.self_attention_norm(x + drop(h))
        h = self.cross_attention.attend(
            x, *cross_kv, cross_bias, mask=cross_mask, deterministic=deterministic
        )
        x = self.cross_attention_norm(x + drop(h))
        h = self.mlp(x, deterministic=deterministic)
        return self.mlp_norm(x + drop(h))


class _Stack(nnx.Module):
    """Positions + `embed_norm` (HF layernorm_embedding) + layers; the token table is shared."""

    def __init__(self, cfg: BartConfig, layers: list, *, rngs: nnx.Rngs):
        self.positions = Embedding(
            cfg.max_position_embeddings + POSITION_OFFSET,
            cfg.d_model,
            ("abspos_buckets", "embed"),
            rngs=rngs,
            **_common(cfg),
        )
        self.embed_norm = LayerNorm(
            cfg.d_model, eps=cfg.layer_norm_eps, dtype=cfg.activation_dtype, rngs=rngs
        )
        self.layers = nnx.List(layers)
        self.dropout = nnx.Dropout(cfg.dropout, rngs=rngs)

    def embed(self, token_embeds, positions, *, deterministic: bool) -> jax.Array:
        x = token_embeds + self.positions(positions + POSITION_OFFSET)
        return self.dropout(self.embed_norm(x), deterministic=deterministic)


class Bart(nnx.Module):
    """`token_embedder`, `final_logits_bias`, `encoder`, `decoder`."""

    def __init__(self, cfg: BartConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        kw = _common(cfg)
        self.token_embedder = Embedding(
            cfg.vocab_size, cfg.d_model, ("vocab", "embed"), rngs=rngs, **kw
        )
        self.final_logits_bias = Buffer(
            nnx.with_partitioning(jax.nn.initializers.zeros, ("vocab",))(
                rngs.params(), (cfg.vocab_size,), jnp.float32
            )
        )
        enc_layers = [
            EncoderLayer(
                cfg.d_model,
                cfg.encoder_attention_heads,
                cfg.encoder_ffn_dim,
                cfg.activation_function,
                eps=cfg.layer_norm_eps,
                dropout_rate=cfg.dropout,
                attention_dropout_rate=cfg.attention_dropout,
                activation_dropout_rate=cfg.activation_dropout,
                rngs=rngs,
                **_attention_common(cfg),
            )
            for _ in range(cfg.encoder_layers)
        ]
        self.encoder = _Stack(cfg, enc_layers, rngs=rngs)
        dec_layers = [BartDecoderLayer(cfg, rngs=rngs) for _ in range(cfg.decoder_layers)]
        self.decoder = _Stack(cfg, dec_layers, rngs=rngs)

    # ------------------------------------------------------------------ pieces

    def _tokens(self, ids: jax.Array) -> jax.Array:
        x = self.token_embedder(ids)
        return x * jnp.asarray(self.cfg.embed_scale, x.dtype) if self.cfg.scale_embedding else x

    def _logits(self, x: jax.Array) -> jax.Array:
        return self.token_embedder.attend(x) + self.final_logits_bias[...]

    def encoder_mask(self, batch) -> jax.Array:
        return jnp.asarray(batch["encoder_input_tokens"]) != self.cfg.pad_id

    def encode(self, batch, deterministic: bool = True) -> jax.Array:
        """Encoder states `[B, S, d_model]`; a packed batch's `encoder_positions` restart the
        learned positions in each example and `encoder_segment_ids` keep attention inside it."""
        ids = jnp.asarray(batch["encoder_input_tokens"])
        pos = batch.get("encoder_positions")
        pos = jnp.arange(ids.shape[1])[None, :] if pos is None else jnp.asarray(pos)
        x = self.encoder.embed(self._tokens(ids), pos, deterministic=deterministic)
        x = constrain(x, ACT)
        seg = batch.get("encoder_segment_ids")
        if seg is None:
            bias, mask = key_padding_inputs(self.cfg.attention_impl, self.encoder_mask(batch))
        else:  # queries stay unmasked, as HF; keys: valid and in the query's segment
            keys = self.encoder_mask(batch)[:, None, None, :] & same_segment(seg, seg)
            bias, mask, _ = attention_inputs(self.cfg.attention_impl, None, keys)
        step = checkpointed(
            lambda layer, x, bias, m: layer(x, bias, mask=m, deterministic=deterministic),
            self.cfg.remat_policy,
        )
        for layer in self.encoder.layers:
            x = constrain(step(layer, x, bias, mask), ACT)
        return x

    def decode(
        self,
        tokens,
        encoded,
        encoder_mask,
        *,
        deterministic: bool,
        segment_ids=None,
        positions=None,
        encoder_segment_ids=None,
    ) -> jax.Array:
        """Teacher-forced logits `[B, T, vocab]` fp32 (causal self-attention only, as HF with
        no decoder_attention_mask; later padding cannot reach earlier positions). A packed
        batch's `segment_ids` / `positions` / `encoder_segment_ids` keep each example apart."""
        t, impl = tokens.shape[1], self.cfg.attention_impl
        self_bias, self_mask, causal = attention_inputs(
            impl, None, same_segment(segment_ids, segment_ids), is_causal=True, q_len=t, k_len=t
        )
        if segment_ids is None:
            cross_bias, cross_mask = key_padding_inputs(impl, encoder_mask)
        else:
            keys = encoder_mask[:, None, None, :] & same_segment(segment_ids, encoder_segment_ids)
            cross_bias, cross_mask, _ = attention_inputs(impl, None, keys)
        pos = jnp.arange(t)[None, :] if positions is None else jnp.asarray(positions)
        x = constrain(
            self.decoder.embed(self._tokens(tokens), pos, deterministic=deterministic), ACT
        )

        def teacher_forced(layer, x, encoded, self_bias, self_mask, cross_bias, cross_mask):
            # Cross K/V inside the checkpoint: remat keeps `encoded` once, not K/V per layer.
            cross_kv = layer.cross_attention.project_kv(encoded)
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
        for layer in self.decoder.layers:
            x = step(layer, x, encoded, self_bias, self_mask, cross_bias, cross_mask)
            x = constrain(x, ACT)
        return constrain(self._logits(x), ("batch", "length", "vocab"))

    def __call__(self, batch, *, deterministic: bool) -> jax.Array:
        encoded = self.encode(batch, deterministic=deterministic)
        return self.decode(
            jnp.asarray(batch["decoder_input_tokens"]),
            encoded,
            self.encoder_mask(batch),
            deterministic=deterministic,
            segment_ids=batch.get("decoder_segment_ids"),
            positions=batch.get("decoder_positions"),
            encoder_segment_ids=batch.get("encoder_segment_ids"),
        )

    # ------------------------------------------------------------------ cached decoding

    def init_cache(self, encoded: jax.Array, encoder_mask: jax.Array, max_len: int) -> Cache:
        """Cross-attention K/V of every layer and empty self-attention caches of `max_len`."""
        cfg = self.cfg
        b, dt = encoded.shape[0], cfg.activation_dtype
        h = cfg.decoder_attention_heads
        shape = (b, max_len, h, cfg.d_model // h)
        return {
            "cross": [layer.cross_attention.project_kv(encoded) for layer in self.decoder.layers],
            "self": [(jnp.zeros(shape, dt), jnp.zeros(shape, dt)) for _ in self.decoder.layers],
            "encoder_mask": encoder_mask,
        }

    def _force(self, logits: jax.Array, index: jax.Array, max_len: int) -> jax.Array:
        """HF ForcedBOS (first generated token) / ForcedEOS (last position) processors."""
        cfg = self.cfg
        vocab = jnp.arange(logits.shape[-1])
        for token, at in (
            (cfg.forced_bos_token_id, index == 0),
            (cfg.forced_eos_token_id, index == max_len - 1),
        ):
            if token is not None:
                forced = jnp.where(vocab == token, 0.0, -jnp.inf).astype(logits.dtype)
                logits = jnp.where(at, forced[None, :], logits)
        return logits

    def decode_step(self, tokens, cache: Cache, index) -> tuple[jax.Array, Cache]:
        """One step: `tokens [B]` at position `index` -> (logits `[B, vocab]` fp32, new cache)."""
        max_len = cache["self"][0][0].shape[1]
        impl = self.cfg.attention_impl
        self_bias, self_mask, _ = attention_inputs(
            impl, None, (jnp.arange(max_len) <= index)[None, None, None, :]
        )
        cross_bias, cross_mask = key_padding_inputs(impl, cache["encoder_mask"])
        pos = jnp.full((1, 1), index, jnp.int32)
        x = self.decoder.embed(self._tokens(tokens[:, None]), pos, deterministic=True)
        new_self = []
        for layer, (kc, vc), cross_kv in zip(self.decoder.layers, cache["self"], cache["cross"]):
            k, v = layer.self_attention.project_kv(x)
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
        logits = self._force(self._logits(x)[:, 0], index, max_len)
        return logits, {**cache, "self": new_self}


def build(config: BartConfig, rngs: nnx.Rngs | int = 0) -> Bart:
    if isinstance(rngs, int):
        rngs = nnx.Rngs(params=rngs, dropout=rngs + 1)
    return Bart(config, rngs=rngs)
