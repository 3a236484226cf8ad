"""Chart-to-Text builder (statista, pew) on dummy_data/ (the repository layout with its quirks)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow_datasets as tfds
from PIL import Image

from chartjax.data import tfds_records
from chartjax.data.table_records import records_from_table
from chartjax.data.tables import linearize
from tfds_builders.chart_to_text import sources
from tfds_builders.chart_to_text.chart_to_text import Builder
from tfds_builders.common.bad_input import BadInputError, read_skip_report

DUMMY = Path(__file__).resolve().parent / "dummy_data"
STATISTA = DUMMY / "statista_dataset" / "dataset"
PEW = DUMMY / "pew_dataset" / "dataset"


def _build(manual_dir, data_dir, config, **kwargs) -> tfds.core.DatasetBuilder:
    builder = Builder(data_dir=os.fspath(data_dir), config=config, **kwargs)
    download = tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir))
    builder.download_and_prepare(download_config=download)
    return builder


def _examples(builder) -> dict[str, dict[str, dict]]:
    out = {}
    for split in builder.info.splits:
        out[split] = {}
        for ex in tfds_records.split_examples(str(builder.data_path), split, skip_decoding=()):
            out[split][ex["id"].decode()] = ex
    return out


@pytest.fixture(scope="module")
def statista(tmp_path_factory):
    return _examples(_build(DUMMY, tmp_path_factory.mktemp("c2t"), "statista"))


@pytest.fixture(scope="module")
def pew(tmp_path_factory):
    return _examples(_build(DUMMY, tmp_path_factory.mktemp("c2t"), "pew"))


def _pixels(path: Path) -> np.ndarray:
    with Image.open(path) as img:
        return np.asarray(img.convert("RGB"))


def test_statista_splits_and_ids(statista):
    assert {s: sorted(v) for s, v in statista.items()} == {
        "train": ["statista/multi_col-1", "statista/two_col-1"],
        "validation": ["statista/two_col-2"],
        "test": ["statista/two_col-3"],
    }


def test_statista_fields(statista):
    ex = statista["train"]["statista/two_col-1"]
    assert ex["title"].decode() == (
        "Number of monthly active Facebook users worldwide as of 3rd quarter 2020 ( in millions )"
    )
    assert ex["summary"].decode().endswith("third quarter of 2020 .")  # trailing \n dropped
    assert ex["chart_type"] == b"line"  # metadata.csv "Line", lower-cased
    assert ex["complexity"] == 0  # simple
    np.testing.assert_array_equal(ex["image"], _pixels(STATISTA / "imgs" / "1.png"))
    assert ex["ocr"]["text"].tolist() == [b"Number of users "]
    np.testing.assert_array_equal(ex["ocr"]["bbox"], [[3, 1, 40, 9]])
    multi = statista["train"]["statista/multi_col-1"]
    assert multi["complexity"] == 1  # complex: multiColumn/
    assert multi["chart_type"] == b"unknown"  # no multiColumn/metadata.csv
    assert multi["ocr"]["text"].tolist() == []  # no bboxes file
    assert multi["ocr"]["bbox"].shape == (0, 4)
    pie = statista["validation"]["statista/two_col-2"]["image"]
    np.testing.assert_array_equal(pie[0, 0], [255, 255, 255])  # transparent pixel on white


def test_statista_table_forms(statista):
    table = statista["train"]["statista/two_col-1"]["table"]
    header = [c.decode() for c in table["header"]]
    rows = [[c.decode() for c in row] for row in table["rows"].tolist()]
    assert header == ["Quarter", "Number of users in millions"]
    assert rows == [["Q3 '20", "2740"], ["Q2 '20", "2701"]]
    assert table["linearized"].decode() == (
        "Quarter | Number of users in millions\nQ3 '20 | 2740\nQ2 '20 | 2701"
    )
    assert table["records"].decode() == (
        "Quarter|Q3_'20|x|bar_chart Number_of_users_in_millions|2740|y|bar_chart "
        "Quarter|Q2_'20|x|bar_chart Number_of_users_in_millions|2701|y|bar_chart"
    )
    # quoted comma cell; "%" kept in the strings, dropped in the records
    quoted = statista["validation"]["statista/two_col-2"]["table"]
    assert list(quoted["rows"].tolist()[0]) == [b"Yes, definitely", b"45%"]
    multi = statista["train"]["statista/multi_col-1"]["table"]
    multi_rows = [[c.decode() for c in row] for row in multi["rows"].tolist()]
    multi_header = [c.decode() for c in multi["header"]]
    assert multi_rows[1] == ["2018", "", "40.1"]  # the missing cell stays empty
    assert multi["linearized"].decode() == linearize(multi_header, multi_rows)
    assert multi["records"].decode() == records_from_table(multi_header, multi_rows)
    assert "White|0|1|line_chart" in multi["records"].decode()  # missing cell -> "0"


def test_pew_join_through_old_ids(pew):
    assert {s: sorted(v) for s, v in pew.items()} == {
        "train": ["pew/multi_col-3246", "pew/two_col-7"],
        "validation": ["pew/two_col-1440"],
        "test": ["pew/two_col-9"],
    }
    ex = pew["train"]["pew/two_col-7"]  # old id two_col-7 -> file number 1
    np.testing.assert_array_equal(ex["image"], _pixels(PEW / "imgs" / "1.png"))
    assert ex["title"].decode() == "Foreign-born population in the United States, 1850-2018"
    assert ex["summary"].decode() == (
        "The foreign-born population reached a record 44.8 million in 2018.\n\n"
        "It has more than quadrupled since 1965."
    )
    assert ex["chart_type"] == b"line" and ex["complexity"] == 0
    assert ex["ocr_data"].decode().startswith("foreign-born population in the united states")
    assert ex["ocr_data"].decode().endswith("| 1925 ")  # as written, no trailing newline
    assert ex["ocr"]["text"].tolist() == [b"foreign born populations in millions ", b"50 "]
    np.testing.assert_array_equal(ex["ocr"]["bbox"], [[0, 29, 265, 48], [9, 54, 25, 66]])
    curly = pew["validation"]["pew/two_col-1440"]
    assert curly["title"].decode() == "Most say the \u201cnew normal\u201d is here"
    assert curly["ocr"]["bbox"].shape == (0, 4)  # no bboxes/2.json
    multi = pew["train"]["pew/multi_col-3246"]
    assert multi["complexity"] == 1
    np.testing.assert_array_equal(multi["image"], _pixels(PEW / "multiColumn" / "imgs" / "1.png"))


def test_read_split_file_rejects_bad_header(tmp_path):
    path = tmp_path / "train_index_mapping.csv"
    path.write_text("Name\ntwo_col-1.txt\n")
    with pytest.raises(BadInputError, match=r"train_index_mapping\.csv, row 0: expected header"):
        sources.read_split_file(os.fspath(path))


def _copy(tmp_path: Path, corpus: str) -> Path:
    root = tmp_path / "manual"
    shutil.copytree(DUMMY / corpus, root / corpus)
    return root


def test_bad_inputs_fail_naming_file_and_row(tmp_path):
    root = _copy(tmp_path, "pew_dataset")
    split_file = root / "pew_dataset" / "dataset" / "dataset_split" / "val_index_mapping.csv"
    split_file.write_text("File_No\ntwo_col-1440.txt\ntwo_col-99999.txt\n")
    with pytest.raises(BadInputError) as err:
        _build(root, tmp_path / "d1", "pew")
    assert "no metadata row with old_id 'two_col-99999'" in str(err.value)
    assert "val_index_mapping.csv row 2" in str(err.value)
    root = _copy(tmp_path / "b", "statista_dataset")
    (root / "statista_dataset" / "dataset" / "imgs" / "3.png").write_bytes(b"\x89PNG broken")
    with pytest.raises(BadInputError, match=r"imgs/3\.png: cannot decode image.*row 1"):
        _build(root, tmp_path / "d2", "statista")
    root = _copy(tmp_path / "c", "statista_dataset")
    table = root / "statista_dataset" / "dataset" / "data" / "2.csv"
    table.write_text("A,B\nx,1,extra\n")
    with pytest.raises(BadInputError, match=r"data/2\.csv, row 1: 3 cells where the header has 2"):
        _build(root, tmp_path / "d3", "statista")


def test_skip_bad_counts(tmp_path):
    root = _copy(tmp_path, "pew_dataset")
    base = root / "pew_dataset" / "dataset"
    (base / "imgs" / "1.png").unlink()  # train loses two_col-7
    builder = _build(root, tmp_path / "data", "pew", skip_bad=True)
    assert [
        ex["id"]
        for ex in tfds_records.split_examples(str(builder.data_path), "train", skip_decoding=())
    ] == [b"pew/multi_col-3246"]
    report = read_skip_report(builder)
    assert report["skipped_per_split"] == {"train": 1}
    assert "imgs/1.png: image file not found" in report["messages"][0]


@pytest.mark.parametrize("skip_bad", [False, True])
def test_statista_metadata_with_another_delimiter_stops_the_build(tmp_path, skip_bad):
    """Read as one column, a ';' file turned every chart type into 'unknown' (status 0); it
    concerns every chart, so skip_bad cannot skip it chart by chart."""
    root = _copy(tmp_path, "statista_dataset")
    metadata = root / "statista_dataset" / "dataset" / "metadata.csv"
    metadata.write_text("id;chartType\n1;Line\n2;pie\n3;Bar\n")
    with pytest.raises(BadInputError) as err:
        _build(root, tmp_path / "data", "statista", skip_bad=skip_bad)
    assert str(err.value) == (
        f"{metadata}, row 0: needs columns id, chartType; header is ['id;chartType'] "
        "(written with another delimiter than ','?)"
    )
    assert not (tmp_path / "data" / "chart_to_text" / "statista").exists() or not any(
        (tmp_path / "data" / "chart_to_text" / "statista").iterdir()
    )


def test_metadata_without_the_needed_columns_names_them(tmp_path):
    empty = tmp_path / "metadata.csv"
    empty.write_text("")
    with pytest.raises(BadInputError, match=r"metadata\.csv, row 0: needs columns id, old_id; "):
        sources.read_metadata(os.fspath(empty), ("id", "old_id"))
    pew = tmp_path / "pew" / "metadata.csv"
    pew.parent.mkdir()
    pew.write_text("id\told_id\n1\ttwo_col-7\n")
    with pytest.raises(BadInputError, match=r"header is \['id\\told_id'\] \(written with another"):
        sources.pew_index(os.fspath(pew.parent))
