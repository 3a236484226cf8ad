"""Gemma and Gemma 2 decoders (Flax NNX), numerically as HF transformers' `modeling_gemma.py` /
`modeling_gemma2.py` (docs/models.md §8; the decoders of PaliGemma 1 and 2).

Gemma: RMSNorm scaled by `(1 + w)` (w starts at zero) in float32; RoPE (HF's rotate-half form);
multi-query / grouped-query attention (`num_kv_heads` <= `num_heads`) scaled by
`query_pre_attn_scalar ** -0.5` (Gemma 1: head_dim); a GeGLU MLP (`layers.MlpBlock` with
("gelu", "linear"): tanh GELU of `wi_0` times `wi_1`, HF's gate_proj / up_proj); token embeddings
scaled by sqrt(emb_dim) (the scale rounded to the activation dtype, as HF); the output projection
tied to the embedding, in float32.
Gemma 2 (`version=2`) adds norms after attention and after the MLP (`post_attention_norm`,
`post_mlp_norm`), local sliding-window layers alternating with global ones (`layer_types`,
`sliding_window`), attention-logit soft-capping `cap * tanh(logits / cap)` and final-logit
soft-capping.

Attention: a soft-capped layer takes the einsum path whatever `attention_impl` says, because the
cap sits between `q.k` and the softmax, where neither `jax.nn.dot_product_attention` nor cuDNN
has a hook. The other layers (Gemma 1, or a Gemma 2 config without a cap) go through
`layers.attention_core` like every family, with the key/value heads repeated over their query
group. The masks are boolean `[B, 1, T, S]` per layer kind ("full_attention",
"sliding_attention"), built once per stack by `attention_masks` (prefix-LM aware).

Inference: `GemmaDecoder.extend` runs the stack over a KV cache (`init_cache`; every layer keeps
every slot, the sliding window being a mask over key positions), for prefill and for one-token
steps (models/paligemma/decoding.py); the full forward (`__call__`) does not use it.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.models.layers import Dense, Embed, MlpBlock, attention_core, constrain, mask_to_bias
from chartjax.models.model_configs import check_attention_impl
from chartjax.models.post_ln.blocks import param
from chartjax.models.remat import check_remat_policy, checkpointed

ACT = ("batch", "length", "embed")
CACHE = ("batch", "length", None, None)  # KV cache [B, S, kv_heads, head_dim]
FULL, SLIDING = "full_attention", "sliding_attention"  # HF's `layer_types` values
EMBED_STD = 0.02  # HF GemmaConfig.initializer_range: the token embeddings' init


@dataclasses.dataclass(frozen=True)
class GemmaConfig:
    """A Gemma (version 1) or Gemma 2 (version 2) decoder; field meanings as HF's config.json
    (`emb_dim` = hidden_size, `mlp_dim` = intermediate_size, `num_kv_heads` =
    num_key_value_heads)."""

    vocab_size: int
    emb_dim: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    mlp_dim: int
    num_layers: int
    version: int = 1
    query_pre_attn_scalar: float | None = None  # None: head_dim (Gemma 1)
    attn_logit_softcap: float | None = None
    final_logit_softcap: float | None = None
    sliding_window: int | None = None
    layer_types: tuple[str, ...] = ()  # per layer FULL / SLIDING; () = every layer FULL
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    dropout_rate: float = 0.0
    dtype: str = "bfloat16"  # activation dtype; parameters are float32
    attention_impl: str = "dot_product"
    remat_policy: str = "none"

    def __post_init__(self):
        name = type(self).__name__
        for f in ("vocab_size", "emb_dim", "num_heads", "num_kv_heads", "head_dim", "mlp_dim"):
            v = getattr(self, f)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name}.{f} must be a positive int, got {v!r}")
        if not isinstance(self.num_layers, int) or self.num_layers <= 0:
            raise ValueError(f"{name}.num_layers must be a positive int, got {self.num_layers!r}")
        if self.version not in (1, 2):
            raise ValueError(f"{name}.version must be 1 (Gemma) or 2 (Gemma 2), not {self.version}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"{name}: num_heads={self.num_heads} is not a multiple of "
                f"num_kv_heads={self.num_kv_heads}"
            )
        types = tuple(self.layer_types)
        object.__setattr__(self, "layer_types", types)
        if types and len(types) != self.num_layers:
            raise ValueError(f"{name}: {len(types)} layer_types for {self.num_layers} layers")
        if any(t not in (FULL, SLIDING) for t in types):
            raise ValueError(f"{name}.layer_types: each must be {FULL!r} or {SLIDING!r}: {types}")
        if SLIDING in types and not (
            isinstance(self.sliding_window, int) and self.sliding_window > 0
        ):
            raise ValueError(f"{name}: sliding layers need a positive sliding_window")
        check_attention_impl(name, self.attention_impl)
        check_remat_policy(name, self.remat_policy)
        jnp.dtype(self.dtype)

    @property
    def activation_dtype(self):
        return jnp.dtype(self.dtype)

    def layer_type(self, i: int) -> str:
        return self.layer_types[i] if self.layer_types else FULL


class GemmaRMSNorm(nnx.Module):
    """`x * rsqrt(mean(x^2) + eps) * (1 + scale)` in float32, cast to `dtype` (scale starts 0)."""

    def __init__(self, dim: int, *, eps: float, dtype, rngs: nnx.Rngs):
        self.scale = param(rngs, jax.nn.initializers.zeros, (dim,), ("embed",))
        self.eps = eps
        self.dtype = dtype

    def __call__(self, x: jax.Array) -> jax.Array:
        x32 = x.astype(jnp.float32)
        var = jnp.mean(jnp.square(x32), axis=-1, keepdims=True)
        y = x32 * jax.lax.rsqrt(var + self.eps) * (1.0 + self.scale[...])
        return y.astype(self.dtype)


def rope(x: jax.Array, positions: jax.Array, theta: float) -> jax.Array:
    """Rotary embedding of `x [B, T, H, D]` at `positions [B, T]` (HF's rotate-half layout:
    the first and second halves of each head are the pairs); angles in float32, cos/sin cast to
    `x`'s dtype as HF does."""
    d = x.shape[-1]
    inv_freq = 1.0 / (theta ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d))
    freqs = positions.astype(jnp.float32)[..., None] * inv_freq  # [B, T, D/2]
    emb = jnp.concatenate([freqs, freqs], axis=-1)[:, :, None, :]
    cos, sin = jnp.cos(emb).astype(x.dtype), jnp.sin(emb).astype(x.dtype)
    x1, x2 = jnp.split(x, 2, axis=-1)
    return x * cos + jnp.concatenate([-x2, x1], axis=-1) * sin


