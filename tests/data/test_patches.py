"""Pix2Struct patch extraction in NumPy, step by step against the TensorFlow ops the official
pix2struct preprocessing calls, and header rendering."""

import math

import numpy as np
import pytest
import tensorflow as tf

from chartjax.data import patches, render, resize


def _image(h, w, seed=0):
    r = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([128 + 100 * np.sin(x / 17.0), 128 + 100 * np.cos(y / 11.0), (x + y) % 256], -1)
    a[(x // 7 + y // 5) % 9 == 0] = 0
    return np.clip(a + r.normal(0, 10, a.shape), 0, 255).astype(np.uint8)


def test_layout_ids_padding_and_flattening_order():
    # 32x48 at 6 patches of 16x16: scale = 1, grid 2x3 exactly, no resize change.
    img = np.arange(32 * 48 * 3, dtype=np.float32).reshape(32, 48, 3) % 251
    out = patches.image_to_patches(img, 8)
    assert out.shape == (8, 2 + 768)
    np.testing.assert_array_equal(out[:6, 0], [1, 1, 1, 2, 2, 2])
    np.testing.assert_array_equal(out[:6, 1], [1, 2, 3, 1, 2, 3])
    assert not out[6:].any()
    # Patch (row 2, col 3) flattened in (ph, pw, C) order.
    np.testing.assert_allclose(out[5, 2:], img[16:32, 32:48].reshape(-1), rtol=1e-5)


def test_standardization_is_population_std():
    img = _image(20, 30)
    x = img.astype(np.float64)
    want = (x - x.mean()) / max(x.std(), 1 / math.sqrt(x.size))
    np.testing.assert_allclose(patches.standardize(img), want, atol=1e-4)
    flat = np.full((4, 4, 3), 7, np.uint8)  # std 0 -> divided by 1/sqrt(N), values 0
    assert not patches.standardize(flat).any()


@pytest.mark.parametrize(
    "h,w,mp,grid",
    [
        (41, 41, 16, (3, 3)),  # float32 floor: exact arithmetic would give 4x4 (models.md §1.4)
        (109, 109, 256, (15, 15)),
        (110, 220, 2048, (31, 63)),
        (103, 103, 256, (16, 16)),  # float64 would give 15x15
        (10, 5000, 64, (1, 64)),  # extreme aspect: clipped to at least one row, at most max_patches
    ],
)
def test_grid_follows_official_float32_rule(h, w, mp, grid):
    rows, cols = patches.patch_grid(h, w, mp)
    assert (int(rows), int(cols)) == grid


def test_never_more_than_max_patches_and_at_least_half():
    rng = np.random.default_rng(1)
    for _ in range(20):
        h, w = rng.integers(8, 900, 2)
        mp = int(rng.choice([16, 64, 512, 2048]))
        rows, cols = (int(v) for v in patches.patch_grid(int(h), int(w), mp))
        assert rows * cols <= mp
        if h / w < mp / 2 and w / h < mp / 2:  # not clipped by an extreme aspect ratio
            assert rows * cols >= mp / 2


def _official(image: np.ndarray, max_patches: int, patch=(16, 16)) -> np.ndarray:
    """pix2struct's preprocessing as its TF ops (written from its description: per-image
    standardization, float32 grid, antialiased bilinear resize, `extract_patches`, 1-based
    row/col ids, zero padding)."""
    ph, pw = patch
    x = tf.image.per_image_standardization(tf.cast(image, tf.float32))
    h, w = float(image.shape[0]), float(image.shape[1])
    scale = tf.sqrt(tf.constant(max_patches, tf.float32) * (ph / h) * (pw / w))
    rows = int(tf.maximum(tf.minimum(tf.floor(scale * h / ph), max_patches), 1))
    cols = int(tf.maximum(tf.minimum(tf.floor(scale * w / pw), max_patches), 1))
    x = tf.image.resize(x, [rows * ph, cols * pw], method="bilinear", antialias=True)
    p = tf.image.extract_patches(x[None], [1, ph, pw, 1], [1, ph, pw, 1], [1, 1, 1, 1], "VALID")
    p = tf.reshape(p, [rows * cols, -1]).numpy()
    ids = np.stack(np.meshgrid(np.arange(1, rows + 1), np.arange(1, cols + 1), indexing="ij"), -1)
    out = np.concatenate([ids.reshape(-1, 2).astype(np.float32), p], 1)
    return np.pad(out, [[0, max_patches - rows * cols], [0, 0]])


@pytest.mark.parametrize(
    "hw,mp", [((60, 90), 32), ((120, 40), 32), ((300, 400), 2048), ((33, 500), 64), ((41, 41), 16)]
)
def test_equals_official_tf_preprocessing(hw, mp):
    img = _image(*hw, 2)
    got = patches.preprocess_image(img, mp)
    want = _official(img, mp)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_array_equal(got[:, :2], want[:, :2])
    np.testing.assert_allclose(got, want, atol=2e-5, rtol=0)


def test_render_header_layout():
    img = np.zeros((50, 40, 3), np.uint8)
    out = render.render_header(img, "Is the blue bar higher than the red one?", font_size=12)
    head = render.render_text("Is the blue bar higher than the red one?", font_size=12)
    assert out.dtype == np.uint8 and out.shape[1] == head.width  # header wider than the image
    img_h = int(50 * head.width / 40)
    assert out.shape[0] == head.height + img_h
    assert (out[head.height :] < 10).all()  # the (black) image below, resized to the new width
    assert (out[:5] == 255).all()  # 5 px white padding above the text
    assert (out[: head.height] < 128).any()  # some dark text pixels
    long = render.render_text("word " * 40, font_size=10)
    assert long.height > 2 * render.render_text("word", font_size=10).height  # wrapped at 80


def test_render_missing_font_names_the_path():
    with pytest.raises(FileNotFoundError, match="nope.ttf"):
        render.render_text("x", font_path="/nope.ttf")


def test_standardize_equals_tf_per_image_standardization():
    img = _image(45, 70, 4)
    want = tf.image.per_image_standardization(tf.cast(img, tf.float32)).numpy()
    np.testing.assert_allclose(patches.standardize(img), want, atol=2e-6)


@pytest.mark.parametrize(
    "hw,size",
    [
        ((60, 80), (64, 96)),
        ((37, 100), (112, 304)),
        ((16, 16), (16, 48)),
        ((90, 50), (90, 50)),
        ((60, 80), (32, 96)),
        ((64, 64), (48, 48)),
        ((1200, 1600), (720, 960)),
        ((33, 21), (7, 5)),
    ],
)
def test_resize_equals_tf_kernels(hw, size):
    img = patches.standardize(_image(*hw, 5))
    got = resize.antialiased(img, size)
    np.testing.assert_allclose(got, tf.image.resize(img, size, antialias=True).numpy(), atol=1e-6)
    got = resize.bilinear(img, size)
    np.testing.assert_allclose(got, tf.image.resize(img, size).numpy(), atol=1e-6)


def test_aspect_size_crop_pad_and_rounding_follow_tf():
    for hw, target in [((20, 33), (64, 64)), ((100, 7), (32, 48)), ((255, 256), (256, 256))]:
        want = tf.image.resize(tf.zeros((*hw, 3)), target, preserve_aspect_ratio=True).shape[:2]
        assert resize.aspect_size(*hw, *target) == tuple(want)
    img = _image(13, 20, 7)
    for centre in (True, False):
        got = resize.crop_or_pad(img, 24, 17, centre=centre)
        if centre:
            want = tf.image.resize_with_crop_or_pad(img, 24, 17).numpy()
        else:
            want = tf.image.pad_to_bounding_box(img[:, :17], 0, 0, 24, 17).numpy()
        np.testing.assert_array_equal(got, want)
    x = np.array([-3.0, 0.5, 1.5, 2.5, 254.5, 300.0], np.float32)
    want = tf.cast(tf.clip_by_value(tf.round(x), 0, 255), tf.uint8).numpy()
    np.testing.assert_array_equal(resize.to_uint8(x), want)
