"""Pix2Struct patch extraction as TF ops (eager and in tf.data) and header rendering."""

import math

import numpy as np
import pytest
import tensorflow as tf

from chartjax.data import patches, render


def _image(h, w, seed=0):
    r = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([128 + 100 * np.sin(x / 17.0), 128 + 100 * np.cos(y / 11.0), (x + y) % 256], -1)
    a[(x // 7 + y // 5) % 9 == 0] = 0
    return np.clip(a + r.normal(0, 10, a.shape), 0, 255).astype(np.uint8)


def test_layout_ids_padding_and_flattening_order():
    # 32x48 at 6 patches of 16x16: scale = 1, grid 2x3 exactly, no resize change.
    img = np.arange(32 * 48 * 3, dtype=np.float32).reshape(32, 48, 3) % 251
    out = patches.image_to_patches(tf.constant(img), 8).numpy()
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
    np.testing.assert_allclose(patches.standardize(img).numpy(), want, atol=1e-4)
    flat = np.full((4, 4, 3), 7, np.uint8)  # std 0 -> divided by 1/sqrt(N), values 0
    assert not patches.standardize(flat).numpy().any()


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


def test_tf_data_equals_eager():
    imgs = [_image(60, 90, 2), _image(120, 40, 3)]
    eager = [patches.preprocess_image(i, 32).numpy() for i in imgs]
    ds = tf.data.Dataset.from_generator(
        lambda: iter(imgs), output_signature=tf.TensorSpec([None, None, 3], tf.uint8)
    )
    ds = ds.map(lambda x: patches.preprocess_image(x, 32))
    for a, b in zip(eager, ds.as_numpy_iterator()):
        np.testing.assert_array_equal(a, b)


def test_position_id_limit_raises():
    with pytest.raises(tf.errors.InvalidArgumentError, match="extreme aspect ratio"):
        patches.image_to_patches(tf.zeros([4, 400, 3]), 64, (4, 4), max_position_id=50)


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
    np.testing.assert_allclose(patches.standardize(img).numpy(), want, atol=2e-6)


@pytest.mark.parametrize(
    "hw,size",
    [((60, 80), (64, 96)), ((37, 100), (112, 304)), ((16, 16), (16, 48)), ((90, 50), (90, 50))],
)
def test_upscale_fast_path_equals_antialiased_resize(hw, size):
    # No side shrinks: plain bilinear stands in for TF's antialiased kernel (same weights).
    img = patches.standardize(_image(*hw, 5))
    fast = patches.resize_antialiased(img, tf.constant(size)).numpy()
    want = tf.image.resize(img, size, antialias=True).numpy()
    assert np.abs(fast - want).max() < 3e-4


@pytest.mark.parametrize("hw,size", [((60, 80), (32, 96)), ((64, 64), (48, 48))])
def test_any_shrinking_side_keeps_the_antialiased_kernel(hw, size):
    img = patches.standardize(_image(*hw, 6))
    got = patches.resize_antialiased(img, tf.constant(size)).numpy()
    np.testing.assert_array_equal(got, tf.image.resize(img, size, antialias=True).numpy())
    assert np.abs(got - tf.image.resize(img, size, antialias=False).numpy()).max() > 1e-2
