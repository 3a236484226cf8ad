"""Frozen base weights stored in fewer bytes under LoRA (`LoraConfig.base_dtype`, models/lora.py):
the memory of a frozen model is its weights, so a PaliGemma 2 28B, 111 GB in float32, fits
one 80 GB GPU for LoRA only with its base stored smaller (QLoRA's idea, Dettmers et al.
2023, arXiv 2305.14314, here with int8 rather than NF4).

- "float32": as trained (the default);
- "bfloat16": the kernel cast to bf16 (half the bytes); the matmul runs in the layer's dtype;
- "int8": symmetric absmax quantization per output channel: `scale[j] = max_i |W[i, j]| / 127`,
  `q = round(W / scale)` (|W - q * scale| <= scale / 2 per element). The layer keeps `kernel`
  int8 `[in, out]` and `kernel_scale` float32 `[out]` (logical axis the kernel's output axis,
  so every sharding preset places it); its output is `(x @ q) * scale`, the same as
  `x @ (q * scale)`: q converts exactly to bf16 / fp32 (|q| <= 127) and the scale is applied to
  the `[..., out]` product, not to a dequantized copy of the kernel; the backward pass
  converts q again rather than keep the forward's copy (`int8_matmul`'s own VJP).

Such kernels never train (trainable.labels refuses an int8 kernel or its scale marked to train;
the train step asks for no gradient of them). They save and restore in checkpoints as they are
(Orbax writes int8 arrays); `lora.merge` / `lora.strip` turn them back into float32 kernels
(dequantized, then merged), so exports and converters see a normal float model. Base weights
loaded from a float checkpoint (HF, T5X, chartjax) are quantized after loading, on the host:
`like_model` (called by init_checkpoint.pretrained_state).

Hand-written: no quantization library for Flax NNX is installed here (qwix, aqt; Flax 0.12 has
none of its own), and what LoRA needs is this small: storage and a dequantizing matmul, no
quantized training, no calibration.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from chartjax.models.layers import Dense, _dot_2d

BASE_DTYPES = ("float32", "bfloat16", "int8")
SCALE = "kernel_scale"  # the int8 kernel's per-output-channel scale, beside `kernel`
QMAX = 127  # symmetric: -128 is never used, so q and -q are both representable


def quantize(w):
    """`(q int8, scale float32 [out])` of a kernel `w [in, out]` (NumPy in, NumPy out: the host
    path after loading a checkpoint; jax arrays otherwise). A zero column gets scale 1, q 0."""
    xp = np if isinstance(w, np.ndarray) else jnp
    w = w.astype(xp.float32)
    absmax = xp.max(xp.abs(w), axis=0)
    # Times the float32 1/127, not divided by 127: XLA may turn a division by a constant
    # into that product, and NumPy (the loading path) must round the same way.
    scale = xp.where(absmax > 0, absmax * np.float32(1 / QMAX), 1.0).astype(xp.float32)
    q = xp.clip(xp.round(w / scale), -QMAX, QMAX).astype(xp.int8)
    return q, scale


def dequantize(q, scale) -> jax.Array:
    """The float32 kernel `q * scale` (per output channel)."""
    return q.astype(jnp.float32) * scale.astype(jnp.float32)


@jax.custom_vjp
def int8_matmul(x: jax.Array, q: jax.Array, scale: jax.Array) -> jax.Array:
    """`(x @ q) * scale` in x's dtype, for a frozen int8 kernel `q [in, out]`. Its own VJP keeps
    only `q` and `scale` (the stored parameters themselves) for the backward pass and converts
    `q` again there: left to autodiff, every layer's converted copy of its kernel (2 bytes per
    value in bf16, 52 GB for the 28B) would be saved from the forward to the backward pass,
    more than the int8 kernels save. No cotangent for `q` or `scale`: they never train."""
    return _dot_2d(x, q.astype(x.dtype)) * scale.astype(x.dtype)


def _int8_fwd(x, q, scale):
    return int8_matmul(x, q, scale), (q, scale)


def _int8_bwd(res, g):
    q, scale = res
    dx = _dot_2d(g * scale.astype(g.dtype), q.astype(g.dtype).T)
    return dx, None, None


int8_matmul.defvjp(_int8_fwd, _int8_bwd)


def matmul(x: jax.Array, layer: Dense) -> jax.Array:
    """`x @ W (+ b)` of a Dense whose kernel may be stored in a base dtype, computed in the
    layer's dtype; an int8 kernel's scale multiplies the product (see the module docstring)."""
    scale = getattr(layer, SCALE, None)
    if scale is None:
        y = _dot_2d(x.astype(layer.dtype), layer.kernel[...].astype(layer.dtype))
    else:
        y = int8_matmul(x.astype(layer.dtype), layer.kernel[...], scale[...])
    if layer.bias is not None:
        y = y + layer.bias[...].astype(layer.dtype)
    return y


class QuantizedDense(Dense):
    """A frozen Dense whose kernel is stored in a base dtype ("bfloat16" or "int8"), made from a
    float Dense by `convert`; not adapted (a LoraDense keeps its base kernel the same way)."""

    def __init__(self, base: Dense, dtype: str):
        # No Dense.__init__: the base layer's variables are taken over, the kernel converted.
        take_over(self, base, dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        return matmul(x, self)


def take_over(layer: Dense, base: Dense, dtype: str) -> None:
    """Gives `layer` (a Dense subclass built without Dense.__init__) `base`'s kernel, bias and
    dtype, the kernel stored in `dtype` (int8 adds its `kernel_scale`; float32 keeps it as is)."""
    layer.kernel, layer.bias, layer.dtype = base.kernel, base.bias, base.dtype
    if dtype != "float32":
        layer.kernel, scale = convert(base.kernel, dtype)
        if scale is not None:
            layer.kernel_scale = scale


def convert(kernel: nnx.Param, dtype: str) -> tuple[nnx.Param, nnx.Param | None]:
    """A float kernel Param stored in `dtype`: (kernel, None) for float dtypes, (int8 kernel,
    scale) for "int8"; the logical axes kept (the scale takes the output axis)."""
    if dtype not in BASE_DTYPES:
        raise ValueError(f"base dtype must be one of {BASE_DTYPES}, not {dtype!r}")
    w = kernel[...]
    if dtype != "int8":
        return kernel.replace(w.astype(dtype)), None
    q, scale = quantize(w)
    meta = kernel.get_metadata()
    names = meta.get("out_sharding") or (None, None)
    return kernel.replace(q), nnx.Param(scale, **{**meta, "out_sharding": (names[1],)})


def float_kernel(layer: Dense):
    """The layer's kernel as float32 (dequantized, or cast); for an abstract layer (eval_shape)
    its float32 ShapeDtypeStruct."""
    k = layer.kernel.get_value()
    if isinstance(k, jax.ShapeDtypeStruct):
        return jax.ShapeDtypeStruct(k.shape, jnp.float32)
    scale = getattr(layer, SCALE, None)
    return k.astype(jnp.float32) if scale is None else dequantize(k, scale[...])


def plain(layer: Dense, kernel=None) -> Dense:
    """A plain float32 Dense with `layer`'s bias and `kernel` (default: `float_kernel(layer)`),
    the kernel's logical axes kept."""
    d_in, d_out = layer.kernel.shape
    names = layer.kernel.get_metadata().get("out_sharding") or (None, None)
    out = nnx.eval_shape(
        lambda: Dense(
            d_in,
            d_out,
            tuple(names),
            use_bias=layer.bias is not None,
            dtype=layer.dtype,
            rngs=nnx.Rngs(0),
        )
    )
    out.kernel = layer.kernel.replace(float_kernel(layer) if kernel is None else kernel)
    out.bias = layer.bias
    return out


def like_model(params: dict, abstract: dict) -> dict:
    """`params` (float base weights read from a checkpoint, a pure dict of host arrays) with
    every kernel the model (`abstract`: its parameters' ShapeDtypeStructs) stores as int8
    quantized here, on the host, into `kernel` + `kernel_scale`; the other leaves as they are
    (a bfloat16 place is cast when the state is built). Places that already hold an int8 kernel
    (a run's own checkpoint) are left alone."""
    if not isinstance(abstract, dict) or not isinstance(params, dict):
        return params
    out = {k: like_model(params[k], abstract[k]) if k in abstract else v for k, v in params.items()}
    if SCALE in abstract and SCALE not in params and "kernel" in params:
        w = params["kernel"]
        if not jnp.issubdtype(w.dtype, jnp.integer):
            out["kernel"], out[SCALE] = quantize(np.asarray(jax.device_get(w), np.float32))
    return out
