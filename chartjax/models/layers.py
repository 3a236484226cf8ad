"""Shared T5 v1.1 building blocks (Flax NNX), numerically as flaxformer's T5.

Every parameter is created through `nnx.with_partitioning` with logical axis names (embed, mlp,
heads, kv, joined_kv, vocab, relpos_buckets, patch, abspos_buckets); `chartjax.sharding` maps
them to mesh axes. Kernels are stored 2-D `[in, out]` exactly as flaxformer's
`DenseGeneral(reshape_kernel=True)`, so T5X and HF checkpoints map one-to-one (HF only transposes).

Numerics (docs/models.md §7): RMSNorm in fp32, no 1/sqrt(d) scaling in attention (folded into the
query init), softmax in fp32, gated GELU with the tanh approximation.

Attention (every family: T5, Pix2Struct, DeBERTa, TAPAS, BART) goes through `attention_core`:
position terms (T5's relative-position bias, DeBERTa's c2p/p2c scores) are an additive float32
`bias`, padding and causality a boolean `mask` / `is_causal`. `attention_impl` (model_configs)
picks the computation:
- "dot_product" / "cudnn": `jax.nn.dot_product_attention(q, k, v, bias, mask, scale=...)` (T5:
  `scale=1.0`; BERT/BART: 1/sqrt(head_dim); DeBERTa: 1/sqrt(head_dim * (1 + #position terms)));
  the mask stays boolean and causal self-attention passes `is_causal=True` (cuDNN then skips the
  masked blocks). "dot_product" is `implementation=None`, which in jax 0.10 is always the XLA
  composite (on CPU `xla_attention_4d` computes that composite itself, un-vmapped: XLA:CPU
  runs JAX's vmapped form ~1.4x slower); "cudnn" asks for the fused kernel (GPU, bf16/fp16, head_dim % 8 == 0 and <= 256 on
  Hopper) and casts the bias to the activation dtype, as cuDNN adds it in that dtype.
- "einsum": the mask is folded into the bias as flaxformer does (`mask_to_bias`: NEG_INF = -1e10
  added to the logits), then `softmax(q.k [/ sqrt(d)] + bias) @ v` with two einsums.
Why a boolean mask and not the -1e10 bias in the fused path: the two differ only in fully masked
rows (padding queries, since T5/Pix2Struct mask queries and keys; an example whose keys are all
padding), and there both are finite and uniform. JAX's XLA path *replaces* masked logits by
-0.7 * float32 max (cuDNN adds -2**41 in bf16), so the row is exactly uniform over the keys;
flaxformer *adds* -1e10, which absorbs the logit (float32 spacing at 1e10 is 1024) and is uniform
while |logit + bias| < 512 and a rounding artefact beyond. Those rows feed only positions masked
downstream (padded keys, padded targets): only an input with no valid key at all (no EOS, no
[CLS], no patch; chartjax's tokenizers and patchifier never produce one) could carry one into a
loss. Partly masked rows: masked keys get probability exactly 0 either way, and the valid logits
are the same sums, so the paths agree to float32 rounding (tests/models/test_attention_impl.py:
<= 1e-5 in fp32 for every family; bit-identical in bf16 on CPU).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from chartjax.models.model_configs import check_attention_impl

# Activation constraints by logical names (models/t5 takes them from here); a no-op outside
# `chartjax.sharding.activate`. Imported, not looked up: it must work without chartjax.mesh.
from chartjax.sharding import constrain  # noqa: F401

Names = tuple[str | None, ...]
NEG_INF = -1e10  # flaxformer's mask bias: a fully masked row stays finite (uniform softmax)


def _param(rngs: nnx.Rngs, init, shape: Sequence[int], names: Names) -> nnx.Param:
    return nnx.Param(nnx.with_partitioning(init, names)(rngs.params(), tuple(shape), jnp.float32))


def _fan_in_normal(scale: float = 1.0):
    return jax.nn.initializers.variance_scaling(scale, "fan_in", "truncated_normal")


class RMSNorm(nnx.Module):
    """T5LayerNorm: `x * rsqrt(mean(x^2) + eps) * scale` in float32, cast back to `dtype`."""

    def __init__(self, dim: int, *, eps: float = 1e-6, dtype=jnp.float32, rngs: nnx.Rngs):
        self.scale = _param(rngs, jax.nn.initializers.ones, (dim,), ("embed",))
        self.eps = eps
        self.dtype = dtype

    def __call__(self, x: jax.Array) -> jax.Array:
        x32 = x.astype(jnp.float32)
        var = jnp.mean(jnp.square(x32), axis=-1, keepdims=True)
        y = x32 * jax.lax.rsqrt(var + self.eps) * self.scale[...]
        return y.astype(self.dtype)


def _dot_2d(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """`x [..., in] @ kernel [in, out]` as one 2-D GEMM over the flattened leading dims.

    Same products and sums as `jnp.dot` on the N-D array, but the kernel's gradient is then a
    single-contracting-dim `x2d.T @ g2d`: with the N-D form XLA:CPU transposes the output
    gradient (fused with the activation's backward, element by element) before that GEMM,
    which cost the MLP's backward ~40% on CPU (tools/bench/step.py's docstring)."""
    if x.ndim <= 2:
        return jnp.dot(x, kernel)
    y = jnp.dot(x.reshape(-1, x.shape[-1]), kernel)
    return y.reshape(*x.shape[:-1], kernel.shape[-1])


class Dense(nnx.Module):
    """Dense layer with a 2-D `[in, out]` kernel; no bias unless asked (only the patch projection)."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        names: Names,
        *,
        use_bias: bool = False,
        kernel_init=None,
        dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        init = kernel_init or _fan_in_normal()
        self.kernel = _param(rngs, init, (in_features, out_features), names)
        self.bias = (
            _param(rngs, jax.nn.initializers.zeros, (out_features,), (names[-1],))
            if use_bias
            else None
        )
        self.dtype = dtype

    def __call__(self, x: jax.Array) -> jax.Array:
        y = _dot_2d(x.astype(self.dtype), self.kernel[...].astype(self.dtype))
        if self.bias is not None:
            y = y + self.bias[...].astype(self.dtype)
        return y


