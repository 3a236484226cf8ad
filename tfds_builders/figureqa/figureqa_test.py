"""Tests of the FigureQA builder on dummy_data/ (official layout, synthetic values).

Expected values are written out by hand from the fixture (see dummy_data/make_dummy_data.py).
"""

from __future__ import annotations

import io
import json
import pickle
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import tensorflow_datasets as tfds
from PIL import Image

from chartjax.data import tfds_records
from tfds_builders.figureqa import figureqa

DUMMY = Path(__file__).parent / "dummy_data"
SPLITS = {"train1": 2, "validation1": 1, "no_annot_test1": 2}  # figures (records)


class FigureqaBuilderTest(tfds.testing.DatasetBuilderTestCase):
    """TFDS's own checks: registration, shapes/dtypes vs features, exact split sizes, reload."""

    DATASET_CLASS = figureqa.Builder
    SPLITS = SPLITS
    SKIP_CHECKSUMS = True  # manual_dir only, nothing downloaded

    def _make_builder(self, config=None):
        # TFDS's checks read with as_dataset, which array_record (the default) cannot serve.
        return self.dataset_class(
            data_dir=self.tmp_dir, config=config, version=self.VERSION, file_format="tfrecord"
        )


def _build(manual_dir: Path, data_dir: Path) -> tfds.core.DatasetBuilder:
    builder = figureqa.Builder(data_dir=str(data_dir))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            manual_dir=str(manual_dir), compute_stats=tfds.download.ComputeStatsMode.SKIP
        )
    )
    return builder


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> dict[str, dict[str, dict]]:
    """{split: {id: example}} from one build of dummy_data."""
    builder = _build(DUMMY, tmp_path_factory.mktemp("figureqa_data"))
    out = {}
    for split in SPLITS:
        rows = tfds_records.split_examples(str(builder.data_path), split, skip_decoding=())
        out[split] = {ex["id"].decode(): ex for ex in rows}
    return out


def test_ids_and_indices(examples):
    assert sorted(examples["train1"]) == ["0/0", "0/1", "0/2", "1/3", "1/4"]
    assert sorted(examples["validation1"]) == ["0/0", "0/1"]
    assert sorted(examples["no_annot_test1"]) == ["0/0", "1/1", "1/2"]
    for split in SPLITS:
        for key, ex in examples[split].items():
            assert key == f"{ex['image_index']}/{ex['question_index']}"


def test_questions_and_answers(examples):
    train = examples["train1"]
    assert {k: int(ex["answer"]) for k, ex in train.items()} == {
        "0/0": 1,
        "0/1": 1,
        "0/2": 0,
        "1/3": 1,
        "1/4": 0,
    }
    assert {k: int(ex["question_id"]) for k, ex in train.items()} == {
        "0/0": 0,
        "0/1": 3,
        "0/2": 1,
        "1/3": 14,
        "1/4": 8,
    }
    assert train["0/1"]["question"] == b"Is Dark Orange greater than Web Green?"
    assert [int(ex["answer"]) for ex in examples["validation1"].values()] == [1, 1]
    # The test split has no answers: -1 everywhere.
    assert [int(ex["answer"]) for ex in examples["no_annot_test1"].values()] == [-1, -1, -1]
    assert examples["no_annot_test1"]["1/2"]["question"] == (
        b"Does Peru have the minimum area under the curve?"
    )


def test_colour_fields(examples):
    two = examples["train1"]["0/1"]  # the two-colour variant
    assert (two["color1_name"], int(two["color1_id"])) == (b"Dark Orange", 17)
    assert (two["color2_name"], int(two["color2_id"])) == (b"Web Green", 41)
    np.testing.assert_array_equal(two["color1_rgb"], [255, 140, 0])
    np.testing.assert_array_equal(two["color2_rgb"], [0, 128, 0])
    assert two["color1_rgb"].dtype == np.int32
    one = examples["train1"]["0/0"]  # the one-colour variant
    assert (one["color2_name"], int(one["color2_id"])) == (b"--None--", -1)
    np.testing.assert_array_equal(one["color2_rgb"], [-1, -1, -1])


def test_figure_type_and_annotation(examples):
    train = examples["train1"]
    assert {k: ex["figure_type"] for k, ex in train.items()} == {
        "0/0": b"vbar_categorical",
        "0/1": b"vbar_categorical",
        "0/2": b"vbar_categorical",
        "1/3": b"line",
        "1/4": b"line",
    }
    assert examples["validation1"]["0/0"]["figure_type"] == b"hbar_categorical"
    for ex in examples["no_annot_test1"].values():
        assert ex["figure_type"] == b"unknown"
        assert ex["annotation"] == b""