def grouped_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    mask: jax.Array | None,
    *,
    scale: float,
    softcap: float | None,
    impl: str,
    dtype,
) -> jax.Array:
    """`q [B, T, H, D]` over `k, v [B, S, K, D]` (H a multiple of K) -> `[B, T, H, D]`;
    `mask` bool broadcastable to `[B, 1, T, S]` (True = attend)."""
    b, t, h, d = q.shape
    kv = k.shape[2]
    if softcap is None and impl != "einsum":
        # The shared core (fused or XLA attention); MQA/GQA heads repeated over their group.
        rep = h // kv
        k, v = jnp.repeat(k, rep, axis=2), jnp.repeat(v, rep, axis=2)
        return attention_core(q, k, v, None, mask, impl=impl, dtype=dtype, logits_divisor=1 / scale)
    # Einsum path (every soft-capped layer): logits per kv head and its query group.
    qg = q.reshape(b, t, kv, h // kv, d)
    logits = jnp.einsum("btkgd,bskd->bkgts", qg, k, preferred_element_type=jnp.float32)
    logits = logits * jnp.float32(scale)
    if softcap is not None:
        logits = jnp.tanh(logits / softcap) * softcap
    if mask is not None:
        logits = logits + mask_to_bias(mask[:, :, None])  # [B, 1, 1, T, S]
    probs = jax.nn.softmax(logits, axis=-1).astype(dtype)
    y = jnp.einsum("bkgts,bskd->btkgd", probs, v.astype(dtype))
    return y.reshape(b, t, h, d)


class GemmaAttention(nnx.Module):
    """Kernels: query `[embed, heads*head_dim]`, key/value `[embed, kv_heads*head_dim]`, out
    `[heads*head_dim, embed]` (HF's q/k/v/o_proj, transposed); no biases."""

    def __init__(self, cfg: GemmaConfig, *, sliding: bool, rngs: nnx.Rngs):
        e, h, k, d, dt = cfg.emb_dim, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.dtype
        kw = {"dtype": jnp.dtype(dt), "rngs": rngs}
        self.query = Dense(e, h * d, ("embed", "joined_kv"), **kw)
        self.key = Dense(e, k * d, ("embed", "joined_kv"), **kw)
        self.value = Dense(e, k * d, ("embed", "joined_kv"), **kw)
        self.out = Dense(h * d, e, ("joined_kv", "embed"), **kw)
        self.num_heads, self.num_kv_heads, self.head_dim = h, k, d
        self.scale = (cfg.query_pre_attn_scalar or d) ** -0.5
        self.softcap = cfg.attn_logit_softcap
        self.theta = cfg.rope_theta
        self.impl = cfg.attention_impl
        self.dtype = cfg.activation_dtype
        self.sliding = sliding

    def project_kv(self, x: jax.Array, positions: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Rotated keys and values `[B, S, kv_heads, head_dim]` (what a KV cache holds)."""
        k = self.key(x).reshape(*x.shape[:2], self.num_kv_heads, self.head_dim)
        v = self.value(x).reshape(*x.shape[:2], self.num_kv_heads, self.head_dim)
        return rope(k, positions, self.theta), v

    def __call__(self, x: jax.Array, positions: jax.Array, mask: jax.Array) -> jax.Array:
        q = self.query(x).reshape(*x.shape[:2], self.num_heads, self.head_dim)
        q = rope(q, positions, self.theta)
        k, v = self.project_kv(x, positions)
        y = grouped_attention(
            q, k, v, mask, scale=self.scale, softcap=self.softcap, impl=self.impl, dtype=self.dtype
        )
        return self.out(y.reshape(*x.shape[:2], self.num_heads * self.head_dim))

    def extend(self, x, positions, mask, cache: dict, index) -> tuple[jax.Array, dict]:
        """KV-cached attention (inference): the rotated keys/values of `x [B, t, E]` are written
        into `cache` ({"k", "v"}: `[B, S, kv_heads, head_dim]`) at slots `index .. index+t-1`,
        then the queries attend over the cache's first `mask.shape[-1]` slots with `mask`
        (bool `[B, 1, t, mask.shape[-1]]`). A one-token step takes the einsum path (no repeated
        key/value heads: it reads the cache once)."""
        q = self.query(x).reshape(*x.shape[:2], self.num_heads, self.head_dim)
        q = rope(q, positions, self.theta)
        k, v = self.project_kv(x, positions)
        ck = jax.lax.dynamic_update_slice_in_dim(cache["k"], k.astype(cache["k"].dtype), index, 1)
        cv = jax.lax.dynamic_update_slice_in_dim(cache["v"], v.astype(cache["v"].dtype), index, 1)
        s = mask.shape[-1]
        y = grouped_attention(
            q,
            ck[:, :s],
            cv[:, :s],
            mask,
            scale=self.scale,
            softcap=self.softcap,
            impl="einsum" if x.shape[1] == 1 else self.impl,
            dtype=self.dtype,
        )
        return self.out(y.reshape(*x.shape[:2], self.num_heads * self.head_dim)), {"k": ck, "v": cv}


class GemmaLayer(nnx.Module):
    """Pre-norm attention and GeGLU MLP; Gemma 2 also norms each branch's output."""

    def __init__(self, cfg: GemmaConfig, index: int, *, rngs: nnx.Rngs):
        dt, eps, e = cfg.activation_dtype, cfg.rms_norm_eps, cfg.emb_dim
        self.layer_type = cfg.layer_type(index)
        self.pre_attention_norm = GemmaRMSNorm(e, eps=eps, dtype=dt, rngs=rngs)
        self.attention = GemmaAttention(cfg, sliding=self.layer_type == SLIDING, rngs=rngs)
        self.pre_mlp_norm = GemmaRMSNorm(e, eps=eps, dtype=dt, rngs=rngs)
        self.mlp = MlpBlock(
            e, cfg.mlp_dim, ("gelu", "linear"), dropout_rate=0.0, dtype=dt, rngs=rngs
        )
        post = cfg.version == 2
        self.post_attention_norm = GemmaRMSNorm(e, eps=eps, dtype=dt, rngs=rngs) if post else None
        self.post_mlp_norm = GemmaRMSNorm(e, eps=eps, dtype=dt, rngs=rngs) if post else None
        self.dropout = nnx.Dropout(cfg.dropout_rate, rngs=rngs)

    def __call__(self, x, positions, mask, *, deterministic: bool) -> jax.Array:
        h = self.attention(self.pre_attention_norm(x), positions, mask)
        if self.post_attention_norm is not None:
            h = self.post_attention_norm(h)
        x = x + self.dropout(h, deterministic=deterministic)
        h = self.mlp(self.pre_mlp_norm(x), deterministic=deterministic)
        if self.post_mlp_norm is not None:
            h = self.post_mlp_norm(h)
        return x + self.dropout(h, deterministic=deterministic)

    def extend(self, x, positions, mask, cache: dict, index) -> tuple[jax.Array, dict]:
        """The layer with KV-cached attention (`GemmaAttention.extend`), deterministic."""
        h, cache = self.attention.extend(self.pre_attention_norm(x), positions, mask, cache, index)
        if self.post_attention_norm is not None:
            h = self.post_attention_norm(h)
        x = x + h
        h = self.mlp(self.pre_mlp_norm(x), deterministic=True)
        if self.post_mlp_norm is not None:
            h = self.post_mlp_norm(h)
        return x + h, cache


def attention_masks(
    valid: jax.Array, prefix: jax.Array | None, sliding_window: int | None
) -> dict[str, jax.Array]:
    """Boolean `[B, 1, T, T]` masks per layer kind, as HF builds them for PaliGemma: causal
    (and within `sliding_window` for the sliding kind), OR'ed with full attention among the
    `prefix [B, T]` tokens (HF's `block_sequence_ids`: the prefix block stays bidirectional in
    sliding layers too), AND'ed with the valid keys `valid [B, T]`."""
    t = valid.shape[1]
    qi, ki = jnp.arange(t)[:, None], jnp.arange(t)[None, :]
    causal = (ki <= qi)[None]
    block = jnp.zeros((1, t, t), bool) if prefix is None else prefix[:, :, None] & prefix[:, None]
    keys = valid[:, None, :]
    out = {FULL: ((causal | block) & keys)[:, None]}
    if sliding_window is not None:
        local = causal & (ki > qi - sliding_window)[None]
        out[SLIDING] = ((local | block) & keys)[:, None]
    return out


class GemmaDecoder(nnx.Module):
    """`embedder` (tied output), `layers`, `final_norm`. The caller embeds (`embed`, so that image
    features can be placed among the tokens), runs the stack, then takes `logits`."""

    def __init__(self, cfg: GemmaConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        dt = cfg.activation_dtype
        # HF's init (GemmaPreTrainedModel: normal(initializer_range 0.02)); at flaxformer's
        # normal(1.0) the tied output starts at logits of std ~sqrt(emb_dim), a loss of ~35.
        self.embedder = Embed(cfg.vocab_size, cfg.emb_dim, dtype=dt, stddev=EMBED_STD, rngs=rngs)
        self.layers = nnx.List([GemmaLayer(cfg, i, rngs=rngs) for i in range(cfg.num_layers)])
        self.final_norm = GemmaRMSNorm(cfg.emb_dim, eps=cfg.rms_norm_eps, dtype=dt, rngs=rngs)
        self.dropout = nnx.Dropout(cfg.dropout_rate, rngs=rngs)

    def embed(self, ids: jax.Array) -> jax.Array:
        """Token embeddings times sqrt(emb_dim), the scale in the activation dtype (as HF)."""
        dt = self.cfg.activation_dtype
        return self.embedder(ids) * jnp.asarray(math.sqrt(self.cfg.emb_dim), dt)

    def __call__(
        self,
        x: jax.Array,
        positions: jax.Array,
        masks: dict[str, jax.Array],
        *,
        deterministic: bool,
    ) -> jax.Array:
        """Embedded inputs `x [B, T, E]` at `positions [B, T]`, masks from `attention_masks` ->
        final-normed hidden states `[B, T, E]`."""
        x = constrain(self.dropout(x, deterministic=deterministic), ACT)
        step = checkpointed(
            lambda layer, x, p, m: layer(x, p, m, deterministic=deterministic),
            self.cfg.remat_policy,
        )
        for layer in self.layers:
            x = constrain(step(layer, x, positions, masks[layer.layer_type]), ACT)
        return self.final_norm(x)

    def init_cache(self, batch: int, length: int) -> tuple[dict, ...]:
        """An empty KV cache: per layer {"k", "v"} zeros `[batch, length, kv_heads, head_dim]` in
        the activation dtype. Sliding-window layers keep every slot too (their window is a mask
        over key positions, see `extend`), so one slot index serves every layer."""
        c = self.cfg
        shape = (batch, length, c.num_kv_heads, c.head_dim)
        zeros = jnp.zeros(shape, c.activation_dtype)
        return tuple({"k": zeros, "v": zeros} for _ in range(c.num_layers))

    def extend(
        self,
        x: jax.Array,
        positions: jax.Array,
        masks: dict[str, jax.Array],
        cache: tuple[dict, ...],
        index,
    ) -> tuple[jax.Array, tuple[dict, ...]]:
        """KV-cached run (inference, no dropout): embedded `x [B, t, E]` at `positions [B, t]`,
        written into `cache` (`init_cache`) at slots `index .. index+t-1`; each layer attends
        over the first `S' = masks[kind].shape[-1]` slots with its kind's bool `[B, 1, t, S']`
        mask (the caller builds it: prefix block, causality, sliding window over key positions,
        valid slots) -> (final-normed hidden states `[B, t, E]`, the updated cache)."""
        x = constrain(x, ACT)
        new = []
        for layer, c in zip(self.layers, cache, strict=True):
            x, c = layer.extend(x, positions, masks[layer.layer_type], c, index)
            x = constrain(x, ACT)
            new.append({k: constrain(v, CACHE) for k, v in c.items()})
        return self.final_norm(x), tuple(new)

    def logits(self, h: jax.Array) -> jax.Array:
        """Tied output projection in float32, soft-capped where the config says (Gemma 2)."""
        logits = self.embedder.attend(h)
        cap = self.cfg.final_logit_softcap
        if cap is not None:
            logits = jnp.tanh(logits / cap) * cap
        return constrain(logits, ("batch", "length", "vocab"))
