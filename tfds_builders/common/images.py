"""Image decoding for the builders: PIL -> RGB (transparency composited on white) -> PNG bytes.

PIL rather than TF: TF cannot decode TIFF (DESIGN.md §7), and chart corpora hold GIF, TIFF, JPEG
and PNG files with palette, alpha and 16-bit modes. Wide greyscale (PIL modes 'I;16*' and 'I') is
scaled by its bit depth, 0 .. 2**depth - 1 onto 0 .. 255, whatever the pixels hold.
"""

from __future__ import annotations

import io
import os
import warnings

import numpy as np
from PIL import Image

from chartjax.data.images import to_rgb
from tfds_builders.common.bad_input import BadInputError

PNG_COMPRESS_LEVEL = 1


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
                if is_plain_rgb8_png(img, data):
                    return data  # already what we store: skip the re-encode
                rgb = as_rgb(img, data)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise BadInputError(path, f"cannot decode image{ref}: {e}") from e
    buf = io.BytesIO()
    # Level 1: on 1280x960 charts about 1.5x faster than the default 6 for ~25 % larger files.
    rgb.save(buf, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buf.getvalue()


# Integer greyscale modes wider than 8 bits (PIL opens a 16-bit grey PNG as 'I;16', older
# Pillows as 'I'). chartjax.data.images.to_rgb rescales them only when some pixel exceeds 255,
# so one white pixel would change how every other grey level decodes.
_WIDE_GREY = ("I", "I;16", "I;16B", "I;16L", "I;16N")


def as_rgb(img: Image.Image, data: bytes) -> Image.Image:
    """A decoded image as RGB: transparency composited on white, wide grey scaled by its bit
    depth (`data`: the file's bytes, where the depth is written)."""
    return _wide_grey_to_rgb(img, data) if img.mode in _WIDE_GREY else to_rgb(img)


def is_plain_rgb8_png(img: Image.Image, data: bytes) -> bool:
    # PIL reports 16-bit RGB PNGs as mode "RGB" too: the IHDR (always the first chunk) says the
    # bit depth (byte 24) and colour type (byte 25, 2 = RGB).
    return (
        img.format == "PNG"
        and img.mode == "RGB"
        and "transparency" not in img.info
        and data[24:26] == bytes([8, 2])
    )


def _bit_depth(img: Image.Image, data: bytes) -> int:
    """Bits per sample of a wide greyscale image, from the file where it says so."""
    if img.format == "PNG":
        return data[24]  # IHDR bit depth
    if img.format == "TIFF":
        bits = img.tag_v2.get(258)  # BitsPerSample
        if bits:
            return int(bits[0] if isinstance(bits, tuple) else bits)
    return 16  # I;16*, and PGM/PPM, whose samples PIL scales to 16 bits whatever their maxval


def _wide_grey_to_rgb(img: Image.Image, data: bytes) -> Image.Image:
    # PIL's 'I' is signed 32-bit: a 32-bit sample tops out at 2**31 - 1 there.
    top = 2.0 ** min(_bit_depth(img, data), 31) - 1.0
    arr = np.asarray(img, dtype=np.float64)
    grey = np.clip(np.rint(arr * (255.0 / top)), 0, 255).astype(np.uint8)
    transparent = img.info.get("transparency")  # a tRNS grey level: composite on white
    if isinstance(transparent, int):
        grey[arr == transparent] = 255
    return Image.fromarray(grey, mode="L").convert("RGB")
