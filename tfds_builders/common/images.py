"""Image decoding for the builders: PIL -> RGB (transparency composited on white) -> PNG bytes.

PIL rather than TF: TF cannot decode TIFF (docs/design.md §7), and chart corpora hold GIF, TIFF,
JPEG and PNG files with palette, alpha and 16-bit modes. Wide greyscale (PIL modes 'I;16*' and 'I')
is scaled by its bit depth, 0 .. 2**depth - 1 onto 0 .. 255, whatever the pixels hold.
"""

from __future__ import annotations

import io
import os
import warnings

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
    return rgb_png_bytes(data, path, referenced_by)


def rgb_png_bytes(data: bytes, name: str, referenced_by: str | None = None) -> bytes:
    """`read_rgb_png` for an image already read (e.g. a member of a tar): `name` says where
    it came from in the error.

    Raises:
      BadInputError: PIL cannot decode it; the message names `name` (and `referenced_by`).
    """
    ref = f" (referenced by {referenced_by})" if referenced_by else ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                img.load()  # decode fully now, so truncated files fail here
                if is_plain_rgb8_png(img, data):
                    return data  # already what we store: skip the re-encode
                rgb = to_rgb(img, data)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise BadInputError(name, f"cannot decode image{ref}: {e}") from e
    buf = io.BytesIO()
    # Level 1: on 1280x960 charts about 1.5x faster than the default 6 for ~25 % larger files.
    rgb.save(buf, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buf.getvalue()


def is_plain_rgb8_png(img: Image.Image, data: bytes) -> bool:
    # PIL reports 16-bit RGB PNGs as mode "RGB" too: the IHDR (always the first chunk) says the
    # bit depth (byte 24) and colour type (byte 25, 2 = RGB).
    return (
        img.format == "PNG"
        and img.mode == "RGB"
        and "transparency" not in img.info
        and data[24:26] == bytes([8, 2])
    )
