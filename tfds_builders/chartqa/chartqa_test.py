"""ChartQA builder on dummy_data/ (the release layout, synthetic values; make_dummy_data.py).

Expected values are written out by hand from the fixture.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow_datasets as tfds

from chartjax.data import tfds_records
from chartjax.tools import score
from tfds_builders.chartqa import chartqa
from tfds_builders.common.bad_input import REPORT_NAME, BadInputError
from tfds_builders.common.input_fingerprint import FINGERPRINT_NAME

DUMMY = Path(__file__).resolve().parent / "dummy_data"
SPLITS = {"train": 2, "validation": 2, "test": 2}  # charts (records)
WHITE, RED, BLUE = (255, 255, 255), (200, 30, 30), (30, 30, 200)


class ChartqaBuilderTest(tfds.testing.DatasetBuilderTestCase):
    """TFDS's own checks: registration, shapes/dtypes vs features, exact split sizes, reload."""

    DATASET_CLASS = chartqa.Builder
    SPLITS = SPLITS
    SKIP_CHECKSUMS = True  # manual_dir only, nothing downloaded

    def _make_builder(self, config=None):
        # TFDS's checks read with as_dataset, which array_record (the default) cannot serve.
        return self.dataset_class(
            data_dir=self.tmp_dir, config=config, version=self.VERSION, file_format="tfrecord"
        )


def _build(manual_dir: Path, data_dir: Path, **kwargs) -> tfds.core.DatasetBuilder:
    builder = chartqa.Builder(data_dir=os.fspath(data_dir), **kwargs)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            manual_dir=os.fspath(manual_dir), compute_stats=tfds.download.ComputeStatsMode.SKIP
        )
    )
    return builder


def _questions(builder, split) -> dict[str, dict]:
    rows = tfds_records.split_examples(os.fspath(builder.data_path), split, skip_decoding=())
    return {ex["id"].decode(): ex for ex in rows}


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("chartqa_data")
    return data_dir, _build(DUMMY, data_dir)


@pytest.fixture(scope="module")
def built(build) -> dict[str, dict[str, dict]]:
    """{split: {question id: example}} from one build of dummy_data."""
    _, builder = build
    return {split: _questions(builder, split) for split in SPLITS}


def test_ids_are_split_source_and_index_in_the_file(built):
    assert sorted(built["train"]) == [
        "train/augmented/0",
        "train/augmented/1",
        "train/human/0",
        "train/human/1",
        "train/human/2",
    ]
    # The release folder is val/; the split (and so the id) is `validation`.
    assert sorted(built["validation"]) == [
        "validation/augmented/0",
        "validation/augmented/1",
        "validation/human/0",
        "validation/human/1",
    ]
    assert sorted(built["test"]) == ["test/augmented/0", "test/human/0", "test/human/1"]


def test_questions_labels_and_sources(built):
    train = built["train"]
    q = train["train/human/1"]
    assert q["query"] == b"What is the difference between Male and Female in 35+?"
    assert (q["label"], q["source"]) == (b"1.5", b"human")
    assert train["train/augmented/0"]["label"] == b"14"
    assert train["train/augmented/0"]["source"] == b"augmented"
    assert built["validation"]["validation/human/0"]["label"] == b"Kenya"
    assert built["test"]["test/human/1"]["query"] == (
        b"How many times larger is In store than Online?"
    )
    sources = {k: ex["source"].decode() for split in built.values() for k, ex in split.items()}
    assert all(key.split("/")[1] == source for key, source in sources.items())


def test_a_chart_is_stored_once_with_all_its_questions(build):
    _, builder = build
    source = tfds_records.data_source(os.fspath(builder.data_path), "train", skip_decoding=())
    records = {r["id"].decode(): r for r in (source[i] for i in range(len(source)))}
    assert sorted(records) == ["multi_col_7.png", "two_col_1.png"]
    # Human questions first, then augmented, each in file order.
    assert records["two_col_1.png"]["questions"]["id"].tolist() == [
        b"train/human/0",
        b"train/human/2",
        b"train/augmented/1",
    ]
    assert records["multi_col_7.png"]["questions"]["id"].tolist() == [
        b"train/human/1",
        b"train/augmented/0",
    ]


def test_table_text_as_written(built):
    table = built["train"]["train/human/1"]["table"].decode()
    assert (
        table == "Characteristic,Male,Female\nUnder 18,12.0,14.0\n18-34,nan,22.0\n35+,40.0,38.5\n"
    )
    assert (
        built["validation"]["validation/human/0"]["table"]
        == b"Country,Value\nChile,2.3\nKenya,5.7\n"
    )


