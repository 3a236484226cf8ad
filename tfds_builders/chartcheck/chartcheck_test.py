"""ChartCheck builder on dummy_data/ (official CSV/JSON formats with their quirks)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow_datasets as tfds
from PIL import Image

from chartjax.data import tfds_records
from tfds_builders.chartcheck import records, test_sets
from tfds_builders.chartcheck.chartcheck import Builder
from tfds_builders.common.bad_input import REPORT_NAME, SKIP_BAD_ENV, BadInputError

DUMMY = Path(__file__).resolve().parent / "dummy_data"


def _build(manual_dir, data_dir, **kwargs) -> tfds.core.DatasetBuilder:
    builder = Builder(data_dir=os.fspath(data_dir), **kwargs)
    config = tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir))
    builder.download_and_prepare(download_config=config)
    return builder


def _examples(builder, split) -> dict[str, dict]:
    out = {}
    for ex in tfds_records.split_examples(str(builder.data_path), split, skip_decoding=()):
        out[ex["id"].decode()] = ex
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    builder = _build(DUMMY, tmp_path_factory.mktemp("chartcheck_data"))
    return {split: _examples(builder, split) for split in builder.info.splits}


def _pixels(name: str) -> np.ndarray:
    with Image.open(DUMMY / "images" / name) as img:
        return np.asarray(img.convert("RGB"))


def test_splits_and_ids(built):
    assert sorted(built) == ["test_one", "test_two", "train", "validation"]
    assert sorted(built["train"]) == [f"train:{i}" for i in range(5)]
    assert sorted(built["validation"]) == ["val:0", "val:1", "val:2"]
    assert sorted(built["test_one"]) == [f"test:{i}" for i in range(4)]
    assert sorted(built["test_two"]) == ["test_two:0", "test_two:198 qq", "test_two:2"]


def test_labels_both_spellings(built):
    names = ["refutes", "supports"]
    got = {k: (names[ex["label"]], ex["label_raw"].decode()) for k, ex in built["train"].items()}
    assert got["train:0"] == ("supports", "TRUE")
    assert got["train:1"] == ("refutes", "FALSE")
    two = built["test_two"]
    assert (names[two["test_two:0"]["label"]], two["test_two:0"]["label_raw"]) == (
        "supports",
        b"True",
    )
    assert names[two["test_two:198 qq"]["label"]] == "refutes"


def test_text_fields_quoted_multiline_and_extra_column(built):
    ex = built["train"]["train:1"]
    assert ex["caption"].decode() == '\nAnnual sales of ACME,\n"best" years'
    assert ex["explanation"].decode() == "The 2014 bar is the tallest,\nso sales rose."
    assert ex["claim"].decode() == "Sales fell in 2014."
    # `Unnamed: 6` holds a stray second explanation; it is not merged into explanation.
    assert built["test_two"]["test_two:198 qq"]["explanation"].decode() == "They rose."
    caption = built["test_two"]["test_two:0"]["caption"].decode()
    assert caption == "Votes (ë\u008f™ë‘\u0090ì²œì‹œ)"  # mojibake kept as written


def test_image_name_fallbacks(built):
    train = built["train"]
    assert train["train:0"]["image_file"] == b"Sales_bar.png"  # raw basename
    assert train["train:2"]["image_file"] == b"Lock_&_dam_10.png"  # twice unquoted
    assert train["train:3"]["image_file"] == b"Caf%C3%A9_prices.PNG"  # once unquoted
    np.testing.assert_array_equal(train["train:2"]["image"], _pixels("Lock_&_dam_10.png"))
    np.testing.assert_array_equal(train["train:0"]["image"], _pixels("Sales_bar.png"))
    assert train["train:2"]["image_url"].endswith(b"/Lock_%2526_dam_10.png")


def test_image_modes_become_rgb_on_white(built):
    pie = built["test_one"]["test:0"]["image"]  # RGBA
    np.testing.assert_array_equal(pie[0], [[255, 255, 255], [0, 0, 255], [127, 127, 127]])
    gif = built["train"]["train:4"]["image"]  # palette GIF, index 0 transparent
    np.testing.assert_array_equal(gif[:, :, 0], [[255, 255, 255], [255, 255, 255]])
    np.testing.assert_array_equal(gif[:, :, 1], [[255, 0, 0], [0, 255, 0]])
    deep = built["test_one"]["test:3"]["image"]  # 16-bit TIFF rescaled to 8 bits
    np.testing.assert_array_equal(deep[0, :, 0], [0, 255, 128])
    tif = built["validation"]["val:1"]["image"]
    np.testing.assert_array_equal(tif, _pixels("Population.tif"))
    jpg = built["validation"]["val:2"]["image"]  # lossy: close to the drawn colour
    assert jpg.shape == (8, 8, 3)
    assert np.abs(jpg.astype(int) - [200, 30, 30]).max() <= 3
    pal = built["test_two"]["test_two:0"]["image"]  # palette PNG without transparency
    np.testing.assert_array_equal(pal[0], [[10, 20, 30], [40, 50, 60]])


def test_chart_type_metadata_and_fallback(built):
    assert built["train"]["train:0"]["chart_type"] == b"barchart_vertical"
    # metadata name encoded once (Lock_%26_dam_10.png) matches the twice-encoded URL
    assert built["train"]["train:2"]["chart_type"] == b"barchart_vertical"
    assert built["train"]["train:4"]["chart_type"] == b"line_chart"
    assert built["train"]["train:3"]["chart_type"] == b"unknown"  # not in any metadata file
    # listed under two types -> unknown rather than a guess
    assert built["test_two"]["test_two:0"]["chart_type"] == b"unknown"


def test_reasoning_types(built):
    assert built["test_one"]["test:0"]["reasoning_types"].tolist() == [b"Retrieve", b"Compare"]
    assert built["test_one"]["test:1"]["reasoning_types"].tolist() == []
    assert built["train"]["train:0"]["reasoning_types"].tolist() == []


def test_json_variant_when_only_it_is_present(tmp_path):
    builder = _build(DUMMY / "json_variant", tmp_path)
    assert sorted(builder.info.splits) == ["test_one", "test_two", "validation"]
    val = _examples(builder, "validation")
    assert sorted(val) == ["val:0", "val:1", "val:2"]  # by position: no `id` in validation.json
    assert val["val:1"]["label"] == 1 and val["val:1"]["label_raw"] == b"TRUE"
    test = _examples(builder, "test_one")
    assert test["test:0"]["caption"] == b""  # literal NaN
    assert test["test:0"]["label"] == 1 and test["test:0"]["label_raw"] == b"True"  # JSON bool
    two = _examples(builder, "test_two")
    assert sorted(two) == ["test_two:0", "test_two:198 qq", "test_two:2"]
    assert two["test_two:198 qq"]["label"] == 0


def test_image_name_candidates():
    assert records.image_name_candidates("https://x/Lock_%2526_dam_10.png") == [
        "Lock_%2526_dam_10.png",
        "Lock_%26_dam_10.png",
        "Lock_&_dam_10.png",
    ]
    assert records.image_name_candidates("https://x/plain.png") == ["plain.png"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("TRUE", "supports"),
        ("True", "supports"),
        (True, "supports"),
        (" false ", "refutes"),
        ("FALSE", "refutes"),
        (False, "refutes"),
        ("maybe", None),
    ],
)
def test_normalize_label(value, expected):
    assert records.normalize_label(value) == expected


# --- bad input -----------------------------------------------------------------------------


def _one_split_copy(tmp_path: Path, csv_name: str, text: str | None = None) -> Path:
    """A manual_dir holding only `csv_name` (optionally rewritten) and the images."""
    root = tmp_path / "manual"
    shutil.copytree(DUMMY / "images", root / "images")
    target = root / csv_name
    shutil.copy(DUMMY / csv_name, target)
    if text is not None:
        target.write_text(text, encoding="utf-8")
    return root


def test_missing_image_names_file_and_row(tmp_path):
    root = _one_split_copy(tmp_path, "val.csv")
    (root / "images" / "Population.tif").unlink()
    with pytest.raises(BadInputError) as err:
        _build(root, tmp_path / "data")
    message = str(err.value)
    assert "Population.tif: image file not found" in message
    assert "val.csv row 2 (line 3)" in message


def test_corrupt_image_names_file(tmp_path):
    root = _one_split_copy(tmp_path, "val.csv")
    (root / "images" / "Temperature.JPG").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(BadInputError, match=r"Temperature\.JPG: cannot decode image"):
        _build(root, tmp_path / "data")


def test_malformed_rows_name_file_and_row(tmp_path):
    text = (DUMMY / "val.csv").read_text(encoding="utf-8")
    text += "3,https://chartfc.s3.amazonaws.com/Sales_bar.png,too few fields\n"
    root = _one_split_copy(tmp_path, "val.csv", text)
    with pytest.raises(BadInputError, match=r"val\.csv, row 4 \(line 5\): 3 fields"):
        _build(root, tmp_path / "data")
    bad_label = text.replace(",FALSE,July", ",MAYBE,July")
    (root / "val.csv").write_text(bad_label, encoding="utf-8")
    with pytest.raises(BadInputError, match=r"val\.csv, row 3 \(line 4\): label 'MAYBE'"):
        _build(root, tmp_path / "data2")


def test_wrong_header_is_fatal(tmp_path):
    root = _one_split_copy(tmp_path, "val.csv", "a,b\n1,2\n")
    with pytest.raises(BadInputError, match=r"val\.csv, row 0: header"):
        _build(root, tmp_path / "data", skip_bad=True)


def test_skip_bad_counts_and_reports(tmp_path):
    text = (DUMMY / "val.csv").read_text(encoding="utf-8")
    text += "3,https://chartfc.s3.amazonaws.com/Sales_bar.png,too few fields\n"
    root = _one_split_copy(tmp_path, "val.csv", text)
    (root / "images" / "Population.tif").unlink()
    (root / "images" / "Temperature.JPG").write_bytes(b"corrupt")
    builder = _build(root, tmp_path / "data", skip_bad=True)
    assert sorted(_examples(builder, "validation")) == ["val:0"]
    report = json.loads((Path(builder.data_dir) / REPORT_NAME).read_text())
    assert report["total_skipped"] == 3
    assert report["skipped_per_split"] == {"validation": 3}
    assert any("Population.tif: image file not found" in m for m in report["messages"])


@pytest.mark.slow  # the `tfds build` process imports TensorFlow
def test_cli_build_with_env_skip(tmp_path):
    """The real `tfds build` command line on the folder builder, skip policy via env var."""
    root = tmp_path / "manual"
    shutil.copytree(DUMMY, root, ignore=shutil.ignore_patterns("*.py", "json_variant"))
    (root / "images" / "Growth.jpeg").unlink()  # test:2 loses its image
    tfds_cli = Path(sys.executable).parent / "tfds"
    env = {**os.environ, SKIP_BAD_ENV: "1"}
    cmd = [
        os.fspath(tfds_cli),
        "build",
        os.fspath(Path(__file__).resolve().parent),
        f"--manual_dir={root}",
        f"--data_dir={tmp_path / 'data'}",
        "--noforce_checksums_validation",
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out_dir = tmp_path / "data" / "chartcheck" / "2.1.0"
    report = json.loads((out_dir / REPORT_NAME).read_text())
    assert report["skipped_per_split"] == {"test_one": 1}
    info = json.loads((out_dir / "dataset_info.json").read_text())
    charts = {s["name"]: sum(int(n) for n in s["shardLengths"]) for s in info["splits"]}
    claims = {
        split: len(list(tfds_records.split_examples(os.fspath(out_dir), split))) for split in charts
    }
    assert claims == {"train": 5, "validation": 3, "test_one": 3, "test_two": 3}
    assert charts == {"train": 4, "validation": 3, "test_one": 2, "test_two": 2}


def test_a_header_only_csv_names_the_file(tmp_path):
    root = tmp_path / "raw"
    shutil.copytree(DUMMY, root)
    header = (root / "train.csv").read_text(encoding="utf-8").splitlines()[0]
    (root / "train.csv").write_text(header + "\n", encoding="utf-8")
    with pytest.raises(BadInputError, match=r"train\.csv.*no claims for split train"):
        _build(root, tmp_path / "out")
    assert not list((tmp_path / "out").rglob("dataset_info.json"))


# --- test set 2: the paper's or the 2024 re-annotation (issue 30, item 1) --------------------


def _test_two_metadata(builder) -> dict:
    return json.loads((Path(builder.data_path) / "metadata.json").read_text())["test_two"]


def test_the_release_test_two_is_recorded_as_the_reannotation(tmp_path):
    root = tmp_path / "manual"
    root.mkdir()
    shutil.copytree(DUMMY / "images", root / "images")
    shutil.copy(DUMMY / "test_two.csv", root / "test_two.csv")
    builder = _build(root, tmp_path / "data")
    meta = _test_two_metadata(builder)
    assert meta["version"] == test_sets.REANNOTATED
    assert meta["recognized_by"].startswith("layout: CSV columns beyond the six")
    assert (meta["file"], meta["claims"], meta["supports"], meta["refutes"]) == (
        "test_two.csv",
        3,
        2,
        1,
    )
    assert str(builder.version) == "2.1.0"


def test_the_paper_era_test_two_is_read_and_recorded(tmp_path):
    builder = _build(DUMMY / "paper_era", tmp_path)
    assert sorted(builder.info.splits) == ["test_two"]
    two = _examples(builder, "test_two")
    # No `id` in the paper's file: claims are numbered by position, as in the release.
    assert sorted(two) == ["test_two:0", "test_two:1", "test_two:2"]
    assert two["test_two:1"]["claim"] == b"Votes dropped a lot"
    assert [two[f"test_two:{i}"]["label"] for i in range(3)] == [1, 0, 0]
    assert two["test_two:2"]["label_raw"] == b"FALSE"
    meta = _test_two_metadata(builder)
    assert meta["version"] == test_sets.PAPER
    assert meta["recognized_by"].startswith("layout: JSON records with `db_id`")
    assert meta["file"] == test_sets.PAPER_FILES[0]
    assert (meta["supports"], meta["refutes"]) == (1, 2)


def test_the_paper_era_file_is_read_instead_of_the_release_beside_it(tmp_path):
    root = tmp_path / "manual"
    shutil.copytree(DUMMY, root, ignore=shutil.ignore_patterns("*.py", "json_variant"))
    shutil.copy(DUMMY / "paper_era" / test_sets.PAPER_FILES[0], root)
    builder = _build(root, tmp_path / "data")
    assert sorted(builder.info.splits) == ["test_one", "test_two", "train", "validation"]
    assert _test_two_metadata(builder)["version"] == test_sets.PAPER
    assert sorted(_examples(builder, "test_two")) == ["test_two:0", "test_two:1", "test_two:2"]


def _claims(rows) -> list[records.ClaimRecord]:
    return [
        records.ClaimRecord(
            "f", str(i), str(i), img, "", label, records.normalize_label(label), c, ""
        )
        for i, (img, label, c) in enumerate(rows)
    ]


def test_identify_by_content_counts_and_layout(tmp_path):
    rows = [("https://x/a.png", "TRUE", "A rose. "), ("https://x/b.png", "FALSE", "B  fell.")]
    # The digest ignores order, whitespace inside claims and how labels are spelled.
    respelled = [("https://y/b.png", "False", "B fell."), ("https://y/a.png", "True", "A rose.")]
    assert test_sets.content_digest(_claims(rows)) == test_sets.content_digest(_claims(respelled))
    paper_csv = tmp_path / "paper.csv"
    paper_csv.write_text(",chart_img,caption,label,claim,explanation\n0,x,c,TRUE,A,e\n")
    assert test_sets.identify(_claims(rows), paper_csv)["version"] == test_sets.PAPER
    release_csv = tmp_path / "test_two.csv"
    release_csv.write_text(",chart_img,caption,label,claim,explanation,Unnamed: 6\n")
    assert test_sets.identify(_claims(rows), release_csv)["version"] == test_sets.REANNOTATED
    assert test_sets.identify(_claims(respelled), paper_csv)["version"] == test_sets.REANNOTATED
    release_json = tmp_path / "test_two.json"
    release_json.write_text(json.dumps([{"id": 0, "chart_img": "x", "claim": "A"}]))
    assert test_sets.identify(_claims(rows), release_json)["version"] == test_sets.REANNOTATED
    # A whole file of the paper's counts is the paper's, whatever its layout.
    whole = _claims([("https://x/a.png", "TRUE", f"c{i}") for i in range(503)])
    whole += _claims([("https://x/a.png", "FALSE", f"d{i}") for i in range(478)])
    found = test_sets.identify(whole, release_csv)
    assert (found["version"], found["claims"]) == (test_sets.PAPER, 981)
    assert found["recognized_by"].startswith("counts of a whole file")
