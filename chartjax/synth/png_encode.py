"""PNG files from already-filtered scanlines, for the synthetic chart generators.

Hand-written (the generators pick one row filter for the whole image) because Pillow's encoder
always runs adaptive row filtering, which costs more than the compression itself on these
mostly flat images. The IDAT stream is compressed by zlib-ng (the `zlib-ng` package) at levels
1-3: the same zlib format (any PNG decoder reads it); at level 2 (the generators' default) files
a third smaller than zlib's level 1 on CHART-Info charts and about four times faster, which
matters when writing 1280 x 960 RGBA images by the hundred thousand. Level 0 stores uncompressed
and levels 4-9 use zlib, as `zlib.compress`.

Not ISA-L's igzip, which this used before: it is faster still, but the padding bits before a
stored block come from state it does not initialize (in about one process of ten a chart's IDAT
differed in three such bits, pixels identical), so the same seed did not always give the same
bytes. zlib-ng's output is a function of the input, the level and the library build.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
from zlib_ng import zlib_ng

SIGNATURE = b"\x89PNG\r\n\x1a\n"
COLOR_TYPES = {3: 2, 4: 6}  # channels -> PNG colour type (RGB, RGBA)
# The generators' level. Measured per image on this project's charts (zlib-ng 1.1, one core):
# level 1 0.35 ms / 30.0 KB (FigureQA), 1.20 ms / 70 KB (CHART-Info 1280 x 960); level 2
# 0.54 ms / 23.4 KB, 1.46 ms / 31 KB; zlib's level 1 1.55 ms / 25.5 KB, 6.2 ms / 47 KB.
DEFAULT_LEVEL = 2


def compress(data, level: int) -> bytes:
    """zlib-format (RFC 1950) stream of a bytes-like object: zlib-ng at levels 1-3, else zlib."""
    if not 0 <= level <= 9:
        raise ValueError(f"compression level must be in 0..9, got {level}")
    if 1 <= level <= 3:
        return zlib_ng.compress(data, level)
    return zlib.compress(data, level)


def _chunk(kind: bytes, payload: bytes) -> bytes:
    crc = zlib.crc32(payload, zlib.crc32(kind))
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc)


def png_bytes(rows: np.ndarray, width: int, channels: int, level: int) -> bytes:
    """An 8-bit RGB or RGBA PNG from filtered scanlines.

    Args:
      rows: uint8 (height, 1 + width * channels), C-contiguous; each row starts with its PNG
        filter type byte, followed by the filtered samples.
      width: image width in pixels.
      channels: 3 (RGB) or 4 (RGBA).
      level: compression level 0..9 (see `compress`).
    """
    if channels not in COLOR_TYPES:
        raise ValueError(f"png_bytes: channels must be 3 or 4, got {channels}")
    if rows.dtype != np.uint8 or rows.ndim != 2 or rows.shape[1] != 1 + width * channels:
        raise ValueError(
            f"png_bytes: rows must be uint8 (height, {1 + width * channels}), "
            f"got {rows.dtype} {rows.shape}"
        )
    if not rows.flags.c_contiguous:
        raise ValueError("png_bytes: rows must be C-contiguous")
    header = struct.pack(">IIBBBBB", width, rows.shape[0], 8, COLOR_TYPES[channels], 0, 0, 0)
    return (
        SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", compress(rows, level))  # reads the array's buffer: no copy
        + _chunk(b"IEND", b"")
    )
