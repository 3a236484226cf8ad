"""chartjax.metrics.prediction_files: the one JSONL reader/writer, id-keyed rows, id checks."""

import re

import pytest

from chartjax.metrics import prediction_files as P


def test_jsonl_roundtrip_and_errors(tmp_path):
    path = tmp_path / "p.jsonl"
    rows = [
        {"id": "a/1", "prediction": "Ça va", "target": ["x", "y"]},
        {"id": "b", "prediction": ""},
    ]
    P.write_jsonl(path, rows)
    assert P.read_jsonl(path) == rows
    path.write_text('{"id": 1}\n\n[1, 2]\n')
    with pytest.raises(ValueError, match=re.escape(f"{path}:3: expected a JSON object")):
        P.read_jsonl(path)
    path.write_text('{"id": 1}\n{"id": \n')
    with pytest.raises(ValueError, match=re.escape(f"{path}:2: invalid JSON")):
        P.read_jsonl(path)
    with pytest.raises(ValueError, match="row 1"):
        P.write_jsonl(tmp_path / "q.jsonl", [{"a": 1}, {"a": float("inf")}])


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"id": "a", "prediction": "x"}\n{"id": "b", "prediction": "\xff"}\n')
    with pytest.raises(P.PredictionFileError, match=re.escape(f"{path}:2: invalid UTF-8")):
        P.read_jsonl(path)


def test_id_rows_need_ids_once(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": 1, "prediction": "a"}\n\n{"id": "2", "prediction": "b"}\n')
    assert P.read_id_rows(path, "--predictions") == {
        "1": {"id": 1, "prediction": "a"},
        "2": {"id": "2", "prediction": "b"},
    }
    rows = P.read_id_rows(path, "--predictions")
    assert rows.lines == {"1": 1, "2": 3} and rows.where("2") == f"{path}:3"
    folder = tmp_path / "json"
    (folder / "line").mkdir(parents=True)
    (folder / "line" / "a.json").write_text("{}")
    assert P.read_json_dir(folder, "--predictions").where("line/a") == str(folder / "line/a.json")
    path.write_text('{"id": 1, "prediction": "a"}\n{"prediction": "b"}\n')
    with pytest.raises(P.PredictionFileError, match=re.escape(f"{path}:2: no 'id' field")):
        P.read_id_rows(path, "--predictions")
    path.write_text('{"id": 1, "prediction": "a"}\n{"id": 1}\n')
    with pytest.raises(
        P.PredictionFileError, match=r"p.jsonl:2: duplicate id '1' \(first on line 1\)"
    ):
        P.read_id_rows(path, "--predictions")
    path.write_text('{"id": 1}\n')
    with pytest.raises(P.PredictionFileError, match="no 'prediction' field"):
        P.read_id_rows(path, "tables_file", required=("id", "prediction"))


def test_align_ids():
    assert P.align_ids({"a", "b"}, {"a", "b"}, allow_missing=False) == frozenset()
    assert P.align_ids({"a", "b"}, {"a"}, allow_missing=True) == frozenset({"b"})
    with pytest.raises(
        P.PredictionFileError, match="1 reference id\\(s\\) have no prediction: 'b'"
    ):
        P.align_ids({"a", "b"}, {"a"}, allow_missing=False)
    with pytest.raises(
        P.PredictionFileError, match="1 prediction id\\(s\\) not in the references: 'c'"
    ):
        P.align_ids({"a"}, {"a", "c"}, allow_missing=True)


def test_require_ids_and_field_of():
    with pytest.raises(
        KeyError, match="tables_file t.jsonl has no row for id 'x' \\(split 'test'; 2 ids"
    ):
        P.require_ids({"a": {}}, ["a", "x", "y"], "t.jsonl", "tables_file", "test")
    assert P.field_of([{"k": 1}, {"k": 2}], "k") == [1, 2]
    assert P.field_of([{"k": 1}, {}], "k") is None and P.field_of([], "k") is None


def test_check_fields_names_the_row_where_it_can(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "a", "target": "x"}\n{"id": "b", "target": ["x", 1]}\n')
    rows = P.read_id_rows(path, "--references")
    message = f"{path}:2 (id 'b'): field 'target' is [\"x\", 1]; expected a string or a non-empty"
    with pytest.raises(P.PredictionFileError, match=re.escape(message)):
        P.check_fields(rows, {"target": P.TEXTS})
    P.check_fields(rows, {"title": P.TEXT})  # a field the rows lack is not checked
    # Rows not read from a file (a TFDS split) are named by id.
    with pytest.raises(P.PredictionFileError, match=r"^reference id 'b': field 'target' is \[\]"):
        P.check_fields({"a": {"target": "x"}, "b": {"target": []}}, {"target": P.TEXTS})
