"""DeBERTa v2 / v3 (Flax NNX) and its sequence classifier, as HF `DebertaV2ForSequenceClassification`.

Embeddings: word (+ absolute positions when `position_biased_input`) (+ token type when
`type_vocab_size > 0`), projected to `hidden_size` when `embedding_size` differs, LayerNorm, then
zeroed at padding. Post-LN layers with disentangled attention: content->content scores plus,
per `pos_att_type`, content->position (`c2p`: query . key-projected relative embedding at
`delta(q, k)`) and position->content (`p2c`: key . query-projected relative embedding at
`delta(k, q)`, transposed), every term divided by `sqrt(head_dim * (1 + len(pos_att_type)))`.
`delta` is `q - k`, log-bucketed when `position_buckets > 0`, shifted by the attention span and
clipped to the `2 * span` rows of the shared `rel_embeddings` table (LayerNorm-ed when
`norm_rel_ebd` says `layer_norm`). With `share_att_key` the relative embeddings go through the
layer's own query/key projections; otherwise through `pos_query_proj` / `pos_key_proj`. An
optional ConvLayer (`conv_kernel_size > 0`) mixes the embeddings into the first layer's output.
Classification: ContextPooler (`dense` + `pooler_hidden_act` on the first token) -> classifier.

Numerics: fp32 parameters; matmuls in `dtype` (bf16 allowed); scores, softmax, LayerNorm and
logits in fp32. Batch: `input_ids [B, S]`, optional `attention_mask [B, S]` (ones if absent, as
HF) and `token_type_ids [B, S]` (zeros if absent).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from chartjax.models.layers import attention_core, constrain
from chartjax.models.model_configs import check_attention_impl
from chartjax.models.post_ln.blocks import (
    SUPPORTED_ACTIVATIONS,
    Embedding,
    FeedForward,
    LayerNorm,
    Pooler,
    activation,
    check_activation,
    classifier,
    dense,
    num_labels_from_hf,
    param,
    refuse,
)
from chartjax.models.remat import check_remat_policy, checkpointed

ACT = ("batch", "length", "embed")
POS_ATT_TYPES = ("c2p", "p2c")
NORM_REL_EBD = ("none", "layer_norm")


# --------------------------------------------------------------------------- config


@dataclasses.dataclass(frozen=True)
class DebertaConfig:
    """DeBERTa v2/v3. Field names follow HF's DebertaV2Config (`pos_att_type` as a tuple)."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    num_labels: int = 2
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    type_vocab_size: int = 0
    embedding_size: int | None = None  # None: hidden_size
    layer_norm_eps: float = 1e-7
    relative_attention: bool = False
    max_relative_positions: int = -1  # < 1: max_position_embeddings
    position_buckets: int = -1  # <= 0: no log buckets
    pos_att_type: tuple[str, ...] = ()
    share_att_key: bool = False
    norm_rel_ebd: str = "none"  # "none" | "layer_norm"
    position_biased_input: bool = True
    conv_kernel_size: int = 0  # 0: no ConvLayer
    conv_groups: int = 1
    conv_act: str = "tanh"
    pooler_hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    pooler_dropout: float = 0.0
    cls_dropout: float | None = None  # None: hidden_dropout_prob
    initializer_range: float = 0.02
    pad_id: int = 0
    dtype: str = "bfloat16"  # activation dtype; parameters are float32
    attention_impl: str = "dot_product"  # model_configs.ATTENTION_IMPLS
    remat_policy: str = "none"  # models/remat.py REMAT_POLICIES; not an HF field

    def __post_init__(self):
        check_attention_impl("DebertaConfig", self.attention_impl)
        check_remat_policy("DebertaConfig", self.remat_policy)
        pos = self.pos_att_type
        if isinstance(pos, str):
            pos = [x.strip() for x in pos.lower().split("|") if x.strip()]
        object.__setattr__(self, "pos_att_type", tuple(pos or ()))
        for f in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "num_labels",
            "max_position_embeddings",
        ):
            v = getattr(self, f)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"DebertaConfig.{f} must be a positive int, got {v!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"DebertaConfig: hidden_size {self.hidden_size} is not a multiple of "
                f"num_attention_heads {self.num_attention_heads}"
            )
        bad = [t for t in self.pos_att_type if t not in POS_ATT_TYPES]
        if bad:
            raise ValueError(f"pos_att_type={list(self.pos_att_type)}: only {POS_ATT_TYPES}")
        if self.norm_rel_ebd not in NORM_REL_EBD:
            raise ValueError(f"norm_rel_ebd={self.norm_rel_ebd!r}: only {NORM_REL_EBD}")
        if self.conv_kernel_size < 0 or (self.conv_kernel_size and self.conv_kernel_size % 2 == 0):
            raise ValueError(
                f"conv_kernel_size={self.conv_kernel_size}: 0 or odd (HF pads (k-1)//2 each side)"
            )
        if self.conv_groups < 1 or self.hidden_size % self.conv_groups:
            raise ValueError(f"conv_groups={self.conv_groups} must divide {self.hidden_size}")
        for f in ("hidden_act", "conv_act", "pooler_hidden_act"):
            check_activation(f, getattr(self, f))
        jnp.dtype(self.dtype)

    @property
    def activation_dtype(self):
        return jnp.dtype(self.dtype)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def embed_dim(self) -> int:
        return self.hidden_size if self.embedding_size is None else self.embedding_size

    @property
    def max_relative(self) -> int:
        m = self.max_relative_positions
        return m if m >= 1 else self.max_position_embeddings

    @property
    def att_span(self) -> int:
        """Half the number of rows of `rel_embeddings`."""
        return self.position_buckets if self.position_buckets > 0 else self.max_relative

    @classmethod
    def from_hf_config(
        cls, hf: dict, *, dtype: str = "float32", where: str = "config.json"
    ) -> DebertaConfig:
        """From an HF DeBERTa-v2/v3 `config.json` dict; a field value chartjax does not implement
        raises ValueError naming the field."""
        mt = hf.get("model_type", "deberta-v2")
        if mt != "deberta-v2":
            refuse(where, "model_type", mt, "expected 'deberta-v2' (DeBERTa v1 differs)")
        h, heads = hf.get("hidden_size"), hf.get("num_attention_heads")
        if "attention_head_size" in hf and h and heads and hf["attention_head_size"] * heads != h:
            refuse(
                where,
                "attention_head_size",
                hf["attention_head_size"],
                "heads * head size must equal hidden_size (HF's output dense is hidden x hidden)",
            )
        if hf.get("pooler_hidden_size", h) != h:
            refuse(where, "pooler_hidden_size", hf["pooler_hidden_size"], "must be hidden_size")
        pos = hf.get("pos_att_type") or []
        if isinstance(pos, str):
            pos = [x.strip() for x in pos.lower().split("|") if x.strip()]
        for t in pos:
            if t not in POS_ATT_TYPES:
                refuse(where, "pos_att_type", hf["pos_att_type"], f"only {POS_ATT_TYPES}")
        norm = [x.strip() for x in str(hf.get("norm_rel_ebd", "none")).lower().split("|")]
        if any(x not in NORM_REL_EBD for x in norm):
            refuse(where, "norm_rel_ebd", hf["norm_rel_ebd"], f"only {NORM_REL_EBD}")
        k = hf.get("conv_kernel_size", 0) or 0
        if k < 0 or (k > 0 and k % 2 == 0):
            refuse(where, "conv_kernel_size", k, "0 or an odd size")
        for f, default in (("hidden_act", "gelu"), ("pooler_hidden_act", "gelu")):
            if hf.get(f, default) not in SUPPORTED_ACTIVATIONS:
                refuse(where, f, hf[f], f"have {SUPPORTED_ACTIVATIONS}")
        if k and hf.get("conv_act", "tanh") not in SUPPORTED_ACTIVATIONS:
            refuse(where, "conv_act", hf["conv_act"], f"have {SUPPORTED_ACTIVATIONS}")
        if k and h and h % (hf.get("conv_groups", 1) or 1):
            refuse(where, "conv_groups", hf["conv_groups"], "must divide hidden_size")
        try:
            return cls(
                vocab_size=hf["vocab_size"],
                hidden_size=hf["hidden_size"],
                num_hidden_layers=hf["num_hidden_layers"],
                num_attention_heads=hf["num_attention_heads"],
                intermediate_size=hf["intermediate_size"],
                num_labels=num_labels_from_hf(hf),
                hidden_act=hf.get("hidden_act", "gelu"),
                max_position_embeddings=hf.get("max_position_embeddings", 512),
                type_vocab_size=hf.get("type_vocab_size", 0),
                embedding_size=hf.get("embedding_size"),
                layer_norm_eps=hf.get("layer_norm_eps", 1e-7),
                relative_attention=bool(hf.get("relative_attention", False)),
                max_relative_positions=hf.get("max_relative_positions", -1),
                position_buckets=hf.get("position_buckets", -1),
                pos_att_type=tuple(pos),
                share_att_key=bool(hf.get("share_att_key", False)),
                norm_rel_ebd="layer_norm" if "layer_norm" in norm else "none",
                position_biased_input=bool(hf.get("position_biased_input", True)),
                conv_kernel_size=k,
                conv_groups=hf.get("conv_groups", 1) or 1,
                conv_act=hf.get("conv_act", "tanh"),
                pooler_hidden_act=hf.get("pooler_hidden_act", "gelu"),
                hidden_dropout_prob=hf.get("hidden_dropout_prob", 0.1),
                attention_probs_dropout_prob=hf.get("attention_probs_dropout_prob", 0.1),
                pooler_dropout=hf.get("pooler_dropout", 0.0),
                cls_dropout=hf.get("cls_dropout"),
                initializer_range=hf.get("initializer_range", 0.02),
                pad_id=hf.get("pad_token_id", 0) or 0,
                dtype=dtype,
            )
        except KeyError as e:
            raise ValueError(f"{where}: missing field {e}") from None

    def to_hf_config(self) -> dict:
        out = {
            "model_type": "deberta-v2",
            "architectures": ["DebertaV2ForSequenceClassification"],
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "intermediate_size": self.intermediate_size,
            "hidden_act": self.hidden_act,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "layer_norm_eps": self.layer_norm_eps,
            "relative_attention": self.relative_attention,
            "max_relative_positions": self.max_relative_positions,
            "position_buckets": self.position_buckets,
            "pos_att_type": list(self.pos_att_type),
            "share_att_key": self.share_att_key,
            "norm_rel_ebd": self.norm_rel_ebd,
            "position_biased_input": self.position_biased_input,
            "conv_kernel_size": self.conv_kernel_size,
            "conv_groups": self.conv_groups,
            "conv_act": self.conv_act,
            "pooler_hidden_size": self.hidden_size,
            "pooler_hidden_act": self.pooler_hidden_act,
            "pooler_dropout": self.pooler_dropout,
            "hidden_dropout_prob": self.hidden_dropout_prob,
            "attention_probs_dropout_prob": self.attention_probs_dropout_prob,
            "initializer_range": self.initializer_range,
            "pad_token_id": self.pad_id,
            "id2label": {str(i): f"LABEL_{i}" for i in range(self.num_labels)},
            "label2id": {f"LABEL_{i}": i for i in range(self.num_labels)},
        }
        if self.embedding_size is not None:
            out["embedding_size"] = self.embedding_size
        if self.cls_dropout is not None:
            out["cls_dropout"] = self.cls_dropout
        return out


