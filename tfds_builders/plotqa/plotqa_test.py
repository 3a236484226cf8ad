"""PlotQA builder on dummy_data/ (the release layout, synthetic values; make_dummy_data.py).

Expected values are written out by hand from the fixture.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
import tensorflow_datasets as tfds

from chartjax.data import tfds_records
from chartjax.tools import score
from tfds_builders.common.bad_input import BadInputError
from tfds_builders.common.input_fingerprint import FINGERPRINT_NAME
from tfds_builders.plotqa import plotqa, plotqa_table

DUMMY = Path(__file__).resolve().parent / "dummy_data"
SPLITS = {"train": 3, "validation": 2, "test": 1}  # plots (records), both configs
WHITE, RED, BLUE = (255, 255, 255), (200, 30, 30), (30, 30, 200)


class PlotqaBuilderTest(tfds.testing.DatasetBuilderTestCase):
    """TFDS's own checks for both configs: features, exact split sizes, reload."""

    DATASET_CLASS = plotqa.Builder
    SPLITS = SPLITS
    SKIP_CHECKSUMS = True  # manual_dir only, nothing downloaded

    def _make_builder(self, config=None):
        # TFDS's checks read with as_dataset, which array_record (the default) cannot serve.
        return self.dataset_class(
            data_dir=self.tmp_dir, config=config, version=self.VERSION, file_format="tfrecord"
        )


def _build(manual_dir: Path, data_dir: Path, config: str = "v2") -> tfds.core.DatasetBuilder:
    builder = plotqa.Builder(data_dir=os.fspath(data_dir), config=config)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            manual_dir=os.fspath(manual_dir), compute_stats=tfds.download.ComputeStatsMode.SKIP
        )
    )
    return builder


def _questions(builder, split) -> dict[str, dict]:
    rows = tfds_records.split_examples(os.fspath(builder.data_path), split, skip_decoding=())
    return {ex["id"].decode(): ex for ex in rows}


def _records(builder, split) -> dict[str, dict]:
    source = tfds_records.data_source(os.fspath(builder.data_path), split, skip_decoding=())
    return {r["id"].decode(): r for r in (source[i] for i in range(len(source)))}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("plotqa_data")


@pytest.fixture(scope="module")
def builders(data_dir) -> dict[str, tfds.core.DatasetBuilder]:
    return {config: _build(DUMMY, data_dir, config) for config in ("v1", "v2")}


@pytest.fixture(scope="module")
def built(builders) -> dict[str, dict[str, dict[str, dict]]]:
    """{config: {split: {question id: example}}}."""
    return {c: {s: _questions(b, s) for s in SPLITS} for c, b in builders.items()}


def test_question_ids_and_counts_per_config_and_split(built):
    assert {c: {s: sorted(q) for s, q in by.items()} for c, by in built.items()} == {
        "v1": {
            "train": ["v1/train/0", "v1/train/1", "v1/train/2", "v1/train/4"],
            "validation": ["v1/validation/10", "v1/validation/11"],  # qa_pairs_v1.json, a list
            "test": ["v1/test/7"],
        },
        "v2": {
            "train": [f"v2/train/{i}" for i in range(6)],
            "validation": ["v2/validation/10", "v2/validation/11", "v2/validation/12"],
            "test": ["v2/test/7", "v2/test/8"],
        },
    }


def test_question_fields(built):
    q = built["v2"]["train"]["v2/train/3"]
    assert q["question_string"] == b"What is the total Exports of Kenya?"
    assert (q["answer"], q["answer_number"]) == (b"7.25", 7.25)
    assert (q["template"], q["type"], q["qid"]) == (b"arithmetic", b"vbar_categorical", b"Q4")
    assert (q["question_id"], q["question_index"], q["image_index"]) == (b"3", 3, 0)
    text = built["v2"]["train"]["v2/train/2"]
    assert text["answer"] == b'"Peru"' and math.isnan(text["answer_number"])
    assert built["v2"]["train"]["v2/train/1"]["answer"] == b"14"
    assert built["v1"]["validation"]["v1/validation/11"]["answer_number"] == 3.5
    assert built["v2"]["test"]["v2/test/8"]["answer_number"] == 81.0


def test_a_plot_is_stored_once_with_its_questions_in_file_order(builders):
    records = _records(builders["v2"], "train")
    assert sorted(records) == ["0", "1", "2"]
    plot = records["0"]
    assert plot["questions"]["id"].tolist() == [b"v2/train/1", b"v2/train/3", b"v2/train/4"]
    assert plot["questions"]["question_index"].tolist() == [1, 3, 4]
    assert plot["plot_type"] == b"vbar_categorical" and plot["image_index"] == 0
    annotation = json.loads(plot["annotation"])
    assert annotation["models"][1]["y"] == [3, 4.25]
    assert len(_records(builders["v1"], "train")["0"]["questions"]["id"]) == 2