class Embed(nnx.Module):
    """Embedding table `[num, features]`, init normal(`stddev`): 1.0 as flaxformer's token
    embedder, or a family's own (Gemma: HF's initializer_range)."""

    def __init__(
        self,
        num_embeddings: int,
        features: int,
        names: Names = ("vocab", "embed"),
        *,
        dtype=jnp.float32,
        stddev: float = 1.0,
        rngs: nnx.Rngs,
    ):
        init = jax.nn.initializers.normal(stddev=stddev)
        self.embedding = _param(rngs, init, (num_embeddings, features), names)
        self.dtype = dtype

    def __call__(self, ids: jax.Array) -> jax.Array:
        return jnp.take(self.embedding[...], ids, axis=0).astype(self.dtype)

    def attend(self, x: jax.Array) -> jax.Array:
        """Tied output projection (original T5): `x @ embedding.T` in float32."""
        return _dot_2d(x.astype(jnp.float32), self.embedding[...].T)


_ACTIVATIONS = {
    "gelu": lambda x: jax.nn.gelu(x, approximate=True),  # HF "gelu_new", flax nn.gelu default
    "relu": jax.nn.relu,
    "silu": jax.nn.silu,
    "linear": lambda x: x,
}


class MlpBlock(nnx.Module):
    """T5 MLP: `wo(prod_i act_i(wi_i x))`; ("gelu", "linear") is the v1.1 gated GELU."""

    def __init__(
        self,
        emb_dim: int,
        mlp_dim: int,
        activations: Sequence[str],
        *,
        dropout_rate: float,
        dtype,
        rngs: nnx.Rngs,
    ):
        for a in activations:
            if a not in _ACTIVATIONS:
                raise ValueError(f"mlp_activations: unknown activation {a!r}")
        self.activations = tuple(activations)
        if len(self.activations) not in (1, 2):
            raise ValueError("mlp_activations: one or two activations are supported")

        def make():
            return Dense(emb_dim, mlp_dim, ("embed", "mlp"), dtype=dtype, rngs=rngs)

        if len(self.activations) == 1:
            self.wi = make()
        else:
            self.wi_0 = make()
            self.wi_1 = make()
        self.wo = Dense(mlp_dim, emb_dim, ("mlp", "embed"), dtype=dtype, rngs=rngs)
        self.dropout = nnx.Dropout(dropout_rate, rngs=rngs)

    def __call__(self, x: jax.Array, *, deterministic: bool) -> jax.Array:
        if len(self.activations) == 1:
            h = _ACTIVATIONS[self.activations[0]](self.wi(x))
        else:
            h = _ACTIVATIONS[self.activations[0]](self.wi_0(x))
            h = h * _ACTIVATIONS[self.activations[1]](self.wi_1(x))
        h = self.dropout(h, deterministic=deterministic)
        return self.wo(h)