# --------------------------------------------------------------------------- relative positions


def log_bucket_position(rel: np.ndarray, bucket_size: int, max_position: int) -> np.ndarray:
    """DeBERTa's log buckets: exact within `bucket_size // 2`, log-spaced beyond (float32 math)."""
    sign = np.sign(rel)
    mid = bucket_size // 2
    abs_pos = np.where((rel < mid) & (rel > -mid), mid - 1, np.abs(rel))
    with np.errstate(divide="ignore"):
        log_pos = np.ceil(
            np.log(abs_pos.astype(np.float32) / np.float32(mid))
            / np.log(np.float32((max_position - 1) / mid))
            * np.float32(mid - 1)
        ) + np.float32(mid)
    return np.where(abs_pos <= mid, rel.astype(np.float32), log_pos * sign).astype(np.int64)


@functools.lru_cache(maxsize=64)
def relative_positions(q_len: int, k_len: int, bucket_size: int, max_position: int) -> np.ndarray:
    """`[q_len, k_len]` int relative positions `q - k`, log-bucketed when both sizes are > 0."""
    rel = np.arange(q_len)[:, None] - np.arange(k_len)[None, :]
    if bucket_size > 0 and max_position > 0:
        rel = log_bucket_position(rel, bucket_size, max_position)
    out = rel.astype(np.int32)
    out.setflags(write=False)
    return out