def test_tables_derived_from_the_annotations(builders):
    train = _records(builders["v2"], "train")
    assert train["0"]["table"] == b"Year,Chile,Kenya\n2010,12.5,3\n2011,14,4.25\n"
    # hbar_categorical with the categories on y: the y axis's title heads the first column.
    assert train["1"]["table"] == b"Country,Rainfall\nPeru,800\nChad,650.5\n"
    assert train["2"]["table"] == b"Year,Population\n1990,5\n2000,7\n2010,9\n"


def test_table_of_uneven_series_and_of_no_models():
    entry = {
        "models": [
            {"label": "a", "x": ["p", "q"], "y": [1, 2]},
            {"name": "b", "x": ["q", "r, s"], "y": [3.5, 4]},
        ]
    }
    assert plotqa_table.plot_table(entry) == ',a,b\np,1,\nq,2,3.5\n"r, s",,4\n'
    assert plotqa_table.plot_table({"models": []}) == ""


def test_images_from_png_and_from_the_tar_are_rgb_on_white(builders):
    train = _records(builders["v2"], "train")
    rgba = train["0"]["image"]
    assert rgba.shape == (4, 6, 3) and rgba.dtype == np.uint8
    assert (tuple(rgba[0, 0]), tuple(rgba[0, 5])) == (WHITE, RED)
    assert tuple(train["2"]["image"][1, 1]) == BLUE
    val = _records(builders["v2"], "validation")  # png.tar.gz only, members 1 then 0
    assert (tuple(val["0"]["image"][0, 5]), tuple(val["1"]["image"][0, 5])) == (RED, BLUE)
    assert tuple(val["1"]["image"][0, 0]) == WHITE


def test_build_is_array_record_with_its_input_fingerprint(builders):
    builder = builders["v1"]
    assert builder.info.file_format.value == "array_record"
    data_path = Path(builder.data_path)
    assert list(data_path.glob("plotqa-train.array_record-*"))
    fingerprint = json.loads((data_path / FINGERPRINT_NAME).read_text())
    assert sorted(fingerprint["parts"]) == ["make_dummy_data.py", "test", "train", "val"]
    assert not (data_path / "_spill").exists()


def test_shard_count_does_not_change_the_examples(tmp_path):
    one = plotqa.split_examples(DUMMY / "val", tmp_path / "a", "v2", "validation")
    shards = plotqa.plan_shards(DUMMY / "val", tmp_path / "b", "v2", "validation", 1)
    assert len(shards) == 2
    many = sorted((kv for s in shards for kv in s()), key=lambda kv: int(kv[0]))
    assert [k for k, _ in one] == ["0", "1"]
    assert [(k, ex["image"], ex["questions"]) for k, ex in one] == [
        (k, ex["image"], ex["questions"]) for k, ex in many
    ]


def test_tfds_references_for_chartjax_score(builders, data_dir, tmp_path):
    rows, split, _ = score.load_tfds("tfds:plotqa/v2:validation", "plotqa", os.fspath(data_dir))
    assert split == "validation"
    assert rows == {
        "v2/validation/10": {
            "id": "v2/validation/10",
            "target": "Feb",
            "meta": {"template": "min_max", "question_type": "vbar_categorical"},
        },
        "v2/validation/11": {
            "id": "v2/validation/11",
            "target": 3.5,
            "meta": {"template": "data_retrieval", "question_type": "dot_line"},
        },
        "v2/validation/12": {
            "id": "v2/validation/12",
            "target": 50,
            "meta": {"template": "arithmetic", "question_type": "vbar_categorical"},
        },
    }
    predictions = tmp_path / "predictions.jsonl"
    answers = {"10": "feb", "11": "3.6", "12": "60"}  # 3.6 is within 5% of 3.5; 60 is not 50
    predictions.write_text(
        "".join(
            json.dumps({"id": f"v2/validation/{k}", "prediction": v}) + "\n"
            for k, v in answers.items()
        )
    )
    out = tmp_path / "metrics.json"
    argv = ["--task", "plotqa", "--predictions", os.fspath(predictions), "--out", os.fspath(out)]
    argv += ["--references", "tfds:plotqa/v2:validation", "--data_dir", os.fspath(data_dir)]
    assert score.main(argv) == 0
    metrics = json.loads(out.read_text())
    assert metrics["num_examples"] == 3
    assert metrics["metrics"]["relaxed_accuracy"] == pytest.approx(2 / 3)
    by_template = metrics["breakdowns"]["template"]
    assert {k: v["n"] for k, v in by_template.items()} == {
        "min_max": 1,
        "data_retrieval": 1,
        "arithmetic": 1,
    }


# --- bad input -----------------------------------------------------------------------------


@pytest.fixture
def release(tmp_path) -> Path:
    """A writable copy of the fixture."""
    root = tmp_path / "PlotQA"
    shutil.copytree(DUMMY, root)
    return root


