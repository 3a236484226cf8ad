"""Post-LN BERT-style building blocks (Flax NNX) shared by TAPAS, DeBERTa, BART and the
Chart2text / Field-Infuse records models.

`LayerNorm` (torch's, fp32), biased `dense` with HF's normal(std) init, `Embedding`, multi-head
`Attention` with biases and 1/sqrt(head_dim) scaling, `FeedForward`, the post-LN `EncoderLayer`,
the `Pooler` and `classifier` heads, and HF activation names. layers.py holds the T5 (RMSNorm,
bias-free) versions; both go through `layers.attention_core` and `layers.Dense`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.models.layers import Dense, attention_core, attention_inputs, mask_to_bias
from chartjax.models.model_configs import check_attention_impl

Names = tuple[str | None, ...]

# HF ACT2FN names -> JAX. "gelu" is the exact (erf) GELU of torch; the tanh forms are separate.
_ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_new": lambda x: jax.nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "relu": jax.nn.relu,
    "silu": jax.nn.silu,
    "swish": jax.nn.silu,
    "tanh": jnp.tanh,
}
SUPPORTED_ACTIVATIONS = tuple(sorted(_ACTIVATIONS))


def activation(name: str) -> Callable[[jax.Array], jax.Array]:
    if name not in _ACTIVATIONS:
        raise ValueError(f"activation {name!r} is not supported (have {SUPPORTED_ACTIVATIONS})")
    return _ACTIVATIONS[name]


def check_activation(field: str, name) -> None:
    """ValueError naming the config `field` when `name` is not a supported activation."""
    if name not in _ACTIVATIONS:
        raise ValueError(f"{field}={name!r} is not supported (have {SUPPORTED_ACTIVATIONS})")


def param(rngs: nnx.Rngs, init, shape: Sequence[int], names: Names) -> nnx.Param:
    return nnx.Param(nnx.with_partitioning(init, names)(rngs.params(), tuple(shape), jnp.float32))


def dense(
    in_features: int,
    out_features: int,
    names: Names,
    *,
    std: float,
    dtype,
    rngs: nnx.Rngs,
    use_bias: bool = True,
) -> Dense:
    """A 2-D `[in, out]` Dense (layers.Dense) with HF's normal(std) init and zero bias."""
    init = jax.nn.initializers.normal(stddev=std)
    return Dense(
        in_features,
        out_features,
        names,
        use_bias=use_bias,
        kernel_init=init,
        dtype=dtype,
        rngs=rngs,
    )


class LayerNorm(nnx.Module):
    """torch LayerNorm: `(x - mean) * rsqrt(var + eps) * scale + bias` in fp32, cast to `dtype`."""

    def __init__(self, dim: int, *, eps: float, dtype=jnp.float32, rngs: nnx.Rngs):
        self.scale = param(rngs, jax.nn.initializers.ones, (dim,), ("embed",))
        self.bias = param(rngs, jax.nn.initializers.zeros, (dim,), ("embed",))
        self.eps = eps
        self.dtype = dtype

    def __call__(self, x: jax.Array) -> jax.Array:
        x32 = x.astype(jnp.float32)
        mean = jnp.mean(x32, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x32 - mean), axis=-1, keepdims=True)
        y = (x32 - mean) * jax.lax.rsqrt(var + self.eps) * self.scale[...] + self.bias[...]
        return y.astype(self.dtype)


class Embedding(nnx.Module):
    """Lookup table `[num, features]`, HF init normal(std)."""

    def __init__(self, num: int, features: int, names: Names, *, std: float, dtype, rngs: nnx.Rngs):
        init = jax.nn.initializers.normal(stddev=std)
        self.embedding = param(rngs, init, (num, features), names)
        self.dtype = dtype

    def __call__(self, ids: jax.Array) -> jax.Array:
        return jnp.take(self.embedding[...], ids, axis=0).astype(self.dtype)

    def attend(self, x: jax.Array) -> jax.Array:
        """Tied output projection `x @ embedding.T` in fp32."""
        return jnp.dot(x.astype(jnp.float32), self.embedding[...].T)