def _gather_last(x: jax.Array, idx: np.ndarray) -> jax.Array:
    """`x [B, H, Q, R]`, static `idx [Q, K]` -> `x[b, h, q, idx[q, k]]` `[B, H, Q, K]`."""
    idx = jnp.broadcast_to(jnp.asarray(idx), (*x.shape[:2], *idx.shape))
    return jnp.take_along_axis(x, idx, axis=-1)


# --------------------------------------------------------------------------- model


class DisentangledSelfAttention(nnx.Module):
    """Kernels `[embed, heads*head_dim]` (head-major) with biases, as HF's q/k/v projections."""

    def __init__(self, cfg: DebertaConfig, *, rngs: nnx.Rngs):
        e, dt, std = cfg.hidden_size, cfg.activation_dtype, cfg.initializer_range
        kw = {"std": std, "dtype": dt, "rngs": rngs}
        self.query_proj = dense(e, e, ("embed", "joined_kv"), **kw)
        self.key_proj = dense(e, e, ("embed", "joined_kv"), **kw)
        self.value_proj = dense(e, e, ("embed", "joined_kv"), **kw)
        pos = cfg.pos_att_type
        own = cfg.relative_attention and not cfg.share_att_key
        self.pos_key_proj = (
            dense(e, e, ("embed", "joined_kv"), **kw) if own and "c2p" in pos else None
        )
        self.pos_query_proj = (
            dense(e, e, ("embed", "joined_kv"), **kw) if own and "p2c" in pos else None
        )
        self.dropout = nnx.Dropout(cfg.attention_probs_dropout_prob, rngs=rngs)
        self.pos_dropout = nnx.Dropout(cfg.hidden_dropout_prob, rngs=rngs)
        self.num_heads = cfg.num_attention_heads
        self.head_dim = cfg.head_dim
        self.relative_attention = cfg.relative_attention
        self.pos_att_type = pos
        self.share_att_key = cfg.share_att_key
        self.att_span = cfg.att_span
        self.dtype = dt
        self.attention_impl = cfg.attention_impl
        # HF counts the position terms in the scale even when relative_attention is off.
        self.scale = math.sqrt(self.head_dim * (1 + sum(t in pos for t in POS_ATT_TYPES)))

    def _split(self, x: jax.Array) -> jax.Array:
        return x.reshape(*x.shape[:-1], self.num_heads, self.head_dim)

    def __call__(self, x, mask, rel_pos, rel_emb, *, deterministic: bool) -> jax.Array:
        """`x [B, S, E]`, `mask [B, 1, S, S]` bool, static `rel_pos [S, S]`, `rel_emb [2span, E]`
        -> context `[B, S, heads*head_dim]`.

        The c2p/p2c scores are the position `bias` of `layers.attention_core` (each divided by
        the scale as HF does); "einsum" keeps HF's order of operations, including its masking
        with `finfo(float32).min` (a fully masked row is uniform, as with the fused call)."""
        q = self._split(self.query_proj(x))
        k = self._split(self.key_proj(x))
        v = self._split(self.value_proj(x))
        f32 = jnp.float32
        terms = []  # the position scores, each / scale
        if self.relative_attention and self.pos_att_type:
            rel = self.pos_dropout(rel_emb, deterministic=deterministic)
            span = self.att_span
            if "c2p" in self.pos_att_type:
                proj = self.key_proj if self.share_att_key else self.pos_key_proj
                pos_k = self._split(proj(rel))  # [R, H, D]
                c2p = jnp.einsum("bqhd,rhd->bhqr", q, pos_k, preferred_element_type=f32)
                idx = np.clip(rel_pos + span, 0, 2 * span - 1)
                terms.append(_gather_last(c2p, idx) / self.scale)
            if "p2c" in self.pos_att_type:
                proj = self.query_proj if self.share_att_key else self.pos_query_proj
                pos_q = self._split(proj(rel))
                p2c = jnp.einsum("bkhd,rhd->bhkr", k, pos_q, preferred_element_type=f32)
                # Row k, column q: the embedding at delta(k, q), as HF's p2c gather + transpose.
                idx = np.clip(-rel_pos + span, 0, 2 * span - 1)
                terms.append(jnp.swapaxes(_gather_last(p2c, idx), -1, -2) / self.scale)
        dropping = self.dropout.rate > 0 and not deterministic
        if self.attention_impl == "einsum" or dropping:
            scores = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=f32) / self.scale
            for t in terms:
                scores = scores + t
            scores = jnp.where(mask, scores, jnp.finfo(f32).min)
            probs = self.dropout(jax.nn.softmax(scores, axis=-1), deterministic=deterministic)
            y = jnp.einsum("bhqk,bkhd->bqhd", probs.astype(self.dtype), v)
        else:
            bias = None
            for t in terms:
                bias = t if bias is None else bias + t
            y = attention_core(
                q,
                k,
                v,
                bias,
                mask,
                impl=self.attention_impl,
                dtype=self.dtype,
                logits_divisor=self.scale,
            )
        return y.reshape(*y.shape[:2], self.num_heads * self.head_dim)


