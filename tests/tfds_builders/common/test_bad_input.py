"""Shared builder helpers: image decoding to RGB PNG and the bad-input skip policy."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from tfds_builders.common import bad_input
from tfds_builders.common.bad_input import BadInputError, SkipLedger
from tfds_builders.common.images import read_rgb_png


def _decode(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as img:
        assert img.format == "PNG" and img.mode == "RGB"
        return np.asarray(img)


def test_rgb_png_passes_through_unchanged(tmp_path):
    path = tmp_path / "a.png"
    Image.fromarray(np.full((2, 3, 3), 7, np.uint8)).save(path)
    assert read_rgb_png(path) == path.read_bytes()


def test_grey_alpha_and_animated_gif(tmp_path):
    la = np.array([[[0, 0], [0, 255], [200, 255]]], dtype=np.uint8)  # transparent, black, grey
    Image.fromarray(la, mode="LA").save(tmp_path / "la.png")
    np.testing.assert_array_equal(
        _decode(read_rgb_png(tmp_path / "la.png"))[0, :, 0], [255, 0, 200]
    )
    frames = [Image.new("RGB", (2, 2), c) for c in ((255, 0, 0), (0, 255, 0))]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:])
    np.testing.assert_array_equal(_decode(read_rgb_png(tmp_path / "anim.gif"))[0, 0], [255, 0, 0])


def test_missing_and_truncated_images_name_the_file(tmp_path):
    with pytest.raises(
        BadInputError, match=r"nope\.png: image file not found \(referenced by x.csv row 3\)"
    ):
        read_rgb_png(tmp_path / "nope.png", referenced_by="x.csv row 3")
    buf = io.BytesIO()
    Image.fromarray(np.zeros((40, 40, 3), np.uint8)).save(buf, "PNG")
    (tmp_path / "cut.png").write_bytes(buf.getvalue()[:60])
    with pytest.raises(BadInputError, match=r"cut\.png: cannot decode image"):
        read_rgb_png(tmp_path / "cut.png")


def test_ledger_raises_or_counts():
    err = BadInputError("/d/f.csv", "bad label", row=4)
    assert str(err) == "/d/f.csv, row 4: bad label"
    with pytest.raises(BadInputError):
        SkipLedger("ds", skip_bad=False).handle("train", err)
    ledger = SkipLedger("ds", skip_bad=True)
    ledger.handle("train", err)
    ledger.handle("train", err)
    ledger.handle("test", err)
    ledger.end_split("train", 5)
    report = ledger.report()
    assert report["total_skipped"] == 3
    assert report["skipped_per_split"] == {"test": 1, "train": 2}
    assert report["messages"][0] == "train: /d/f.csv, row 4: bad label"
    with pytest.raises(ValueError, match=r"all 1 examples of split test were bad"):
        ledger.end_split("test", 0)


@pytest.mark.parametrize(
    ("value", "expected"), [("", False), ("0", False), ("1", True), ("true", True), ("no", False)]
)
def test_skip_bad_env(monkeypatch, value, expected):
    monkeypatch.setenv(bad_input.SKIP_BAD_ENV, value)
    assert bad_input.skip_bad_from_env() is expected


def test_skip_bad_env_rejects_garbage(monkeypatch):
    monkeypatch.setenv(bad_input.SKIP_BAD_ENV, "maybe")
    with pytest.raises(ValueError, match="CHARTJAX_SKIP_BAD"):
        bad_input.skip_bad_from_env()
