"""FigureQA image preprocessing on hand-made images: the longer side to image_size keeping the
aspect ratio, zero padding to a square (centred, or right and below), and the training-time pad
and random crop (the paper's 256 -> 264 -> 256): a shift of at most train_pad / 2 pixels each
way that keeps every pixel it does not push out of the frame, seeded by the example id, never
applied in evaluation. The same as the baselines' TF ops, in this process and in loader workers."""

import functools
import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from chartjax.data import loader
from chartjax.tasks import figureqa


def _example(pixels: np.ndarray, id_: str = "3/7") -> dict:
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return {
        "image": buf.getvalue(),
        "question": "Is Red the minimum?",
        "answer": np.int64(1),
        "id": id_,
        "figure_type": "vbar",
        "question_id": np.int64(0),
    }


def _image(ex, size, *, train=False, **kw) -> np.ndarray:
    fn = figureqa._preprocess_fn(size, 24, False, keep_meta=not train, **kw)
    return fn(ex)["image"]


def test_the_longer_side_goes_to_256_and_zeros_pad_the_rest():
    wide = np.full((50, 100, 3), 200, np.uint8)  # 100 wide, 50 high
    centre = _image(_example(wide), 256)
    assert centre.shape == (256, 256, 3) and centre.dtype == np.uint8
    # 100 x 50 -> 256 x 128; a constant image stays constant under bilinear resizing.
    assert (centre[64:192] == 200).all() and (centre[:64] == 0).all() and (centre[192:] == 0).all()
    top_left = _image(_example(wide), 256, pad_position="top_left")
    assert (top_left[:128] == 200).all() and (top_left[128:] == 0).all()
    tall = np.full((100, 50, 3), 90, np.uint8)  # 50 wide, 100 high -> 128 x 256
    got = _image(_example(tall), 256, pad_position="top_left")
    assert (got[:, :128] == 90).all() and (got[:, 128:] == 0).all()


def test_the_small_sizes_of_the_demo_still_work():
    got = _image(_example(np.full((50, 100, 3), 200, np.uint8)), 16)  # -> 16 x 8, centred
    assert got.shape == (16, 16, 3)
    assert (got[4:12] == 200).all() and (got[:4] == 0).all() and (got[12:] == 0).all()


