"""TensorFlow's image resizing, in NumPy: the inputs stay what the official code fed its models.

The papers' code resizes with `tf.image.resize` (Pix2Struct: antialiased bilinear; the FigureQA
baselines: plain bilinear). The training path runs without TensorFlow (loader worker processes,
chartjax/data/loader.py), so the two kernels are written here in float32 as TF's C++ kernels
compute them: `bilinear` is `ResizeBilinear` with half-pixel centres, `antialiased` is
`ScaleAndTranslate` with the triangle kernel (rows first, then columns, each output a sum over
its span in order). PIL and OpenCV resample on other grids, so none of them would do; the tests
compare both with TensorFlow (tests/data/test_patches.py).

`antialiased` computes its output rows in blocks (each block's rows pass, then its columns pass
while the block is in cache) and, for large images, in contiguous shares of the rows on several
threads (`set_threads`; default every usable core, or the CHARTJAX_RESIZE_THREADS environment
variable): NumPy's `take` and in-place arithmetic release the GIL. Every output element is
computed by the same operations in the same order as whole-image passes, so the output is
bit-identical whatever the blocks and threads (tests/data/test_resize.py). Loader worker
processes each hold a core already and set one thread (chartjax/data/loader.py).
"""

from __future__ import annotations

import concurrent.futures
import functools
import math
import os
import threading

import numpy as np

_F32 = np.float32

# Output rows are computed in blocks of about this many floats a row buffer: the rows pass's
# result is still in cache when the columns pass reads it, and each tap's products stay there
# (2-core EPYC, 1 MiB L2 a core, malloc kept: 1600x1200 -> 624x832 on one thread 18.6 -> 10.5 ms;
# whole-image passes as before 18.2 ms; small images are one block, as fast as before).
BLOCK_FLOATS = 1 << 18
# A resize splits over threads only with at least this many floats a thread. On the 2 idle
# cores two threads paid from 180K floats (240x180 -> 208x288: 0.57 -> 0.47 ms), but with the
# other core busy they cost 3-10% at any size; so charts up to 240x180 at 512 patches (380K)
# stay on one thread, 800x600 at 2048 patches (1.56M) takes two (idle: 4.2 -> 2.5 ms).
MIN_FLOATS_PER_THREAD = 1 << 18


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_threads = int(os.environ.get("CHARTJAX_RESIZE_THREADS") or 0) or _usable_cores()
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def set_threads(n: int | None = None) -> None:
    """Threads of one antialiased resize (None: every usable core); 1 keeps it on the caller's."""
    global _threads
    n = _usable_cores() if n is None else int(n)
    if n < 1:
        raise ValueError(f"threads must be >= 1, not {n}")
    with _pool_lock:
        if n != _threads:
            _threads = n
            _drop_pool()


def get_threads() -> int:
    return _threads


def _drop_pool() -> None:
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=False)
    _pool = None


def _forget_pool() -> None:
    # A forked child has the pool object but none of its threads: work queued there never runs.
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def _in_chunks(share, rows: int, floats: int) -> None:
    """`share(start, stop, block)` over contiguous shares of `range(rows)`, whose rows must be
    independent and which it computes `block` rows at a time (about BLOCK_FLOATS of the
    `floats` in all): the first share on this thread, the others on the shared pool when each
    thread gets MIN_FLOATS_PER_THREAD or more, else one share on this thread."""
    block = max(rows * BLOCK_FLOATS // max(floats, 1), 1)
    parts = min(_threads, rows, floats // MIN_FLOATS_PER_THREAD)
    if parts <= 1:
        share(0, rows, block)
        return
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(_threads - 1, "chartjax-resize")
        pool = _pool
    bounds = [rows * i // parts for i in range(parts + 1)]
    futures = [pool.submit(share, a, b, block) for a, b in zip(bounds[1:-1], bounds[2:])]
    try:
        share(bounds[0], bounds[1], block)
    finally:  # even after an error here: no share may still be running once this returns
        concurrent.futures.wait(futures)
    for f in futures:
        f.result()


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


def _weighted_sum(img: np.ndarray, taps, axis: int, out: np.ndarray, term: np.ndarray) -> None:
    """`out = sum over (index, weight) in taps of take(img, index, axis) * weight`, in tap
    order as TF accumulates; `term` holds each product (two buffers, no temporaries)."""
    for k, (index, weight) in enumerate(taps):
        np.take(img, index, axis=axis, out=term if k else out, mode="clip")  # "raise" buffers `out`
        if k:
            term *= weight
            out += term
        else:
            out *= weight


def _column_taps(source: np.ndarray, weights: np.ndarray, channels: int) -> list:
    """The columns pass's taps on the `[rows, w*C]` view, one index per float: NumPy's take
    then copies 4-byte items directly instead of a memmove per C-float pixel (~1.2x the pass)."""
    channel = np.arange(channels)
    return [
        ((source[:, k, None] * channels + channel).reshape(-1), np.repeat(weights[:, k], channels))
        for k in range(source.shape[1])
    ]


def antialiased(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """`tf.image.resize(image, size, "bilinear", antialias=True)`: float32 `[h, w, C]`.

    This is the hot loop of Pix2Struct's inputs. Output rows are independent, so they are
    computed in blocks (`_in_chunks`: BLOCK_FLOATS, over threads for large images), each its
    rows pass and then its columns pass while the rows' result is still in cache."""
    img = np.asarray(image, _F32)
    h, w = int(size[0]), int(size[1])
    height, width = img.shape[:2]
    c = math.prod(img.shape[2:])  # channels (1 for `[H, W]`)
    flat = np.ascontiguousarray(img).reshape(height, width * c)
    row_source, row_weights = _spans(height, h)
    row_taps = row_source.shape[1]
    columns = _column_taps(*_spans(width, w), c)
    out = np.empty((h, w * c), _F32)

    def share(start: int, stop: int, block: int) -> None:
        n = max(min(block, stop - start), 1)  # one set of buffers for all the share's blocks
        acc, term = np.empty((n, width * c), _F32), np.empty((n, width * c), _F32)
        col_term = np.empty((n, w * c), _F32)
        for a in range(start, stop, n):
            b = min(a + n, stop)
            taps = [(row_source[a:b, k], row_weights[a:b, k, None]) for k in range(row_taps)]
            _weighted_sum(flat, taps, 0, acc[: b - a], term[: b - a])
            _weighted_sum(acc[: b - a], columns, 1, out[a:b], col_term[: b - a])

    _in_chunks(share, h, h * max(width, w) * c)
    return out.reshape(h, w, *img.shape[2:])


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