class DebertaLayer(nnx.Module):
    """Post-LN: `LN(x + dense(attn(x)))`, then `LN(h + ffn(h))`."""

    def __init__(self, cfg: DebertaConfig, *, rngs: nnx.Rngs):
        e, dt, std = cfg.hidden_size, cfg.activation_dtype, cfg.initializer_range
        self.attention = DisentangledSelfAttention(cfg, rngs=rngs)
        self.attention_out = dense(e, e, ("joined_kv", "embed"), std=std, dtype=dt, rngs=rngs)
        self.attention_norm = LayerNorm(e, eps=cfg.layer_norm_eps, dtype=dt, rngs=rngs)
        self.mlp = FeedForward(
            e,
            cfg.intermediate_size,
            cfg.hidden_act,
            inner_dropout_rate=0.0,
            std=std,
            dtype=dt,
            rngs=rngs,
        )
        self.mlp_norm = LayerNorm(e, eps=cfg.layer_norm_eps, dtype=dt, rngs=rngs)
        self.dropout = nnx.Dropout(cfg.hidden_dropout_prob, rngs=rngs)

    def __call__(self, x, mask, rel_pos, rel_emb, *, deterministic: bool) -> jax.Array:
        h = self.attention(x, mask, rel_pos, rel_emb, deterministic=deterministic)
        h = self.dropout(self.attention_out(h), deterministic=deterministic)
        x = self.attention_norm(x + h)
        h = self.dropout(self.mlp(x, deterministic=deterministic), deterministic=deterministic)
        return self.mlp_norm(x + h)