def test_annotation_present_or_empty(built):
    doc = json.loads(built["train"]["train/human/0"]["annotation"])
    assert doc["type"] == "v_bar"
    assert doc["models"][0]["x"] == ["2018", "2019", "2020"]
    assert built["train"]["train/human/1"]["annotation"] == b""  # annotations/ lacks its file
    for split in ("validation", "test"):  # no annotations/ folder (the first public version)
        assert {ex["annotation"] for ex in built[split].values()} == {b""}


def test_images_are_rgb_on_white(built):
    bars = built["train"]["train/human/0"]["image"]
    assert bars.shape == (4, 6, 3) and bars.dtype == np.uint8
    assert tuple(bars[0, 0]) == WHITE
    assert (tuple(bars[2, 1]), tuple(bars[2, 4])) == (RED, BLUE)
    rgba = built["train"]["train/human/1"]["image"]  # transparent -> white
    assert (tuple(rgba[1, 2]), tuple(rgba[1, 0])) == (RED, WHITE)
    pal = built["validation"]["validation/human/0"]["image"]
    assert (tuple(pal[3, 0]), tuple(pal[0, 0])) == (BLUE, WHITE)
    assert np.all(built["validation"]["validation/human/1"]["image"] == 200)


def test_build_is_array_record_with_its_input_fingerprint(build):
    _, builder = build
    assert builder.info.file_format.value == "array_record"
    data_path = Path(builder.data_path)
    assert list(data_path.glob("chartqa-train.array_record-*"))
    fingerprint = json.loads((data_path / FINGERPRINT_NAME).read_text())
    assert fingerprint["files"] == len([p for p in DUMMY.rglob("*") if p.is_file()])
    assert sorted(fingerprint["parts"]) == ["make_dummy_data.py", "test", "train", "val"]


def test_tfds_references_for_chartjax_score(build, tmp_path):
    """`tfds:chartqa:<split>` gives one reference row per question, its source in `meta`."""
    data_dir, builder = build
    rows, split, _ = score.load_tfds("tfds:chartqa:validation", "chartqa", os.fspath(data_dir))
    assert split == "validation"
    assert rows == {
        "validation/human/0": {
            "id": "validation/human/0",
            "target": "Kenya",
            "meta": {"source": "human"},
        },
        "validation/human/1": {
            "id": "validation/human/1",
            "target": "95",
            "meta": {"source": "human"},
        },
        "validation/augmented/0": {
            "id": "validation/augmented/0",
            "target": "44",
            "meta": {"source": "augmented"},
        },
        "validation/augmented/1": {
            "id": "validation/augmented/1",
            "target": "2.3",
            "meta": {"source": "augmented"},
        },
    }
    # End to end: three of four right (2.4 is within 5% of 2.3; 50 is not 44).
    predictions = tmp_path / "predictions.jsonl"
    answers = {"human/0": "kenya", "human/1": "95", "augmented/0": "50", "augmented/1": "2.4"}
    predictions.write_text(
        "".join(
            json.dumps({"id": f"validation/{k}", "prediction": v}) + "\n"
            for k, v in answers.items()
        )
    )
    out = tmp_path / "metrics.json"
    argv = ["--task", "chartqa", "--predictions", os.fspath(predictions), "--out", os.fspath(out)]
    argv += ["--references", "tfds:chartqa:validation", "--data_dir", os.fspath(data_dir)]
    assert score.main(argv) == 0
    metrics = json.loads(out.read_text())
    assert metrics["split"] == "validation" and metrics["num_examples"] == 4
    assert metrics["metrics"]["relaxed_accuracy"] == pytest.approx(0.75)
    # The scorer reads meta.source: one entry per source, 2 questions each.
    by_source = metrics["breakdowns"]["source"]
    assert {k: v["n"] for k, v in by_source.items()} == {"human": 2, "augmented": 2}


# --- bad input -----------------------------------------------------------------------------


@pytest.fixture
def release(tmp_path) -> Path:
    """A writable copy of the val/ fixture split."""
    root = tmp_path / "ChartQA Dataset"
    shutil.copytree(DUMMY / "val", root / "val")
    return root


def _edit_qa(path: Path, edit) -> None:
    entries = json.loads(path.read_text())
    edit(entries)
    path.write_text(json.dumps(entries))


def test_missing_png_names_the_image_the_json_file_and_the_entry(release, tmp_path):
    (release / "val/png/41699051005347.png").unlink()
    with pytest.raises(BadInputError) as err:
        _build(release, tmp_path / "out")
    message = str(err.value)
    assert "val/png/41699051005347.png: image file not found" in message
    assert "val/val_human.json entry 1" in message  # the first question naming the chart