def test_annotation_round_trip_normalizes_both_shapes(examples):
    raw = {e["image_index"]: e for e in json.loads((DUMMY / "train1/annotations.json").read_text())}

    # vbar: real-file shape (double-nested figure_info, x_gridlines): only the bbox is unwrapped.
    vbar = json.loads(examples["train1"]["0/2"]["annotation"])
    want = json.loads(json.dumps(raw[0]))
    want["general_figure_info"]["figure_info"] = {"bbox": {"x": 0, "y": 0, "w": 400, "h": 400}}
    assert vbar == want
    assert vbar["models"][0]["y"] == [40.0, 61.25]
    assert vbar["general_figure_info"]["title"]["bbox"]["w"] == 50.234375
    assert vbar["general_figure_info"]["x_gridlines"]["values"] == ["Web Green", "Dark Orange"]

    # line: docs shape (single bbox, x_grid_lines/y_grid_lines): gridline keys renamed.
    line = json.loads(examples["train1"]["1/4"]["annotation"])
    info = line["general_figure_info"]
    assert "x_grid_lines" not in info and "y_grid_lines" not in info
    assert info["y_gridlines"] == raw[1]["general_figure_info"]["y_grid_lines"]
    assert info["x_gridlines"] == {"values": [], "bboxes": []}
    assert info["figure_info"] == {"bbox": {"x": 0, "y": 0, "w": 600, "h": 400}}
    assert line["models"] == raw[1]["models"]
    # All questions of an image carry the same entry.
    assert examples["train1"]["1/3"]["annotation"] == examples["train1"]["1/4"]["annotation"]


def test_images_are_rgb(examples):
    vbar = examples["train1"]["0/0"]["image"]
    assert vbar.shape == (8, 12, 3) and vbar.dtype == np.uint8  # height 8, width 12
    assert tuple(vbar[5, 3]) == (0, 128, 0)
    assert tuple(vbar[1, 8]) == (255, 140, 0)
    assert tuple(vbar[0, 3]) == (255, 255, 255)
    # RGBA: transparent (0, 0, 0, 0) pixels become white, opaque ones keep their colour.
    line = examples["train1"]["1/3"]["image"]
    assert tuple(line[0, 0]) == (255, 255, 255)
    assert tuple(line[2, 6]) == (0, 0, 205)
    assert tuple(line[5, 11]) == (220, 20, 60)
    palette = examples["validation1"]["0/0"]["image"]  # mode P
    assert tuple(palette[3, 0]) == (205, 133, 63)
    assert tuple(palette[6, 0]) == (255, 255, 255)
    grey = examples["no_annot_test1"]["0/0"]["image"]  # mode L
    assert grey.shape == (8, 12, 3) and np.all(grey == 200)
    assert np.all(examples["no_annot_test1"]["1/1"]["image"] == 30)


# ------------------------------------------------------------------------------ bad input


@pytest.fixture
def release(tmp_path) -> Path:
    """A writable copy of the train1 fixture split."""
    root = tmp_path / "release"
    shutil.copytree(DUMMY / "train1", root / "train1")
    return root


def _edit_qa(root: Path, edit) -> None:
    path = root / "train1/qa_pairs.json"
    doc = json.loads(path.read_text())
    edit(doc["qa_pairs"])
    path.write_text(json.dumps(doc))


def test_missing_png_names_the_file(release, tmp_path):
    (release / "train1/png/1.png").unlink()
    with pytest.raises(FileNotFoundError, match=r"train1/png/1\.png.*qa pair 3"):
        _build(release, tmp_path / "out")


def test_malformed_json_names_the_file(release, tmp_path):
    (release / "train1/qa_pairs.json").write_text('{"qa_pairs": [')
    with pytest.raises(ValueError, match=r"train1/qa_pairs\.json: malformed JSON"):
        _build(release, tmp_path / "out")


def test_malformed_annotations_name_the_file(release):
    (release / "train1/annotations.json").write_text("[{]")
    with pytest.raises(ValueError, match=r"train1/annotations\.json: malformed JSON"):
        figureqa.split_image_groups(release / "train1", release / "spill")


def test_missing_key_names_split_position_and_key(release, tmp_path):
    _edit_qa(release, lambda rows: rows[2].pop("question_id"))
    with pytest.raises(ValueError, match=r"split train1, qa pair 2: missing key 'question_id'"):
        _build(release, tmp_path / "out")


def test_answer_required_outside_no_annot(release):
    _edit_qa(release, lambda rows: rows[4].pop("answer"))
    with pytest.raises(ValueError, match=r"split train1, qa pair 4: missing key 'answer'"):
        figureqa.split_image_groups(release / "train1", release / "spill")