class ConvLayer(nnx.Module):
    """`LN(residual + act(conv(embeddings)) masked) * mask`; kernel `[k, in/groups, out]`."""

    def __init__(self, cfg: DebertaConfig, *, rngs: nnx.Rngs):
        e, k, g = cfg.hidden_size, cfg.conv_kernel_size, cfg.conv_groups
        # torch Conv1d's default init is kaiming-uniform; HF does not re-initialise it.
        init = jax.nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform", in_axis=(0, 1))
        self.kernel = param(rngs, init, (k, e // g, e), (None, "conv_in", "conv_out"))
        self.bias = param(rngs, jax.nn.initializers.zeros, (e,), ("conv_out",))
        self.layer_norm = LayerNorm(
            e, eps=cfg.layer_norm_eps, dtype=cfg.activation_dtype, rngs=rngs
        )
        self.dropout = nnx.Dropout(cfg.hidden_dropout_prob, rngs=rngs)
        self.groups = g
        self.act = cfg.conv_act
        self.dtype = cfg.activation_dtype

    def __call__(self, embedded, residual, mask, *, deterministic: bool) -> jax.Array:
        k = self.kernel.shape[0]
        out = jax.lax.conv_general_dilated(
            embedded.astype(self.dtype),
            self.kernel[...].astype(self.dtype),
            window_strides=(1,),
            padding=[((k - 1) // 2, (k - 1) // 2)],
            dimension_numbers=("NWC", "WIO", "NWC"),
            feature_group_count=self.groups,
        )
        out = out + self.bias[...].astype(self.dtype)
        out = jnp.where(mask[..., None], out, 0)
        out = activation(self.act)(self.dropout(out, deterministic=deterministic))
        y = self.layer_norm(residual + out)
        return y * mask[..., None].astype(y.dtype)


class DebertaEmbeddings(nnx.Module):
    def __init__(self, cfg: DebertaConfig, *, rngs: nnx.Rngs):
        dt, std, d = cfg.activation_dtype, cfg.initializer_range, cfg.embed_dim
        kw = {"std": std, "dtype": dt, "rngs": rngs}
        self.word_embeddings = Embedding(cfg.vocab_size, d, ("vocab", "embed"), **kw)
        self.position_embeddings = (
            Embedding(cfg.max_position_embeddings, d, ("abspos_buckets", "embed"), **kw)
            if cfg.position_biased_input
            else None
        )
        # The token-type axis is small: unnamed (replicated) under every preset.
        self.token_type_embeddings = (
            Embedding(cfg.type_vocab_size, d, (None, "embed"), **kw)
            if cfg.type_vocab_size > 0
            else None
        )
        self.embed_proj = (
            dense(d, cfg.hidden_size, (None, "embed"), use_bias=False, **kw)
            if d != cfg.hidden_size
            else None
        )
        self.layer_norm = LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps, dtype=dt, rngs=rngs)
        self.dropout = nnx.Dropout(cfg.hidden_dropout_prob, rngs=rngs)

    def __call__(self, ids, token_type_ids, mask, *, deterministic: bool) -> jax.Array:
        x = self.word_embeddings(ids)
        if self.position_embeddings is not None:
            x = x + self.position_embeddings(jnp.arange(ids.shape[1])[None, :])
        if self.token_type_embeddings is not None:
            x = x + self.token_type_embeddings(token_type_ids)
        if self.embed_proj is not None:
            x = self.embed_proj(x)
        x = self.layer_norm(x)
        x = x * mask[..., None].astype(x.dtype)
        return self.dropout(x, deterministic=deterministic)


class DebertaForSequenceClassification(nnx.Module):
    """`embeddings`, `layers`, `rel_embeddings` (+ `rel_norm`), `conv`, `pooler`, `classifier`."""

    def __init__(self, cfg: DebertaConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        dt, std, e = cfg.activation_dtype, cfg.initializer_range, cfg.hidden_size
        self.embeddings = DebertaEmbeddings(cfg, rngs=rngs)
        self.layers = nnx.List([DebertaLayer(cfg, rngs=rngs) for _ in range(cfg.num_hidden_layers)])
        self.rel_embeddings = (
            Embedding(
                2 * cfg.att_span, e, ("relpos_buckets", "embed"), std=std, dtype=dt, rngs=rngs
            )
            if cfg.relative_attention
            else None
        )
        self.rel_norm = (
            LayerNorm(e, eps=cfg.layer_norm_eps, dtype=dt, rngs=rngs)
            if cfg.norm_rel_ebd == "layer_norm"
            else None
        )
        self.conv = ConvLayer(cfg, rngs=rngs) if cfg.conv_kernel_size > 0 else None
        self.pooler_dropout = nnx.Dropout(cfg.pooler_dropout, rngs=rngs)
        self.pooler = Pooler(e, cfg.pooler_hidden_act, std=std, dtype=dt, rngs=rngs)
        drop = cfg.hidden_dropout_prob if cfg.cls_dropout is None else cfg.cls_dropout
        self.dropout = nnx.Dropout(drop, rngs=rngs)
        self.classifier = classifier(e, cfg.num_labels, std=std, rngs=rngs)

    def _rel_embeddings(self):
        if self.rel_embeddings is None:
            return None
        table = self.rel_embeddings.embedding[...]
        return table if self.rel_norm is None else self.rel_norm(table)

    def encode(self, batch, deterministic: bool = True) -> jax.Array:
        """Last hidden states `[B, S, hidden]`."""
        cfg = self.cfg
        ids = jnp.asarray(batch["input_ids"])
        m = batch.get("attention_mask")
        mask = jnp.ones(ids.shape, bool) if m is None else jnp.asarray(m) > 0
        tt = batch.get("token_type_ids")
        tt = jnp.zeros(ids.shape, jnp.int32) if tt is None else jnp.asarray(tt)
        s = ids.shape[1]
        embedded = constrain(self.embeddings(ids, tt, mask, deterministic=deterministic), ACT)
        att_mask = (mask[:, None, :, None] & mask[:, None, None, :]).astype(bool)
        rel_pos = relative_positions(s, s, cfg.position_buckets, cfg.max_relative)
        rel_emb = self._rel_embeddings()
        x = embedded
        # `rel_pos` is a NumPy index table (static): closed over, not a remat argument.
        step = checkpointed(
            lambda layer, x, m, e: layer(x, m, rel_pos, e, deterministic=deterministic),
            cfg.remat_policy,
        )
        for i, layer in enumerate(self.layers):
            x = step(layer, x, att_mask, rel_emb)
            if i == 0 and self.conv is not None:
                x = self.conv(embedded, x, mask, deterministic=deterministic)
            x = constrain(x, ACT)
        return x

    def __call__(self, batch, *, deterministic: bool) -> jax.Array:
        first = self.encode(batch, deterministic=deterministic)[:, 0]
        pooled = self.pooler(self.pooler_dropout(first, deterministic=deterministic))
        pooled = self.dropout(pooled, deterministic=deterministic)
        return self.classifier(pooled.astype(jnp.float32))


def build(config: DebertaConfig, rngs: nnx.Rngs | int = 0) -> DebertaForSequenceClassification:
    if isinstance(rngs, int):
        rngs = nnx.Rngs(params=rngs, dropout=rngs + 1)
    return DebertaForSequenceClassification(config, rngs=rngs)