class Attention(nnx.Module):
    """Multi-head attention with biases and 1/sqrt(head_dim) scaling (BERT, BART).

    Kernels: query/key/value `[embed, heads*head_dim]` (head-major), out `[heads*head_dim, embed]`.
    The core is `layers.attention_core` (`attention_impl`: "dot_product" | "cudnn" | "einsum").
    """

    def __init__(
        self,
        emb_dim: int,
        num_heads: int,
        *,
        dropout_rate: float,
        std: float,
        dtype,
        attention_impl: str = "dot_product",
        rngs: nnx.Rngs,
    ):
        check_attention_impl("Attention", attention_impl)
        if emb_dim % num_heads:
            raise ValueError(f"hidden size {emb_dim} is not a multiple of {num_heads} heads")
        kw = {"std": std, "dtype": dtype, "rngs": rngs}
        self.query = dense(emb_dim, emb_dim, ("embed", "joined_kv"), **kw)
        self.key = dense(emb_dim, emb_dim, ("embed", "joined_kv"), **kw)
        self.value = dense(emb_dim, emb_dim, ("embed", "joined_kv"), **kw)
        self.out = dense(emb_dim, emb_dim, ("joined_kv", "embed"), **kw)
        self.dropout = nnx.Dropout(dropout_rate, rngs=rngs)
        self.num_heads = num_heads
        self.head_dim = emb_dim // num_heads
        self.dtype = dtype
        self.attention_impl = attention_impl

    def _split(self, x: jax.Array) -> jax.Array:
        return x.reshape(*x.shape[:-1], self.num_heads, self.head_dim)

    def project_kv(self, x_kv: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Keys and values `[B, K, H, D]` (also used to fill decoding caches)."""
        return self._split(self.key(x_kv)), self._split(self.value(x_kv))

    def attend(
        self,
        x_q: jax.Array,
        k: jax.Array,
        v: jax.Array,
        bias: jax.Array | None,
        *,
        mask: jax.Array | None = None,
        is_causal: bool = False,
        deterministic: bool,
    ) -> jax.Array:
        """`x_q [B, Q, E]` over projected `k, v` -> `[B, Q, E]`; `bias` fp32 and `mask` bool, each
        broadcastable to `[B, H, Q, K]` or None."""
        q = self._split(self.query(x_q))
        y = attention_core(
            q,
            k,
            v,
            bias,
            mask,
            impl=self.attention_impl,
            dtype=self.dtype,
            is_causal=is_causal,
            logits_divisor=math.sqrt(self.head_dim),
            dropout=self.dropout,
            deterministic=deterministic,
        )
        return self.out(y.reshape(*y.shape[:2], self.num_heads * self.head_dim))

    def __call__(self, x_q, x_kv, bias, *, mask=None, deterministic: bool) -> jax.Array:
        return self.attend(
            x_q, *self.project_kv(x_kv), bias, mask=mask, deterministic=deterministic
        )


class FeedForward(nnx.Module):
    """`wo(dropout(act(wi x)))` with biases (BERT intermediate/output dense, BART fc1/fc2)."""

    def __init__(
        self,
        emb_dim: int,
        mlp_dim: int,
        act: str,
        *,
        inner_dropout_rate: float,
        std: float,
        dtype,
        rngs: nnx.Rngs,
    ):
        self.wi = dense(emb_dim, mlp_dim, ("embed", "mlp"), std=std, dtype=dtype, rngs=rngs)
        self.wo = dense(mlp_dim, emb_dim, ("mlp", "embed"), std=std, dtype=dtype, rngs=rngs)
        self.act = act
        activation(act)
        self.dropout = nnx.Dropout(inner_dropout_rate, rngs=rngs)

    def __call__(self, x: jax.Array, *, deterministic: bool) -> jax.Array:
        h = activation(self.act)(self.wi(x))
        return self.wo(self.dropout(h, deterministic=deterministic))


class EncoderLayer(nnx.Module):
    """Post-LN layer: `LN(x + attn(x))`, then `LN(h + ffn(h))` (BERT/TAPAS, BART encoder)."""

    def __init__(
        self,
        emb_dim: int,
        num_heads: int,
        mlp_dim: int,
        act: str,
        *,
        eps: float,
        dropout_rate: float,
        attention_dropout_rate: float,
        activation_dropout_rate: float = 0.0,
        std: float,
        dtype,
        attention_impl: str = "dot_product",
        rngs: nnx.Rngs,
    ):
        self.attention = Attention(
            emb_dim,
            num_heads,
            dropout_rate=attention_dropout_rate,
            std=std,
            dtype=dtype,
            attention_impl=attention_impl,
            rngs=rngs,
        )
        self.attention_norm = LayerNorm(emb_dim, eps=eps, dtype=dtype, rngs=rngs)
        self.mlp = FeedForward(
            emb_dim,
            mlp_dim,
            act,
            inner_dropout_rate=activation_dropout_rate,
            std=std,
            dtype=dtype,
            rngs=rngs,
        )
        self.mlp_norm = LayerNorm(emb_dim, eps=eps, dtype=dtype, rngs=rngs)
        self.dropout = nnx.Dropout(dropout_rate, rngs=rngs)

    def __call__(
        self, x: jax.Array, bias: jax.Array | None, *, mask=None, deterministic: bool
    ) -> jax.Array:
        h = self.attention(x, x, bias, mask=mask, deterministic=deterministic)
        x = self.attention_norm(x + self.dropout(h, deterministic=deterministic))
        h = self.mlp(x, deterministic=deterministic)
        return self.mlp_norm(x + self.dropout(h, deterministic=deterministic))


def key_padding_bias(mask: jax.Array) -> jax.Array:
    """`mask [B, K]` bool -> additive fp32 bias `[B, 1, 1, K]` (queries are not masked, as HF)."""
    return mask_to_bias(mask[:, None, None, :])


def key_padding_inputs(impl: str, mask: jax.Array) -> tuple[jax.Array | None, jax.Array | None]:
    """`(bias, mask)` of a key-padding `mask [B, K]` for the layers: the boolean `[B, 1, 1, K]`
    mask, or for "einsum" the additive `key_padding_bias` (queries are not masked, as HF)."""
    bias, m, _ = attention_inputs(impl, None, mask[:, None, None, :])
    return bias, m


def num_labels_from_hf(hf: dict) -> int:
    """HF stores `id2label`, not `num_labels`, in config.json."""
    if hf.get("id2label"):
        return len(hf["id2label"])
    return int(hf.get("num_labels", 2))


def refuse(where: str, field: str, value, why: str) -> None:
    raise ValueError(f"{where}: {field}={value!r} is not supported: {why}")


class Pooler(nnx.Module):
    """`act(dense(x[:, 0]))` (BERT/TAPAS: tanh; DeBERTa's ContextPooler: pooler_hidden_act)."""

    def __init__(self, dim: int, act: str, *, std: float, dtype, rngs: nnx.Rngs):
        self.dense = dense(dim, dim, ("embed", "mlp"), std=std, dtype=dtype, rngs=rngs)
        self.act = act
        activation(act)

    def __call__(self, first_token: jax.Array) -> jax.Array:
        return activation(self.act)(self.dense(first_token))


def classifier(dim: int, num_labels: int, *, std: float, rngs: nnx.Rngs) -> Dense:
    """The label projection, in fp32 (the labels axis is small: unnamed, replicated)."""
    return dense(dim, num_labels, ("mlp", None), std=std, dtype=jnp.float32, rngs=rngs)