def relative_position_buckets(
    q_len: int, k_len: int, *, bidirectional: bool, num_buckets: int, max_distance: int
) -> np.ndarray:
    """T5 relative-position buckets `[q_len, k_len]` (static NumPy, as flaxformer computes them)."""
    rel = np.arange(k_len)[None, :] - np.arange(q_len)[:, None]  # memory - context
    n = -rel
    ret = np.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        ret += (n < 0).astype(n.dtype) * num_buckets
        n = np.abs(n)
    else:
        n = np.maximum(n, 0)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    with np.errstate(divide="ignore"):
        large = max_exact + (
            np.log(n.astype(np.float32) / max_exact + np.finfo(np.float32).eps)
            / np.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).astype(np.int32)
    large = np.minimum(large, num_buckets - 1)
    return (ret + np.where(is_small, n, large)).astype(np.int32)


class RelativePositionBias(nnx.Module):
    """One relative-position table per stack: `rel_embedding [heads, buckets]` (T5X layout)."""

    def __init__(
        self,
        num_heads: int,
        *,
        num_buckets: int,
        max_distance: int,
        bidirectional: bool,
        rngs: nnx.Rngs,
    ):
        init = jax.nn.initializers.variance_scaling(1.0, "fan_avg", "uniform")
        self.rel_embedding = _param(
            rngs, init, (num_heads, num_buckets), ("heads", "relpos_buckets")
        )
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional

    def buckets(self, q_len: int, k_len: int) -> np.ndarray:
        return relative_position_buckets(
            q_len,
            k_len,
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )

    def __call__(self, q_len: int, k_len: int) -> jax.Array:
        """Bias `[1, heads, q_len, k_len]` in float32."""
        table = self.rel_embedding[...]
        return jnp.take(table, jnp.asarray(self.buckets(q_len, k_len)), axis=1)[None]

    def row(self, index: jax.Array, k_len: int) -> jax.Array:
        """Bias of the single query at position `index` (traced) over `k_len` keys: `[1,H,1,K]`."""
        rows = jnp.asarray(self.buckets(k_len, k_len))
        bucket_row = jax.lax.dynamic_index_in_dim(rows, index, axis=0, keepdims=False)
        return jnp.take(self.rel_embedding[...], bucket_row, axis=1)[None, :, None, :]


def mask_to_bias(mask: jax.Array) -> jax.Array:
    """Boolean mask broadcastable to `[B, H, Q, K]` -> additive float32 bias."""
    return jnp.where(mask, 0.0, NEG_INF).astype(jnp.float32)


def fold_mask(
    bias: jax.Array | None,
    mask: jax.Array | None,
    *,
    is_causal: bool = False,
    q_len: int | None = None,
    k_len: int | None = None,
) -> jax.Array | None:
    """The einsum path's single additive bias: `mask_to_bias(mask [& causal]) + bias`.

    `is_causal` needs `q_len` and `k_len` (the lower-triangular `[Q, K]` mask is and-ed in)."""
    if is_causal:
        causal = jnp.tril(jnp.ones((q_len, k_len), bool))[None, None]
        mask = causal if mask is None else causal & mask
    if mask is None:
        return bias
    return mask_to_bias(mask) if bias is None else mask_to_bias(mask) + bias


def attention_inputs(impl: str, bias, mask, *, is_causal: bool = False, q_len=None, k_len=None):
    """`(bias, mask, is_causal)` as the layers of a stack take them: for "einsum" the mask is
    folded into one bias here, once per stack, instead of once per layer."""
    if impl == "einsum":
        return fold_mask(bias, mask, is_causal=is_causal, q_len=q_len, k_len=k_len), None, False
    return bias, mask, is_causal


def xla_attention_4d(q, k, v, bias, mask, *, scale: float, is_causal: bool) -> jax.Array:
    """`jax.nn.dot_product_attention(implementation=None)`'s XLA composite (jax 0.10), written
    on the 4-D `[B, H, Q, K]` logits: the same einsums, scale, bias, masked logits replaced by
    -0.7 * float32 max, float32 softmax and probabilities cast to `v`'s dtype.

    JAX's version vmaps over a head-group axis; on CPU XLA then fuses the softmax backward into
    a GEMM and transposes the `[B, H, Q, K]` probabilities around the backward GEMMs, which made
    one encoder layer's attention ~1.4x slower (tools/bench/step.py's docstring). Outputs equal
    it to float rounding (tests/models/test_attention_impl.py)."""
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32)
    logits = logits * jnp.float32(scale)
    if bias is not None:
        logits = (logits + bias).astype(jnp.float32)
    if is_causal:
        causal = jnp.tril(jnp.ones((q.shape[1], k.shape[1]), bool))[None, None]
        mask = causal if mask is None else mask & causal
    if mask is not None:
        logits = jnp.where(mask, logits, jnp.float32(-0.7 * np.finfo(np.float32).max))
    probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, v)