@pytest.mark.parametrize(
    ("key", "value"),
    [("answer", 2), ("question_id", 15), ("color1_rgb", [1, 2]), ("image_index", "0")],
)
def test_bad_values_are_rejected(release, key, value):
    _edit_qa(release, lambda rows: rows[1].__setitem__(key, value))
    with pytest.raises(ValueError, match=rf"split train1, qa pair 1: key '{key}'"):
        figureqa.split_image_groups(release / "train1", release / "spill")


def test_missing_annotation_entry(release):
    path = release / "train1/annotations.json"
    path.write_text(json.dumps([e for e in json.loads(path.read_text()) if e["image_index"] != 1]))
    with pytest.raises(ValueError, match=r"annotations\.json: no entry for image_index 1"):
        figureqa.split_image_groups(release / "train1", release / "spill")


def test_unknown_figure_type(release):
    path = release / "train1/annotations.json"
    entries = json.loads(path.read_text())
    entries[0]["type"] = "scatter"
    path.write_text(json.dumps(entries))
    with pytest.raises(ValueError, match=r"annotations\.json: entry 0: unknown figure type"):
        figureqa.split_image_groups(release / "train1", release / "spill")


def test_corrupt_png_names_the_file(release):
    (release / "train1/png/0.png").write_bytes(b"not a png")
    image_index, qa, annotation = figureqa.split_image_groups(release / "train1", release / "s")[0]
    with pytest.raises(ValueError, match=r"train1/png/0\.png: cannot decode image"):
        figureqa.figure_example(release / "train1", image_index, qa, annotation)


def test_no_split_folder(tmp_path):
    (tmp_path / "parent/figureqa").mkdir(parents=True)  # the release's parent was given
    with pytest.raises(FileNotFoundError, match=r"No FigureQA split folder.*\['figureqa'\]"):
        _build(tmp_path / "parent", tmp_path / "out")


# ------------------------------------------------------------------------------ image reading


def _png16_rgb(path: Path, pixels: np.ndarray) -> None:
    """Writes a 16-bit-per-channel RGB PNG by hand (PIL cannot write this mode)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    h, w, _ = pixels.shape
    rows = b"".join(b"\x00" + pixels[y].astype(">u2").tobytes() for y in range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _pixels(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as img:
        assert img.mode == "RGB"
        return np.asarray(img)


def test_rgb8_png_passes_through_unchanged():
    path = DUMMY / "train1/png/0.png"  # 8-bit RGB
    assert figureqa.read_rgb_png(path) == path.read_bytes()


def test_png16_rgb_is_reencoded_as_8_bit(tmp_path):
    values = np.full((2, 3, 3), 0x8000, dtype=np.uint16)
    values[0, 0] = (0xFFFF, 0x0000, 0x1234)
    _png16_rgb(tmp_path / "wide.png", values)
    out = figureqa.read_rgb_png(tmp_path / "wide.png")
    assert out[24:26] == bytes([8, 2])  # IHDR: 8-bit RGB
    pixels = _pixels(out)
    assert tuple(pixels[0, 0]) == (0xFF, 0x00, 0x12) and tuple(pixels[1, 2]) == (0x80,) * 3


def test_opaque_rgba_keeps_colours(tmp_path):
    Image.new("RGBA", (3, 2), (10, 20, 30, 255)).save(tmp_path / "opaque.png")
    assert np.all(_pixels(figureqa.read_rgb_png(tmp_path / "opaque.png")) == [10, 20, 30])


def test_shards_are_picklable_beam_tasks(tmp_path):
    """What a Beam pipeline ships to workers: one shard's example function, from spill files."""
    split = DUMMY / "train1"
    shards = figureqa.plan_shards(split, tmp_path, figures_per_shard=1)
    assert len(shards) == 2  # two PNGs, one figure per shard: image_index % 2
    shipped = pickle.loads(pickle.dumps(shards))
    got = {key: [q["id"] for q in ex["questions"]] for shard in shipped for key, ex in shard()}
    assert got == {"0": ["0/0", "0/1", "0/2"], "1": ["1/3", "1/4"]}
    groups = figureqa.split_image_groups(split, tmp_path / "again")
    assert [(i, [q for q, _ in qa]) for i, qa, _ in groups] == [(0, [0, 1, 2]), (1, [3, 4])]


@pytest.mark.parametrize("white_pixel", [False, True])
def test_png16_grey_scales_by_bit_depth(tmp_path, white_pixel):
    values = np.full((2, 3), 200, dtype=np.uint16)
    if white_pixel:
        values[0, 0] = 0xFFFF
    Image.fromarray(values, mode="I;16").save(tmp_path / "grey16.png")
    pixels = _pixels(figureqa.read_rgb_png(tmp_path / "grey16.png"))
    assert tuple(pixels[1, 2]) == (1, 1, 1)  # 200 / 65535 of full scale, with or without white
    assert tuple(pixels[0, 0]) == ((255,) * 3 if white_pixel else (1, 1, 1))
