"""Any decoded chart image -> RGB, transparency composited on white (PIL).

Shared by the builders (tfds_builders/common/images.py) and by training and inference inputs
(chartjax/tasks/seq2seq.py), so a chart looks the same wherever it enters.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

_WHITE = (255, 255, 255, 255)
# Modes PIL's convert("RGB") would clip instead of rescale (16/32-bit grey, float).
_WIDE_MODES = ("I", "I;16", "I;16B", "I;16L", "I;16N", "F")


def _wide_to_l(img: Image.Image) -> Image.Image:
    arr = np.asarray(img, dtype=np.float64)
    top = float(arr.max()) if arr.size else 0.0
    scale = 255.0 / 65535.0 if top > 255.0 else 1.0
    return Image.fromarray(np.clip(np.rint(arr * scale), 0, 255).astype(np.uint8), mode="L")


def to_rgb(img: Image.Image) -> Image.Image:
    """First frame of `img` as RGB; transparent pixels (alpha or palette) become white."""
    if getattr(img, "n_frames", 1) > 1:
        img.seek(0)  # animated GIF / multi-page TIFF: the chart is the first frame
    if img.mode in _WIDE_MODES:
        return _wide_to_l(img).convert("RGB")
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
        return np.asarray(to_rgb(im))
