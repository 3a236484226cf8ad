"""Image decoding for the builders: PIL -> RGB (transparency composited on white) -> PNG bytes.

PIL rather than TF: TF cannot decode TIFF (DESIGN.md §7), and chart corpora hold GIF, TIFF, JPEG
and PNG files with palette, alpha and 16-bit modes.
"""

from __future__ import annotations

import io
import os
import warnings

import numpy as np
from PIL import Image

from tfds_builders.common.bad_input import BadInputError

_WHITE = (255, 255, 255, 255)
PNG_COMPRESS_LEVEL = 1
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


def read_rgb_png(path: os.PathLike | str, referenced_by: str | None = None) -> bytes:
    """Reads an image file and returns it as RGB PNG bytes.

    Raises:
      BadInputError: the file is missing or PIL cannot decode it; the message names the file
        (and `referenced_by`, e.g. the CSV row that points at it).
    """
    path = os.fspath(path)
    ref = f" (referenced by {referenced_by})" if referenced_by else ""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError as e:
        raise BadInputError(path, f"image file not found{ref}") from e
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                img.load()  # decode fully now, so truncated files fail here
                if img.format == "PNG" and img.mode == "RGB" and "transparency" not in img.info:
                    return data  # already what we store: skip the re-encode
                rgb = to_rgb(img)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise BadInputError(path, f"cannot decode image{ref}: {e}") from e
    buf = io.BytesIO()
    # Level 1: on 1280x960 charts about 1.5x faster than the default 6 for ~25 % larger files.
    rgb.save(buf, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buf.getvalue()
