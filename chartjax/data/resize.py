"""TensorFlow's image resizing, in NumPy: the inputs stay what the official code fed its models.

The papers' code resizes with `tf.image.resize` (Pix2Struct: antialiased bilinear; the FigureQA
baselines: plain bilinear). The training path runs without TensorFlow (loader worker processes,
chartjax/data/loader.py), so the two kernels are written here in float32 as TF's C++ kernels
compute them: `bilinear` is `ResizeBilinear` with half-pixel centres, `antialiased` is
`ScaleAndTranslate` with the triangle kernel (rows first, then columns, each output a sum over
its span in order). PIL and OpenCV resample on other grids, so none of them would do; the tests
compare both with TensorFlow (tests/data/test_resize.py).
"""

from __future__ import annotations

import functools

import numpy as np

_F32 = np.float32


def aspect_size(height: int, width: int, target_h: int, target_w: int) -> tuple[int, int]:
    """The size `tf.image.resize(preserve_aspect_ratio=True)` gives: the image scaled by the
    smaller of the two ratios (float32), each side rounded half to even."""
    scale = min(_F32(target_h) / _F32(height), _F32(target_w) / _F32(width))
    return int(np.round(scale * _F32(height))), int(np.round(scale * _F32(width)))


@functools.lru_cache(maxsize=256)
def _bilinear_axis(in_size: int, out_size: int):
    scale = _F32(in_size) / _F32(out_size)
    x = (np.arange(out_size, dtype=_F32) + _F32(0.5)) * scale - _F32(0.5)
    floor = np.floor(x)
    lower = np.maximum(floor, 0).astype(np.int64)
    upper = np.minimum(np.ceil(x), in_size - 1).astype(np.int64)
    return lower, upper, (x - floor).astype(_F32)


def bilinear(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """`tf.image.resize(image, size, "bilinear")` (no antialiasing): float32 `[h, w, C]`."""
    img = np.asarray(image, _F32)
    h, w = int(size[0]), int(size[1])
    if img.shape[:2] == (h, w):
        return img
    ly, uy, dy = _bilinear_axis(img.shape[0], h)
    lx, ux, dx = _bilinear_axis(img.shape[1], w)
    dx = dx[None, :, None]
    top, bottom = img[ly], img[uy]
    top = top[:, lx] + (top[:, ux] - top[:, lx]) * dx
    bottom = bottom[:, lx] + (bottom[:, ux] - bottom[:, lx]) * dx
    return top + (bottom - top) * dy[:, None, None]


@functools.lru_cache(maxsize=256)
def _spans(in_size: int, out_size: int):
    """ScaleAndTranslate's spans: (sources [out, taps], weights [out, taps]) of the triangle
    kernel, widened by 1/scale when shrinking and renormalized where the image edge cuts it;
    taps that are zero for every output are dropped (adding 0 changes no sum)."""
    inv_scale = _F32(1) / (_F32(out_size) / _F32(in_size))
    kernel_scale = max(inv_scale, _F32(1))
    span = min(2 * int(np.ceil(kernel_scale)) + 1, in_size)
    sample = (np.arange(out_size, dtype=_F32) + _F32(0.5)) * inv_scale
    start = np.ceil(sample - kernel_scale - _F32(0.5)).astype(np.int64)
    end = np.floor(sample + kernel_scale - _F32(0.5)).astype(np.int64)
    start = np.clip(start, 0, in_size - 1)
    end = np.clip(end, 0, in_size - 1) + 1
    source = start[:, None] + np.arange(span)
    pos = (source.astype(_F32) + _F32(0.5) - sample[:, None]) * (_F32(1) / kernel_scale)
    weights = np.maximum(_F32(1) - np.abs(pos), _F32(0))
    weights[source >= end[:, None]] = 0
    total = weights.sum(axis=1, dtype=_F32)  # a span has at most a few taps: order-free here
    ok = np.abs(total) >= 1000 * np.finfo(_F32).tiny
    weights[ok] *= (_F32(1) / total[ok])[:, None]
    used = np.flatnonzero(weights.any(axis=0))
    taps = int(used[-1]) + 1 if len(used) else 1
    return np.minimum(source, in_size - 1)[:, :taps], weights.astype(_F32)[:, :taps]


def _gather(img: np.ndarray, axis: int, in_size: int, out_size: int) -> np.ndarray:
    """One axis of the resize: each output a weighted sum over its span, in span order as TF
    accumulates; two preallocated buffers (this is the hot loop of Pix2Struct's inputs)."""
    source, weights = _spans(in_size, out_size)
    if axis == 1 and img.ndim == 3:
        return _gather_columns(img, source, weights)
    shape = list(img.shape)
    shape[axis] = out_size
    out, term = np.empty(shape, _F32), np.empty(shape, _F32)
    bshape = (-1,) + (1,) * (img.ndim - 1 - axis)
    for k in range(weights.shape[1]):
        np.take(img, source[:, k], axis=axis, out=term if k else out, mode="clip")
        if k:
            term *= weights[:, k].reshape(bshape)
            out += term
        else:
            out *= weights[:, 0].reshape(bshape)
    return out


def _gather_columns(img: np.ndarray, source: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """`_gather` along the columns of `[h, w, C]`, on the `[h, w*C]` view with one index per
    float: NumPy's take then copies 4-byte items directly instead of a memmove per C-float
    pixel (~1.2x the column pass). Same products and sums, in the same order."""
    h, w, c = img.shape
    flat = np.ascontiguousarray(img).reshape(h, w * c)
    n = source.shape[0] * c
    out, term = np.empty((h, n), _F32), np.empty((h, n), _F32)
    channel = np.arange(c)
    for k in range(weights.shape[1]):
        idx = (source[:, k, None] * c + channel).reshape(-1)
        np.take(flat, idx, axis=1, out=term if k else out, mode="clip")  # "raise" buffers `out`
        wk = np.repeat(weights[:, k], c)
        if k:
            term *= wk
            out += term
        else:
            out *= wk
    return out.reshape(h, source.shape[0], c)


def antialiased(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """`tf.image.resize(image, size, "bilinear", antialias=True)`: float32 `[h, w, C]`."""
    img = np.asarray(image, _F32)
    h, w = int(size[0]), int(size[1])
    rows = _gather(img, 0, img.shape[0], h)
    return _gather(rows, 1, img.shape[1], w)


def resize(image: np.ndarray, size: tuple[int, int], antialias: bool = False) -> np.ndarray:
    return antialiased(image, size) if antialias else bilinear(image, size)


def crop_or_pad(image: np.ndarray, height: int, width: int, centre: bool = True) -> np.ndarray:
    """`tf.image.resize_with_crop_or_pad` (centre) or `pad_to_bounding_box(0, 0)` (top left)."""
    h, w = image.shape[:2]
    out = np.zeros((height, width, *image.shape[2:]), image.dtype)
    cy, cx = (max(h - height, 0) // 2, max(w - width, 0) // 2) if centre else (0, 0)
    py, px = (max(height - h, 0) // 2, max(width - w, 0) // 2) if centre else (0, 0)
    ch, cw = min(h, height), min(w, width)
    out[py : py + ch, px : px + cw] = image[cy : cy + ch, cx : cx + cw]
    return out


def to_uint8(image: np.ndarray) -> np.ndarray:
    """Rounded half to even and clipped, as `tf.cast(tf.clip_by_value(tf.round(x), 0, 255))`."""
    return np.clip(np.round(image), 0, 255).astype(np.uint8)