def _shift(img: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """out[y, x] = img[y + dy, x + dx], zeros where that falls outside."""
    h, w = img.shape[:2]
    out = np.zeros_like(img)
    ys, xs = slice(max(0, -dy), min(h, h - dy)), slice(max(0, -dx), min(w, w - dx))
    out[ys, xs] = img[max(0, dy) : min(h, h + dy), max(0, dx) : min(w, w + dx)]
    return out


def _shifts_of(train: np.ndarray, evaluated: np.ndarray, reach: int):
    return [
        (dy, dx)
        for dy in range(-reach, reach + 1)
        for dx in range(-reach, reach + 1)
        if np.array_equal(train, _shift(evaluated, dy, dx))
    ]


def test_the_training_crop_is_a_small_shift_that_keeps_the_content():
    rng = np.random.default_rng(0)
    noise = rng.integers(1, 256, size=(16, 32, 3), dtype=np.uint8)  # no zero pixel inside
    size, pad = 32, 8  # the longer side is already 32: the resize is the identity
    evaluated = _image(_example(noise), size)
    np.testing.assert_array_equal(evaluated[8:24], noise)  # centred, exact
    assert not evaluated[:8].any() and not evaluated[24:].any()
    # Evaluation never crops, even with train_pad set.
    np.testing.assert_array_equal(_image(_example(noise), size, train_pad=pad), evaluated)

    shifts = {}
    for i in range(24):
        ex = _example(noise, f"{i}/0")
        train = _image(ex, size, train=True, train_pad=pad)
        found = _shifts_of(train, evaluated, pad // 2)
        assert len(found) == 1, (i, found)  # exactly one shift within +-4 px explains it
        shifts[i] = found[0]
        np.testing.assert_array_equal(_image(ex, size, train=True, train_pad=pad), train)
    assert len(set(shifts.values())) > 5  # the ids draw different crops
    assert {abs(d) for s in shifts.values() for d in s} <= set(range(pad // 2 + 1))
    other = [
        _shifts_of(
            _image(_example(noise, f"{i}/0"), size, train=True, train_pad=pad, augment_seed=1),
            evaluated,
            pad // 2,
        )[0]
        for i in range(24)
    ]
    assert other != [shifts[i] for i in range(24)]  # augment_seed draws other crops
    # Without train_pad, training images are the evaluation images.
    np.testing.assert_array_equal(_image(_example(noise), size, train=True), evaluated)


@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("pad_position", ["center", "top_left"])
@pytest.mark.parametrize(
    "hw,out", [((37, 53), (48, 48)), ((90, 41), (32, 48)), ((20, 20), (64, 64))]
)
def test_the_image_equals_the_baselines_tf_ops(antialias, pad_position, hw, out):
    pixels = np.random.default_rng(2).integers(0, 256, size=(*hw, 3), dtype=np.uint8)
    ex = _example(pixels)
    got = figureqa.image_fn(*out, antialias, pad_position)(ex["image"])
    img = tf.image.resize(
        tf.io.decode_png(ex["image"], channels=3),
        out,
        method="bilinear",
        preserve_aspect_ratio=True,
        antialias=antialias,
    )
    if pad_position == "center":
        img = tf.image.resize_with_crop_or_pad(img, *out)
    else:
        img = tf.image.pad_to_bounding_box(img, 0, 0, *out)
    want = tf.cast(tf.clip_by_value(tf.round(img), 0, 255), tf.uint8).numpy()
    np.testing.assert_array_equal(got, want)


def test_the_crop_is_the_same_in_a_loader_worker_process():
    noise = np.random.default_rng(1).integers(1, 256, size=(16, 32, 3), dtype=np.uint8)
    examples = [_example(noise, f"12/{i}") for i in range(4)]
    fn = figureqa._preprocess_fn(32, 24, False, keep_meta=False, train_pad=8)
    batch_fn = functools.partial(loader.batch_of, fn)
    (here,) = loader.map_ordered(batch_fn, [examples], workers=0)
    (there,) = loader.map_ordered(batch_fn, [examples], workers=1)
    assert sorted(here) == sorted(there)
    for k in here:
        np.testing.assert_array_equal(here[k], there[k], err_msg=k)
    assert len({here["image"][i].tobytes() for i in range(4)}) > 1  # the ids crop differently


@pytest.mark.parametrize(
    "kw,match",
    [({"pad_position": "middle"}, "pad_position must be one of"), ({"train_pad": -2}, ">= 0")],
)
def test_bad_options_name_the_field(kw, match):
    with pytest.raises(ValueError, match=f"figureqa_task.*{match}"):
        figureqa.make_task(**kw)


def test_a_non_square_input_fits_the_figure_inside_height_by_width():
    """image_height: the VGG-16 baseline's 320 x 480 input, the figure's aspect kept."""
    wide = np.full((50, 100, 3), 200, np.uint8)  # 2:1 inside 3:2 -> 480 x 240, centred rows
    got = _image(_example(wide), 480, image_height=320)
    assert got.shape == (320, 480, 3)
    assert (got[40:280] == 200).all() and not got[:40].any() and not got[280:].any()
    square = np.full((60, 60, 3), 70, np.uint8)  # height-bound: 320 x 320, centred columns
    got = _image(_example(square), 480, image_height=320, pad_position="top_left")
    assert (got[:, :320] == 70).all() and not got[:, 320:].any()
    # Training pads both sides by train_pad and crops back to 320 x 480.
    assert _image(_example(wide), 480, train=True, image_height=320, train_pad=8).shape == (
        320,
        480,
        3,
    )
    with pytest.raises(ValueError, match="image_height"):
        figureqa.make_task(image_height=0)