def _plan(release: Path, folder: str, tmp_path: Path, config: str = "v2"):
    return plotqa.split_examples(release / folder, tmp_path / "spill", config, "x")


def _edit_pairs(path: Path, edit) -> None:
    doc = json.loads(path.read_text())
    edit(doc["qa_pairs"] if isinstance(doc, dict) else doc)
    path.write_text(json.dumps(doc))


def test_duplicate_question_id_names_both_entries(release, tmp_path):
    _edit_pairs(release / "train/qa_pairs_V2.json", lambda p: p[4].__setitem__("question_id", 1))
    with pytest.raises(BadInputError, match=r"train/qa_pairs_V2\.json: entries 1 and 4: dupl"):
        _build(release, tmp_path / "out")


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda p: p[2].pop("answer"), "missing key 'answer'"),
        (lambda p: p[2].__setitem__("answer", [1]), "key 'answer' must be a number or a string"),
        (lambda p: p[2].__setitem__("image_index", -1), "key 'image_index' must be an integer"),
        (lambda p: p[2].__setitem__("image_index", 9), "image_index 9 has no entry in .*annot"),
        (lambda p: p.__setitem__(2, "x"), "expected an object, got str"),
    ],
)
def test_bad_qa_entries_name_the_file_and_entry(release, tmp_path, edit, reason):
    _edit_pairs(release / "val/qa_pairs_V2.json", edit)
    with pytest.raises(BadInputError, match=rf"val/qa_pairs_V2\.json: entry 2: {reason}"):
        _plan(release, "val", tmp_path)


def test_malformed_qa_json_names_the_file(release, tmp_path):
    (release / "test/qa_pairs_V1.json").write_text('{"qa_pairs": [{"image_index": ')
    with pytest.raises(ValueError, match=r"test/qa_pairs_V1\.json: malformed JSON"):
        _plan(release, "test", tmp_path, "v1")


def test_missing_qa_file_names_both_spellings(release, tmp_path):
    (release / "val/qa_pairs_v1.json").unlink()
    with pytest.raises(BadInputError, match=r"val: no qa_pairs_V1\.json or qa_pairs_v1\.json"):
        _plan(release, "val", tmp_path, "v1")


def test_duplicate_image_index_in_annotations_names_both_entries(release, tmp_path):
    path = release / "train/annotations.json"
    entries = json.loads(path.read_text())
    entries[2]["image_index"] = 0
    path.write_text(json.dumps(entries))
    with pytest.raises(BadInputError, match=r"annotations\.json: entries 0 and 2: duplicate im"):
        _plan(release, "train", tmp_path)


def test_missing_png_names_the_image_and_the_annotation_entry(release, tmp_path):
    (release / "train/png/1.png").unlink()
    with pytest.raises(BadInputError) as err:
        _plan(release, "train", tmp_path)
    assert "train/png/1.png: image file not found" in str(err.value)
    assert "train/annotations.json entry 1" in str(err.value)


def _rewrite_tar(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _tar_members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def test_tar_without_a_plots_image_names_the_tar_and_the_entry(release, tmp_path):
    tar = release / "val/png.tar.gz"
    members = _tar_members(tar)
    del members["png/0.png"]
    _rewrite_tar(tar, {**members, "png/7.png": members["png/1.png"], "png/notes.txt": b"x"})
    with pytest.raises(BadInputError, match=r"png\.tar\.gz: no member 0\.png for image_index 0"):
        _plan(release, "val", tmp_path)


def test_tar_with_an_image_twice_names_both_members(release, tmp_path):
    tar = release / "val/png.tar.gz"
    members = _tar_members(tar)
    _rewrite_tar(tar, {**members, "extra/0.png": members["png/0.png"]})
    with pytest.raises(BadInputError, match=r"members 'png/0\.png' and 'extra/0\.png' are both"):
        _plan(release, "val", tmp_path)


def test_undecodable_tar_member_names_the_tar_member_and_the_entry(release, tmp_path):
    tar = release / "val/png.tar.gz"
    _rewrite_tar(tar, {**_tar_members(tar), "png/1.png": b"not a png"})
    with pytest.raises(BadInputError, match=r"png\.tar\.gz member png/1\.png: cannot decode"):
        _plan(release, "val", tmp_path)


def test_a_damaged_tar_is_named(release, tmp_path):
    (release / "val/png.tar.gz").write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(BadInputError, match=r"val/png\.tar\.gz: cannot read the tar"):
        _plan(release, "val", tmp_path)


def test_no_split_folder(tmp_path):
    (tmp_path / "parent/PlotQA").mkdir(parents=True)
    with pytest.raises(BadInputError, match=r"no PlotQA split folder.*\['PlotQA'\]"):
        _build(tmp_path / "parent", tmp_path / "out")
