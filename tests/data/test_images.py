"""chartjax/data/images.py: what training and inference decode. Wide grey scales by the file's
bit depth, never by its content (issue 26, item 8)."""

import io

import numpy as np
import pytest
from PIL import Image

from chartjax.data.images import decode_image_bytes


@pytest.mark.parametrize("white_pixel", [False, True])
def test_16_bit_grey_scales_by_bit_depth(white_pixel):
    values = np.full((2, 3), 200, dtype=np.uint16)
    if white_pixel:
        values[0, 0] = 0xFFFF
    buf = io.BytesIO()
    Image.fromarray(values, mode="I;16").save(buf, format="PNG")
    pixels = decode_image_bytes(buf.getvalue())
    assert pixels.shape == (2, 3, 3) and pixels.dtype == np.uint8
    assert tuple(pixels[1, 2]) == (1, 1, 1)  # 200 of 65535: the same with or without white
    assert tuple(pixels[0, 0]) == ((255,) * 3 if white_pixel else (1, 1, 1))


def test_8_bit_grey_is_unchanged():
    buf = io.BytesIO()
    Image.fromarray(np.full((2, 2), 200, np.uint8), mode="L").save(buf, format="PNG")
    assert (decode_image_bytes(buf.getvalue()) == 200).all()
