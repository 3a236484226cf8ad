"""PNG assembly and the zlib-ng/zlib compression switch of the synthetic generators."""

from __future__ import annotations

import io
import zlib

import numpy as np
import pytest
from PIL import Image

from chartjax.synth import png_encode
from chartjax.synth.figureqa_render import encode_png as encode_rgb


def _flat_image(channels: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, size=(9, 6, channels), dtype=np.uint8)
    img[4:] = img[3]  # flat rows, as on a chart
    return img


@pytest.mark.parametrize("level", [0, 1, 2, 3, 6, 9])
def test_compress_is_a_zlib_stream_at_every_level(level):
    data = _flat_image(4).tobytes() * 50
    out = png_encode.compress(data, level)
    assert out[0] == 0x78  # zlib header: deflate, 32 KiB window
    assert zlib.decompress(out) == data
    if level:
        assert len(out) < len(data) / 4


def test_compress_levels_1_to_3_are_zlib_ng():
    data = _flat_image(4).tobytes() * 50
    assert png_encode.compress(data, 1) == png_encode.zlib_ng.compress(data, 1)
    assert png_encode.compress(data, 6) == zlib.compress(data, 6)
    with pytest.raises(ValueError, match="0..9"):
        png_encode.compress(data, 10)


def test_compress_is_a_function_of_its_input():
    # ISA-L's igzip, used before, now and then wrote different bytes for the same input: the
    # padding bits before a stored block came from state it does not initialize (a 1280 x 960
    # chart's IDAT differed in bits 5-7 of one byte in about one process of ten; no loop in one
    # process reproduced it). Here: same input, same bytes, whatever the heap held before.
    rng = np.random.default_rng(0)
    img = np.repeat(rng.integers(0, 256, size=(64, 320, 4), dtype=np.uint8), 15, axis=0)
    data = img.tobytes()
    first = png_encode.compress(data, png_encode.DEFAULT_LEVEL)
    for n in range(20):
        junk = [bytearray(rng.bytes(int(k))) for k in rng.integers(10_000, 300_000, 4)]
        assert png_encode.compress(data, png_encode.DEFAULT_LEVEL) == first, n
        del junk
    assert zlib.decompress(first) == data


@pytest.mark.parametrize("channels, mode", [(3, "RGB"), (4, "RGBA")])
@pytest.mark.parametrize("level", [0, 1, 7])
def test_png_bytes_round_trip(channels, mode, level):
    img = _flat_image(channels)
    h, w, _ = img.shape
    rows = np.zeros((h, 1 + w * channels), np.uint8)  # filter byte 0 ("None") on every row
    rows[:, 1:] = img.reshape(h, -1)
    back = Image.open(io.BytesIO(png_encode.png_bytes(rows, w, channels, level)))
    assert back.mode == mode
    np.testing.assert_array_equal(np.asarray(back), img)


def test_png_bytes_rejects_bad_rows():
    rows = np.zeros((4, 1 + 5 * 3), np.uint8)
    with pytest.raises(ValueError, match="channels must be 3 or 4"):
        png_encode.png_bytes(rows, 5, 2, 1)
    with pytest.raises(ValueError, match=r"uint8 \(height, 16\)"):
        png_encode.png_bytes(rows[:, :-1], 5, 3, 1)
    with pytest.raises(ValueError, match="uint8"):
        png_encode.png_bytes(rows.astype(np.int16), 5, 3, 1)
    wide = np.zeros((4, 2 * (1 + 5 * 3)), np.uint8)
    with pytest.raises(ValueError, match="C-contiguous"):
        png_encode.png_bytes(wide[:, ::2], 5, 3, 1)


def test_figureqa_encoder_takes_the_rgb_view_of_an_rgba_buffer():
    rgba = _flat_image(4)
    back = np.asarray(Image.open(io.BytesIO(encode_rgb(rgba[:, :, :3]))))
    np.testing.assert_array_equal(back, rgba[:, :, :3])
