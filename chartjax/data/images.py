"""Any decoded chart image -> RGB, transparency composited on white (PIL).

Shared by the builders (tfds_builders/common/images.py) and by training and inference inputs
(chartjax/tasks/core/seq2seq.py), so a chart looks the same wherever it enters.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

_WHITE = (255, 255, 255, 255)
# Modes PIL's convert("RGB") would clip instead of rescale (16/32-bit grey, float).
_WIDE_MODES = ("I", "I;16", "I;16B", "I;16L", "I;16N", "F")


def bit_depth(img: Image.Image, data: bytes | None) -> int:
    """Bits per sample of a wide greyscale image, from the file where it says so."""
    if data is not None and img.format == "PNG":
        return data[24]  # IHDR bit depth
    if img.format == "TIFF":
        bits = img.tag_v2.get(258)  # BitsPerSample
        if bits:
            return int(bits[0] if isinstance(bits, tuple) else bits)
    return 16  # I;16*, and PGM/PPM, whose samples PIL scales to 16 bits whatever their maxval


def _wide_to_l(img: Image.Image, data: bytes | None) -> Image.Image:
    """Scaled by the bit depth, never by the content: one white pixel must not change how every
    other grey level decodes. Float images keep their 0-255 or 0-1 reading."""
    arr = np.asarray(img, dtype=np.float64)
    if img.mode == "F":
        top = 1.0 if arr.size and float(arr.max()) <= 1.0 else 255.0
    else:  # PIL's 'I' is signed 32-bit: a 32-bit sample tops out at 2**31 - 1 there
        top = 2.0 ** min(bit_depth(img, data), 31) - 1.0
    grey = np.clip(np.rint(arr * (255.0 / top)), 0, 255).astype(np.uint8)
    transparent = img.info.get("transparency")  # a tRNS grey level: composite on white
    if isinstance(transparent, int):
        grey[arr == transparent] = 255
    return Image.fromarray(grey, mode="L")


def to_rgb(img: Image.Image, data: bytes | None = None) -> Image.Image:
    """First frame of `img` as RGB; transparent pixels (alpha or palette) become white; wide
    grey scaled by its bit depth (read from `data`, the encoded file, where it is written)."""
    if getattr(img, "n_frames", 1) > 1:
        img.seek(0)  # animated GIF / multi-page TIFF: the chart is the first frame
    if img.mode in _WIDE_MODES:
        return _wide_to_l(img, data).convert("RGB")
    has_alpha = img.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in img.info
    if has_alpha:
        rgba = img.convert("RGBA")
        if rgba.getchannel("A").getextrema()[0] == 255:
            return rgba.convert("RGB")  # fully opaque (e.g. generator output): nothing to blend
        return Image.alpha_composite(Image.new("RGBA", rgba.size, _WHITE), rgba).convert("RGB")
    return img.convert("RGB")


def decode_image_bytes(data: bytes) -> np.ndarray:
    """Encoded image -> uint8 RGB `[H, W, 3]` (TFDS stores PNG; TIFF, GIF and 16-bit work too)."""
    import io

    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(to_rgb(im, data))
