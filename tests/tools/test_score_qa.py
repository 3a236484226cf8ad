"""chartjax-score --task chartqa / plotqa / chartqapro end to end: meta fields from the
references, protocols recorded in the provenance, per-group breakdowns and plots."""

import json

from chartjax.metrics import prediction_files, report
from chartjax.tools import score


def _jsonl(path, rows):
    prediction_files.write_jsonl(path, rows)
    return str(path)


def _run(tmp_path, *args):
    out = tmp_path / "metrics.json"
    rc = score.main([*args, "--out", str(out)])
    return rc, (json.loads(out.read_text()) if rc == 0 else None), out


def _files(tmp_path, rows):
    preds = _jsonl(tmp_path / "p.jsonl", [{"id": r[0], "prediction": r[1]} for r in rows])
    refs = _jsonl(tmp_path / "r.jsonl", [{"id": r[0], "target": r[2], **r[3]} for r in rows])
    return ["--predictions", preds, "--references", refs]


CHARTQA = [
    ("test/human/0", "2008", "2010", {"meta": {"source": "human"}}),  # right (year quirk)
    ("test/human/1", "95", "100", {"meta": {"source": "human"}}),  # right; VLMEvalKit: wrong
    ("test/augmented/0", "Yes ", "yes", {"meta": {"source": "augmented"}}),  # only if stripped
    ("test/augmented/1", "x", "y", {"meta": {"source": "augmented"}}),  # wrong
    ("test/augmented/2", "7", "7", {"meta": {"source": "augmented"}}),  # right
]


def test_chartqa_per_source_and_protocols(tmp_path):
    files = _files(tmp_path, CHARTQA)
    rc, obj, out = _run(tmp_path, "--task", "chartqa", *files)
    assert rc == 0
    report.validate_metrics(obj)
    m = obj["metrics"]
    # pix2struct: human 2/2, augmented 1/3; overall (1 + 1/3) / 2 = 2/3; pooled 3/5.
    assert m["relaxed_accuracy_human"] == 1.0
    assert abs(m["relaxed_accuracy_augmented"] - 1 / 3) < 1e-12
    assert abs(m["relaxed_accuracy"] - 2 / 3) < 1e-12
    assert m["relaxed_accuracy_pooled"] == 0.6
    assert obj["breakdowns"]["source"]["augmented"]["n"] == 3
    assert obj["provenance"]["libraries"]["protocol"] == "pix2struct"
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    rc, vlm, _ = _run(tmp_path, "--task", "chartqa", *files, "--compat", "vlmevalkit")
    # VLMEvalKit: human 1/2 (5 / 95 > 0.05), augmented 2/3 ("Yes" stripped) -> 7/12.
    assert rc == 0 and vlm["provenance"]["libraries"]["protocol"] == "vlmevalkit"
    assert abs(vlm["metrics"]["relaxed_accuracy"] - 7 / 12) < 1e-12
    rc, big, _ = _run(tmp_path, "--task", "chartqa", *files, "--compat", "big_vision")
    assert rc == 0 and big["provenance"]["libraries"]["protocol"] == "big_vision"


def test_chartqa_refuses_a_meta_that_is_not_an_object(tmp_path, capsys):
    rows = [("a", "1", "1", {"meta": "human"})]
    rc, _, _ = _run(tmp_path, "--task", "chartqa", *_files(tmp_path, rows))
    assert (
        rc == 2 and "r.jsonl:1 (id 'a'): field 'meta' is not an object" in capsys.readouterr().err
    )
    rows = [("a", "1", "1", {"meta": {"source": 1}})]
    rc, _, _ = _run(tmp_path, "--task", "chartqa", *_files(tmp_path, rows))
    assert rc == 2 and "field 'meta.source' is 1; expected a string" in capsys.readouterr().err


def test_plotqa_per_template_with_numeric_targets(tmp_path):
    rows = [
        ("v1/test/0", "2010", 2010, {"meta": {"template": "data_retrieval"}}),
        ("v1/test/1", "12.5", 12.6, {"meta": {"template": "data_retrieval"}}),
        ("v1/test/2", "Brazil", "Argentina", {"meta": {"template": "min_max"}}),
        ("v1/test/3", "No", "no", {}),  # no template: overall only
    ]
    rc, obj, out = _run(tmp_path, "--task", "plotqa", *_files(tmp_path, rows))
    assert rc == 0
    report.validate_metrics(obj)
    assert obj["metrics"]["relaxed_accuracy"] == 0.75
    t = obj["breakdowns"]["template"]
    assert t["data_retrieval"]["relaxed_accuracy"] == 1.0 and t["data_retrieval"]["n"] == 2
    assert t["min_max"]["relaxed_accuracy"] == 0.0
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"


def test_chartqapro_question_types_and_year_flags(tmp_path):
    rows = [
        ("test/0", "2008", "2010", {"meta": {"question_type": "Factoid", "year": ["YES"]}}),
        ("test/1", "2008", "2010", {"meta": {"question_type": "Factoid", "year": ["NO"]}}),
        ("test/2", "true.", "True", {"meta": {"question_type": "Fact Checking"}}),
        ("test/3", "[a, c]", "[a, b]", {"meta": {"question_type": "Conversational"}}),
    ]
    rc, obj, _ = _run(tmp_path, "--task", "chartqapro", *_files(tmp_path, rows))
    assert rc == 0
    report.validate_metrics(obj)
    # 0 (a year item: exact), 1 (within 5 %), 1, (1 + 0) / 2 ("b" vs "c": ANLS 0)
    assert obj["metrics"]["relaxed_accuracy"] == 0.625
    q = obj["breakdowns"]["question_type"]
    assert (
        q["Factoid"]["relaxed_accuracy"] == 0.5 and q["Conversational"]["relaxed_accuracy"] == 0.5
    )
    assert obj["provenance"]["libraries"]["protocol"] == "lmms_eval"
    rows[0] = ("test/0", "2008", "2010", {"meta": {"year": 1}})
    rc, _, _ = _run(tmp_path, "--task", "chartqapro", *_files(tmp_path, rows))
    assert rc == 2
