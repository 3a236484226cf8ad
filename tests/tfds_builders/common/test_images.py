"""tfds_builders.common.images: wide greyscale scaled by bit depth, only 8-bit RGB PNG stored."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tfds_builders.common.images import read_rgb_png


def _decode(data: bytes) -> np.ndarray:
    assert data[24:26] == bytes([8, 2])  # IHDR: 8-bit RGB
    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img)[..., 0]


def _png16(path: Path, values: np.ndarray, color_type: int, trns: int | None = None) -> Path:
    """A 16-bit PNG written byte by byte (PIL cannot write 16-bit RGB or a grey tRNS)."""
    h, w = values.shape[:2]
    raw = b"".join(b"\x00" + values[y].astype(">u2").tobytes() for y in range(h))

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + body))
        return struct.pack(">I", len(body)) + kind + body + crc

    ihdr = struct.pack(">IIBBBBB", w, h, 16, color_type, 0, 0, 0)
    extra = b"" if trns is None else chunk(b"tRNS", struct.pack(">H", trns))
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + extra
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
    return path


@pytest.mark.parametrize("white", [False, True])
def test_16_bit_grey_png_scales_by_bit_depth_not_by_content(tmp_path, white):
    """200 of 65535 is 1 of 255: it decoded to 200 unless some pixel exceeded 255."""
    values = np.array([[0, 200, 255, 65535 if white else 100]], dtype=np.uint16)
    path = tmp_path / "grey16.png"
    Image.fromarray(values).save(path)
    with Image.open(path) as img:
        assert img.mode == "I;16"
    assert _decode(read_rgb_png(path)).tolist() == [[0, 1, 1, 255 if white else 0]]


def test_16_bit_grey_png_transparent_level_becomes_white(tmp_path):
    path = _png16(tmp_path / "trns.png", np.array([[200, 0, 30000]], np.uint16), 0, trns=0)
    assert _decode(read_rgb_png(path)).tolist() == [[1, 255, 117]]


def test_16_bit_rgb_png_is_stored_as_8_bit(tmp_path):
    values = np.array([[[65535, 0, 0x1234], [200, 0x8000, 0x80FF]]], np.uint16)
    path = _png16(tmp_path / "rgb16.png", values, 2)
    out = read_rgb_png(path)  # used to come back as read: PIL calls 16-bit RGB mode "RGB" too
    assert out != path.read_bytes()
    with Image.open(io.BytesIO(out)) as img:
        assert np.asarray(img).tolist() == [[[255, 0, 0x12], [0, 0x80, 0x80]]]


@pytest.mark.parametrize(
    ("values", "mode"),
    [
        (np.array([[200, 32896, 65535]], np.uint16), "I;16"),
        (np.array([[2**23, 2**30, 2**31 - 1]], np.int32), "I"),  # PIL's 'I' is signed
    ],
)
def test_wide_grey_tiff_scales_by_its_bits_per_sample(tmp_path, values, mode):
    path = tmp_path / "grey.tiff"
    Image.fromarray(values).save(path)
    with Image.open(path) as img:
        assert img.mode == mode
    assert _decode(read_rgb_png(path)).tolist() == [[1, 128, 255]]


def test_16_bit_pgm_scales_like_the_png(tmp_path):
    path = tmp_path / "grey.pgm"
    path.write_bytes(b"P5\n3 1\n65535\n" + np.array([200, 255, 100], ">u2").tobytes())
    assert _decode(read_rgb_png(path)).tolist() == [[1, 1, 0]]
