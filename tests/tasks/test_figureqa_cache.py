"""The FigureQA image cache (chartjax/data/figure_images.py): every figure decoded once per split,
batches gathered from it equal the uncached per-question preprocessing exactly (training crops
included), the .npy cache is written once and reused, and a change of preprocessing makes a new
one."""

import os

import numpy as np
import pytest
import tensorflow as tf

from chartjax.data import figure_images, pipeline, sources, tfds_records
from chartjax.tasks import figureqa


def _reference(data_dir: str, split: str, train: bool, **kw) -> dict[str, np.ndarray]:
    """Each question of `split` through figureqa._preprocess_fn (PNG decoded per question)."""
    task = figureqa.make_task(data_dir=data_dir, **kw)
    fn = figureqa._preprocess_fn(
        kw.get("image_size", 256),
        24,
        kw.get("antialias", False),
        keep_meta=not train,
        train_pad=kw.get("train_pad", 0),
        augment_seed=kw.get("augment_seed", 0),
    )
    examples = list(tfds_records.split_examples(task.source.builder_dir, split))
    out = {}
    for ex in map(fn, examples):
        out[sources.as_python(ex["id"]) if "id" in ex else len(out)] = ex
    return out


@pytest.fixture(scope="module")
def data_dir(tfds_dir):
    return tfds_dir("figureqa")


def test_cached_eval_batches_equal_the_per_question_preprocessing(data_dir):
    kw = dict(image_size=48, antialias=True)
    want = _reference(data_dir, "train1", train=False, **kw)
    task = figureqa.make_task(data_dir=data_dir, **kw)
    got = {}
    for b in pipeline.eval_batches(task, "train1", 2, 0, 1):
        for i in np.flatnonzero(b["_mask"]):
            got[b["id"][i].decode()] = {k: v[i] for k, v in b.items()}
    assert sorted(got) == sorted(want) and len(got) == 5  # the fixture: 5 questions, 2 figures
    for qid, ex in want.items():
        for k in ("image", "question_tokens", "question_length", "label"):
            np.testing.assert_array_equal(got[qid][k], ex[k], err_msg=f"{qid} {k}")
    # One cached image per figure of the split, fewer than its questions.
    figures = {qid.split("/")[0] for qid in want}
    (block,) = task.source._blocks
    assert block.shape == (len(figures), 48, 48, 3) and len(figures) < len(want)


def test_cached_training_crops_equal_the_per_question_crops(data_dir):
    kw = dict(image_size=40, train_pad=8, augment_seed=3, shuffle_buffer=4)
    task = figureqa.make_task(data_dir=data_dir, **kw)
    n = task.source.num_examples("train1")
    batch = next(pipeline.train_batches(task, n, 0, 0, 0, 1))  # every question once
    ref = _reference(data_dir, "train1", train=True, **kw)
    ref_eval = _reference(data_dir, "train1", train=False, image_size=40)
    # Training rows carry no id: match each to its question by tokens and label, then check
    # the image is that question's crop (one question per (figure, tokens) here).
    keyed = {}
    for ex in ref.values():
        keyed.setdefault((tuple(ex["question_tokens"]), int(ex["label"])), []).append(ex["image"])
    shifted = 0
    for i in range(n):
        key = (tuple(batch["question_tokens"][i]), int(batch["label"][i]))
        assert any(np.array_equal(batch["image"][i], img) for img in keyed[key]), i
        shifted += not any(np.array_equal(batch["image"][i], e["image"]) for e in ref_eval.values())
    assert shifted >= 3  # the crops do move the images (5 questions)


def test_the_batch_crop_is_tfs_pad_then_crop():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(5, 12, 20, 3), dtype=np.uint8)
    source = figure_images.FigureImageSource("figureqa", image_shape=(12, 20, 3))
    source._blocks.append(images)
    rows = np.array([3, 0, 4, 4, 1])
    offsets = np.array([[0, 0], [8, 8], [4, 4], [1, 7], [8, 0]])
    got = source.images(rows, offsets, 8)
    for i, (r, (dy, dx)) in enumerate(zip(rows, offsets)):
        padded = tf.image.resize_with_crop_or_pad(images[r], 20, 28)
        want = tf.image.crop_to_bounding_box(padded, int(dy), int(dx), 12, 20).numpy()
        np.testing.assert_array_equal(got[i], want, err_msg=str(i))
    np.testing.assert_array_equal(source.images(rows), images[rows])
    np.testing.assert_array_equal(source.images(rows, offsets * 0 + 4, 8), images[rows])


def test_the_npy_cache_is_written_once_and_reused(data_dir, tmp_path, monkeypatch):
    cache = str(tmp_path / "cache")
    task = figureqa.make_task(data_dir=data_dir, image_size=32, image_cache_dir=cache)
    first = next(pipeline.eval_batches(task, "validation1", 4, 0, 1))
    files = sorted(os.listdir(cache))
    assert [f.rsplit(".", 1)[1] for f in files] == ["json", "npy"]
    assert "32x32_center" in files[0]
    # A second run of the same build and preprocessing decodes nothing: it memory-maps the file.
    again = figureqa.make_task(data_dir=data_dir, image_size=32, image_cache_dir=cache)
    monkeypatch.setattr(again.source, "image_fn", None)  # would fail if called
    second = next(pipeline.eval_batches(again, "validation1", 4, 0, 1))
    np.testing.assert_array_equal(first["image"], second["image"])
    assert isinstance(again.source._blocks[0], np.memmap)
    # Other preprocessing, another cache file beside it.
    other = figureqa.make_task(data_dir=data_dir, image_size=24, image_cache_dir=cache)
    assert next(pipeline.eval_batches(other, "validation1", 4, 0, 1))["image"].shape[1:] == (
        24,
        24,
        3,
    )
    assert len(os.listdir(cache)) == 4


def test_a_row_outside_the_cache_is_refused(data_dir):
    task = figureqa.make_task(data_dir=data_dir, image_size=16)
    next(pipeline.eval_batches(task, "validation1", 2, 0, 1))
    with pytest.raises(ValueError, match="not in the cache"):
        task.source.images(np.array([0, -1]))


def test_an_in_memory_cache_too_large_for_this_machine_is_refused(data_dir, monkeypatch):
    task = figureqa.make_task(data_dir=data_dir, image_size=16)
    monkeypatch.setattr(task.source, "image_shape", (2**20, 2**20, 3))  # 3 TiB per figure
    with pytest.raises(MemoryError, match="figureqa_task.image_cache_dir"):
        next(pipeline.eval_batches(task, "validation1", 2, 0, 1))