def attention_core(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    bias: jax.Array | None,
    mask: jax.Array | None,
    *,
    impl: str,
    dtype,
    is_causal: bool = False,
    logits_divisor: float | None = None,
    dropout: nnx.Dropout | None = None,
    deterministic: bool = True,
) -> jax.Array:
    """`softmax(q.k / logits_divisor + bias, masked) @ v` per head -> `[B, Q, H, D]` in `dtype`.

    `q [B, Q, H, D]`, `k, v [B, K, H, D]`; `bias` float32 broadcastable to `[B, H, Q, K]`, `mask`
    bool broadcastable to it (True = attend), either may be None; `logits_divisor` None = no
    scaling (T5), else sqrt(head_dim) (BERT, BART). The logits and the softmax are float32.
    `dropout` (on the probabilities) forces the einsum path when it is active."""
    dropping = dropout is not None and dropout.rate > 0 and not deterministic
    if impl == "einsum" or dropping:
        bias = fold_mask(bias, mask, is_causal=is_causal, q_len=q.shape[1], k_len=k.shape[1])
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32)
        if logits_divisor is not None:
            logits = logits / logits_divisor
        weights = jax.nn.softmax(logits if bias is None else logits + bias, axis=-1)
        if dropout is not None:
            weights = dropout(weights, deterministic=deterministic)
        return jnp.einsum("bhqk,bkhd->bqhd", weights.astype(dtype), v.astype(dtype))
    check_attention_impl("attention_core", impl)
    q, k, v = q.astype(dtype), k.astype(dtype), v.astype(dtype)
    if impl == "cudnn" and bias is not None:
        bias = bias.astype(dtype)  # cuDNN adds the bias in the activation dtype
    if impl == "dot_product" and jax.default_backend() == "cpu":
        scale = 1.0 if logits_divisor is None else 1.0 / logits_divisor
        return xla_attention_4d(q, k, v, bias, mask, scale=scale, is_causal=is_causal)
    return jax.nn.dot_product_attention(
        q,
        k,
        v,
        bias=bias,
        mask=mask,
        scale=1.0 if logits_divisor is None else 1.0 / logits_divisor,
        is_causal=is_causal,
        implementation="cudnn" if impl == "cudnn" else None,
    )


class Attention(nnx.Module):
    """Multi-head dot-product attention without 1/sqrt(d) scaling (T5).

    Kernels: query/key/value `[embed, heads*head_dim]` (head-major), out `[heads*head_dim, embed]`.
    """

    def __init__(
        self,
        emb_dim: int,
        num_heads: int,
        head_dim: int,
        *,
        dropout_rate: float,
        dtype,
        attention_impl: str = "dot_product",
        rngs: nnx.Rngs,
    ):
        check_attention_impl("Attention", attention_impl)
        inner = num_heads * head_dim
        # flaxformer folds 1/sqrt(head_dim) into the query init instead of scaling the logits.
        q_init = _fan_in_normal(1.0 / head_dim)
        self.query = Dense(
            emb_dim, inner, ("embed", "joined_kv"), kernel_init=q_init, dtype=dtype, rngs=rngs
        )
        self.key = Dense(emb_dim, inner, ("embed", "joined_kv"), dtype=dtype, rngs=rngs)
        self.value = Dense(emb_dim, inner, ("embed", "joined_kv"), dtype=dtype, rngs=rngs)
        self.out = Dense(inner, emb_dim, ("joined_kv", "embed"), dtype=dtype, rngs=rngs)
        self.dropout = nnx.Dropout(dropout_rate, rngs=rngs)
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.dtype = dtype
        self.attention_impl = attention_impl

    def _split(self, x: jax.Array) -> jax.Array:
        return x.reshape(*x.shape[:-1], self.num_heads, self.head_dim)

    def project_kv(self, x_kv: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Keys and values `[B, K, H, D]` (used to fill the decoding caches)."""
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
        """Attention of `x_q [B, Q, E]` over projected `k, v`; `bias` float32 and `mask` bool,
        each broadcastable to `[B, H, Q, K]` or None (see `attention_core`)."""
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
            dropout=self.dropout,
            deterministic=deterministic,
        )
        return self.out(y.reshape(*y.shape[:2], self.num_heads * self.head_dim))

    def __call__(
        self,
        x_q: jax.Array,
        x_kv: jax.Array,
        bias: jax.Array | None,
        *,
        mask: jax.Array | None = None,
        is_causal: bool = False,
        deterministic: bool,
    ) -> jax.Array:
        k, v = self.project_kv(x_kv)
        return self.attend(
            x_q, k, v, bias, mask=mask, is_causal=is_causal, deterministic=deterministic
        )