def test_missing_table_names_the_table_the_json_file_and_the_entry(release, tmp_path):
    (release / "val/tables/OECD_GDP_growth_2015.csv").unlink()
    with pytest.raises(BadInputError) as err:
        _build(release, tmp_path / "out")
    message = str(err.value)
    assert "val/tables/OECD_GDP_growth_2015.csv: table file not found" in message
    assert "val/val_human.json entry 0" in message


def test_malformed_json_names_the_file(release, tmp_path):
    (release / "val/val_augmented.json").write_text('[{"imgname": ')
    with pytest.raises(ValueError, match=r"val/val_augmented\.json: malformed JSON"):
        _build(release, tmp_path / "out", skip_bad=True)  # not a skippable entry


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda e: e[1].pop("label"), "missing key 'label'"),
        (lambda e: e[1].__setitem__("label", 44), "key 'label' must be a string, got 44"),
        (lambda e: e[1].__setitem__("imgname", "../x.png"), "imgname '../x.png' is not a file"),
        (lambda e: e.__setitem__(1, ["a"]), "expected an object, got list"),
    ],
)
def test_bad_entries_name_the_file_and_entry(release, tmp_path, edit, reason):
    _edit_qa(release / "val/val_augmented.json", edit)
    with pytest.raises(BadInputError, match=rf"val/val_augmented\.json: entry 1: {reason}"):
        _build(release, tmp_path / "out")


def test_malformed_annotation_names_the_file(release, tmp_path):
    (release / "val/annotations").mkdir()
    (release / "val/annotations/41699051005347.json").write_text("{oops")
    with pytest.raises(BadInputError, match=r"annotations/41699051005347\.json: malformed JSON"):
        _build(release, tmp_path / "out")


def test_skip_bad_counts_every_question_of_a_bad_chart(release, tmp_path):
    (release / "val/png/41699051005347.png").unlink()  # human/1 and augmented/0 ask about it
    _edit_qa(release / "val/val_augmented.json", lambda e: e[1].pop("query"))
    builder = _build(release, tmp_path / "out", skip_bad=True)
    assert sorted(_questions(builder, "validation")) == ["validation/human/0"]
    report = json.loads((Path(builder.data_dir) / REPORT_NAME).read_text())
    assert report["skipped_per_split"] == {"validation": 3}
    assert any("entry 1: missing key 'query'" in m for m in report["messages"])


def test_a_split_with_one_question_file_builds(release, tmp_path):
    (release / "val/val_human.json").unlink()
    builder = _build(release, tmp_path / "out")
    assert sorted(_questions(builder, "validation")) == [
        "validation/augmented/0",
        "validation/augmented/1",
    ]


def test_a_split_of_charts_and_tables_without_questions_builds(release, tmp_path):
    """Charts and tables only (DePlot-style training): every image of png/ with its table and
    an empty question sequence; a chart without its table is named."""
    (release / "val/val_human.json").unlink()
    (release / "val/val_augmented.json").unlink()
    builder = _build(release, tmp_path / "out")
    source = tfds_records.data_source(os.fspath(builder.data_path), "validation", ())
    records = sorted((source[i] for i in range(len(source))), key=lambda r: r["id"])
    assert [r["id"].decode() for r in records] == ["41699051005347.png", "OECD_GDP_growth_2015.png"]
    assert [len(r["questions"]["id"]) for r in records] == [0, 0]
    table = (release / "val/tables/41699051005347.csv").read_text(encoding="utf-8-sig")
    assert records[0]["table"].decode() == table
    assert _questions(builder, "validation") == {}  # no question to expand
    (release / "val/tables/41699051005347.csv").unlink()
    with pytest.raises(BadInputError, match=r"41699051005347\.csv: table file not found \(ref"):
        _build(release, tmp_path / "out2")


def test_a_split_without_questions_or_charts_is_refused(release, tmp_path):
    (release / "val/val_human.json").unlink()
    (release / "val/val_augmented.json").unlink()
    shutil.rmtree(release / "val/png")
    with pytest.raises(BadInputError, match=r"val: no question file \(val_human\.json or val_au"):
        _build(release, tmp_path / "out")


def test_question_files_without_questions_name_the_files(release, tmp_path):
    (release / "val/val_human.json").write_text("[]")
    (release / "val/val_augmented.json").unlink()
    with pytest.raises(BadInputError, match=r"val/val_human\.json: no questions for split valid"):
        _build(release, tmp_path / "out")


def test_no_split_folder(tmp_path):
    (tmp_path / "parent/ChartQA Dataset").mkdir(parents=True)  # the release's parent was given
    with pytest.raises(BadInputError, match=r"no ChartQA split folder.*\['ChartQA Dataset'\]"):
        _build(tmp_path / "parent", tmp_path / "out")
