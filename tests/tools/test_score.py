"""chartjax-score end to end on small files, plus the no-jax/no-tensorflow import rule."""

import json
import math
import subprocess
import sys

import pytest
from PIL import Image

from chartjax.metrics import prediction_files, report
from chartjax.tools import score


def _jsonl(path, rows):
    prediction_files.write_jsonl(path, rows)
    return str(path)


def _run(tmp_path, *args):
    out = tmp_path / "metrics.json"
    rc = score.main([*args, "--out", str(out)])
    return rc, (json.loads(out.read_text()) if rc == 0 else None), out


def test_chartqa_end_to_end_writes_valid_json_and_png(tmp_path):
    preds = _jsonl(
        tmp_path / "p.jsonl", [{"id": "a", "prediction": "2008"}, {"id": "b", "prediction": "no"}]
    )
    refs = _jsonl(
        tmp_path / "r.jsonl", [{"id": "a", "target": "2010"}, {"id": "b", "target": ["Yes", "x"]}]
    )
    rc, obj, out = _run(tmp_path, "--task", "chartqa", "--predictions", preds, "--references", refs)
    assert rc == 0
    report.validate_metrics(obj)
    assert obj["metrics"]["relaxed_accuracy"] == 0.5 and obj["num_examples"] == 2
    assert obj["provenance"]["libraries"]["relaxed_accuracy"].startswith("pix2struct")
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"


def test_id_mismatch_is_an_error_unless_allow_missing(tmp_path, capsys):
    preds = _jsonl(tmp_path / "p.jsonl", [{"id": "a", "prediction": "1"}])
    refs = _jsonl(tmp_path / "r.jsonl", [{"id": "a", "target": "1"}, {"id": "b", "target": "2"}])
    rc, _, _ = _run(tmp_path, "--task", "chartqa", "--predictions", preds, "--references", refs)
    assert rc == 2 and "1 reference id(s) have no prediction: 'b'" in capsys.readouterr().err
    rc, obj, _ = _run(
        tmp_path,
        "--task",
        "chartqa",
        "--predictions",
        preds,
        "--references",
        refs,
        "--allow_missing",
    )
    assert rc == 0 and obj["metrics"]["num_missing"] == 1
    assert obj["metrics"]["relaxed_accuracy"] == 0.5
    extra = _jsonl(
        tmp_path / "e.jsonl", [{"id": "a", "prediction": "1"}, {"id": "z", "prediction": "1"}]
    )
    rc, _, _ = _run(
        tmp_path,
        "--task",
        "chartqa",
        "--predictions",
        extra,
        "--references",
        refs,
        "--allow_missing",
    )
    assert rc == 2 and "not in the references: 'z'" in capsys.readouterr().err


def test_figureqa_breakdowns_and_targets_from_predictions(tmp_path):
    rows = [
        {"id": "0/0", "prediction": 1, "target": 1},
        {"id": "0/1", "prediction": "no", "target": 1},
        {"id": "1/0", "prediction": 0, "target": 0},
    ]
    preds = _jsonl(tmp_path / "p.jsonl", rows)
    rc, obj, _ = _run(tmp_path, "--task", "figureqa", "--predictions", preds)
    assert rc == 0 and obj["metrics"]["accuracy"] == pytest.approx(2 / 3)
    refs = _jsonl(
        tmp_path / "r.jsonl",
        [
            {"id": "0/0", "target": 1, "figure_type": "pie", "question_id": 0},
            {"id": "0/1", "target": 1, "figure_type": "pie", "question_id": 3},
            {"id": "1/0", "target": 0, "figure_type": "line", "question_id": 3},
        ],
    )
    rc, obj, _ = _run(tmp_path, "--task", "figureqa", "--predictions", preds, "--references", refs)
    assert obj["breakdowns"]["figure_type"]["pie"]["accuracy"] == 0.5
    assert obj["breakdowns"]["question_template"]["3"]["n"] == 2


def test_chartcheck_labels_breakdowns_and_unavailable_models(tmp_path):
    preds = _jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": "c:1", "prediction": "The claim is true. Sales rose."},
            {"id": "c:2", "prediction": "the claim is FALSE."},
            {"id": "c:3", "prediction": "I cannot tell."},
        ],
    )
    refs = _jsonl(
        tmp_path / "r.jsonl",
        [
            {
                "id": "c:1",
                "target": "supports",
                "chart_type": "bar",
                "reasoning_types": ["Filter"],
                "explanation": "Sales rose.",
            },
            {
                "id": "c:2",
                "target": "TRUE",
                "chart_type": "bar",
                "reasoning_types": ["Filter", "Compare"],
                "explanation": "It did not.",
            },
            {
                "id": "c:3",
                "target": "refutes",
                "chart_type": "pie",
                "reasoning_types": [],
                "explanation": "No.",
            },
        ],
    )
    rc, obj, _ = _run(
        tmp_path, "--task", "chartcheck", "--predictions", preds, "--references", refs
    )
    assert rc == 0
    m = obj["metrics"]
    assert m["accuracy"] == pytest.approx(1 / 3) and m["num_unparseable"] == 1
    assert obj["breakdowns"]["reasoning_type"]["Filter"]["n"] == 2
    assert obj["breakdowns"]["confusion"]["FALSE"]["pred_None"] == 1
    assert "explanation_meteor" in m and "explanation_rouge_l" in m
    assert "--bertscore_model" in obj["unavailable"]["explanation_bertscore_f1"]
    assert "--bleurt_checkpoint" in obj["unavailable"]["explanation_bleurt"]


def test_chart_to_text_and_deplot(tmp_path):
    data = "Year|2020|x|line_chart Sales|45|y|line_chart"
    preds = _jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": "statista/1", "prediction": "In 2020 , sales were 45 percent ."},
            {"id": "pew/2", "prediction": "Most adults agree ."},
        ],
    )
    refs = _jsonl(
        tmp_path / "r.jsonl",
        [
            {
                "id": "statista/1",
                "target": "Sales rose to 45 % in 2020 .",
                "records": data,
                "title": "Sales 2015-2020",
                "chart_type": "line",
                "complexity": "simple",
                "split": "test",
            },
            {
                "id": "pew/2",
                "target": "Most adults agree with this .",
                "records": "adults | agree",
                "title": "Views",
                "chart_type": "bar",
                "complexity": "complex",
                "split": "test",
            },
        ],
    )
    rc, obj, _ = _run(
        tmp_path, "--task", "chart_to_text", "--predictions", preds, "--references", refs
    )
    assert rc == 0 and obj["split"] == "test"
    m = obj["metrics"]
    assert m["content_selection"] == pytest.approx((1.0 + 1.0) / 2)
    assert {"bleu", "rouge_l", "meteor", "cider_d"} <= set(m)
    assert set(obj["unavailable"]) == {"bleurt", "perplexity"}
    assert obj["breakdowns"]["chart_type"]["line"]["content_selection"] == 1.0
    preds = _jsonl(
        tmp_path / "d.jsonl",
        [{"id": "x", "prediction": "year | a\n2019 | 109", "target": "year | a\n2019 | 100"}],
    )
    rc, obj, _ = _run(tmp_path, "--task", "deplot", "--predictions", preds)
    assert obj["metrics"]["rms_f1"] == pytest.approx(0.91)
    assert obj["metrics"]["rnss"] == pytest.approx(1 - 0.09 / 2)  # numbers 2019 and 100


def test_chart_info_task4_from_json_folders(tmp_path):
    gt_dir, pred_dir, img_dir = tmp_path / "gt", tmp_path / "pred", tmp_path / "img"
    for d in (gt_dir / "line", pred_dir / "line", img_dir / "line"):
        d.mkdir(parents=True)

    def axes(x):
        return {
            "task4": {
                "output": {
                    "axes": {"x-axis": [{"id": 1, "tick_pt": {"x": x, "y": 5}}], "y-axis": []}
                }
            }
        }

    (gt_dir / "line" / "PMC1___a.json").write_text(json.dumps(axes(100)))
    (pred_dir / "line" / "PMC1___a.json").write_text(json.dumps(axes(112)))
    Image.new("RGB", (640, 480)).save(img_dir / "line" / "PMC1___a.png")
    args = [
        "--task",
        "chart_info_task4",
        "--predictions",
        str(pred_dir),
        "--references",
        str(gt_dir),
    ]
    rc, obj, _ = _run(tmp_path, *args, "--images", str(img_dir))
    assert rc == 0 and obj["metrics"]["recall"] == pytest.approx(0.75)
    assert obj["provenance"]["libraries"]["chart_info"] == "compat=spec"
    rc, _, _ = _run(tmp_path, *args)
    assert rc == 2  # task 4 without --images


def test_tfds_rows_mapping():
    rows = score.tfds_rows(
        [{"id": b"3/1", "answer": 1, "figure_type": b"pie", "question_id": 4}],
        "figureqa",
        "validation1",
    )
    assert rows == {"3/1": {"id": "3/1", "target": 1, "figure_type": "pie", "question_id": 4}}
    ex = {
        "id": b"statista/1",
        "summary": b"S .",
        "title": b"T",
        "chart_type": b"line",
        "complexity": 1,
        "table": {"records": b"a|1|x|bar_chart"},
    }
    row = score.tfds_rows([ex], "chart_to_text", "test")["statista/1"]
    assert row["records"] == "a|1|x|bar_chart" and row["complexity"] == "complex"
    cc = score.tfds_rows(
        [
            {
                "id": b"t:1",
                "label": 1,
                "explanation": b"e",
                "chart_type": b"bar",
                "reasoning_types": [b"Filter"],
            }
        ],
        "chartcheck",
        "test_one",
    )
    assert cc["t:1"]["target"] == "TRUE" and cc["t:1"]["reasoning_types"] == ["Filter"]


def test_metrics_package_imports_neither_jax_nor_tensorflow():
    code = (
        "import importlib, pkgutil, sys, chartjax.metrics as m\n"
        "names = [i.name for i in pkgutil.iter_modules(m.__path__)]\n"
        "for n in names: importlib.import_module('chartjax.metrics.' + n)\n"
        "import chartjax.tools.score\n"
        "bad = [k for k in ('jax', 'tensorflow', 'flax', 'tensorflow_datasets') if k in sys.modules]\n"
        "assert len(names) >= 12, names\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr


# -- predictions that are not of the task's type; missing predictions ----------------------------


def test_figureqa_floats_are_an_error_naming_file_and_line_unless_lenient(tmp_path, capsys):
    rows = [
        {"id": "0/0", "prediction": 1, "target": 1},
        {"id": "0/1", "prediction": 1.0, "target": 1},
        {"id": "1/0", "prediction": 0.0, "target": 0},
    ]
    preds = _jsonl(tmp_path / "p.jsonl", rows)
    rc, _, out = _run(tmp_path, "--task", "figureqa", "--predictions", preds)
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert (
        f"2 prediction(s) not of the task's type: {preds}:2 (id '0/1'): prediction is a float "
        f"(1.0); expected 0/1, true/false or a yes/no text; {preds}:3 (id '1/0'): "
        "prediction is a float (0.0)" in err
    )
    assert "--lenient" in err

    rc, obj, _ = _run(tmp_path, "--task", "figureqa", "--predictions", preds, "--lenient")
    err = capsys.readouterr().err
    assert rc == 0
    assert obj["metrics"]["accuracy"] == pytest.approx(1 / 3)  # the floats count as wrong
    assert obj["metrics"]["num_invalid"] == 2 and obj["metrics"]["num_missing"] == 0
    assert obj["metrics"]["num_unparseable"] == 0
    assert f"warning: scored as wrong: 2 prediction(s) not of the task's type: {preds}:2" in err


def test_a_row_without_prediction_is_an_error_naming_file_and_line(tmp_path, capsys):
    preds = _jsonl(
        tmp_path / "p.jsonl",
        [{"id": "a", "prediction": "year | a\n2019 | 100"}, {"id": "b", "output": "x"}],
    )
    refs = _jsonl(
        tmp_path / "r.jsonl",
        [{"id": "a", "target": "year | a\n2019 | 100"}, {"id": "b", "target": "year | a\n1 | 2"}],
    )
    args = ["--task", "deplot", "--predictions", preds, "--references", refs]
    rc, _, _ = _run(tmp_path, *args)
    assert rc == 2
    assert f"{preds}:2 (id 'b'): no 'prediction' field" in capsys.readouterr().err
    rc, obj, _ = _run(tmp_path, *args, "--lenient")
    assert rc == 0 and obj["metrics"]["num_invalid"] == 1
    assert obj["metrics"]["rms_precision"] == 0.5  # the row without a table: nothing right


def test_invalid_utf8_names_file_and_line(tmp_path, capsys):
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"id": "a", "prediction": "ok"}\n{"id": "b", "prediction": "\xff"}\n')
    rc, _, _ = _run(tmp_path, "--task", "chartqa", "--predictions", str(path))
    assert rc == 2
    assert f"{path}:2: invalid UTF-8" in capsys.readouterr().err


def test_allow_missing_deplot_table_scores_zero_not_vacuous_precision(tmp_path):
    preds = _jsonl(tmp_path / "p.jsonl", [{"id": "a", "prediction": "year | a\n2019 | 100"}])
    refs = _jsonl(
        tmp_path / "r.jsonl",
        [{"id": "a", "target": "year | a\n2019 | 100"}, {"id": "b", "target": "title | none"}],
    )
    args = ["--task", "deplot", "--predictions", preds, "--references", refs]
    rc, obj, _ = _run(tmp_path, *args, "--allow_missing")
    assert rc == 0 and obj["metrics"]["num_missing"] == 1
    for name in ("rms_precision", "rms_recall", "rms_f1", "rnss"):
        assert obj["metrics"][name] == 0.5, name  # 1 for "a", 0 for the missing "b"


# One reference row per JSONL task (two for DePlot: a table without numbers, where the empty
# prediction would score RNSS 1), and a prediction value that is not of the task's type.
JSONL_TASKS = {
    "figureqa": ([{"target": 1}, {"target": 0}], 0.0),
    "chartcheck": ([{"target": "TRUE", "explanation": "Sales rose."}], 1),
    "chart_to_text": (
        [
            {
                "target": "Sales rose to 45 % in 2020 .",
                "records": "Year|2020|x|line_chart Sales|45|y|line_chart",
                "title": "Sales",
            }
        ],
        None,
    ),
    "deplot": ([{"target": "year | a\n2019 | 100"}, {"target": "title | none"}], ["a"]),
    "chartqa": ([{"target": "2010"}, {"target": ""}], True),
    "plotqa": ([{"target": 2010, "meta": {"template": "min_max"}}, {"target": "no"}], True),
    "chartqapro": ([{"target": "[a, b]", "meta": {"question_type": "Factoid"}}], [1]),
}


def test_every_task_has_its_door_here():
    from chartjax.tasks import catalog

    jsonl = {n for n, s in catalog.SCORERS.items() if s.layout == "jsonl"}
    assert jsonl == set(JSONL_TASKS)


@pytest.mark.parametrize("task", sorted(JSONL_TASKS))
def test_allow_missing_scores_a_missing_prediction_wrong_in_every_metric(tmp_path, task):
    refs, _ = JSONL_TASKS[task]
    refs = _jsonl(tmp_path / "r.jsonl", [{"id": f"r{i}", **r} for i, r in enumerate(refs)])
    preds = tmp_path / "p.jsonl"
    preds.write_text("")
    args = ["--task", task, "--predictions", str(preds), "--references", refs]
    rc, obj, _ = _run(tmp_path, *args, "--allow_missing")
    assert rc == 0
    scored = {
        k: v
        for k, v in obj["metrics"].items()
        if report.is_bounded(k) and not k.endswith("ci95_high")  # a Wilson bound stays > 0
    }
    assert scored and all(v == 0 for v in scored.values()), scored
    assert obj["metrics"]["num_missing"] == obj["num_examples"]


@pytest.mark.parametrize("task", sorted(JSONL_TASKS))
def test_every_jsonl_task_refuses_a_prediction_of_another_type(tmp_path, capsys, task):
    refs, bad = JSONL_TASKS[task]
    preds = _jsonl(tmp_path / "p.jsonl", [{"id": "r0", "prediction": bad, **refs[0]}])
    rc, _, _ = _run(tmp_path, "--task", task, "--predictions", preds)
    assert rc == 2
    assert f"{preds}:1 (id 'r0'): prediction is " in capsys.readouterr().err


def test_chart_info_refuses_a_prediction_file_that_is_not_an_object(tmp_path, capsys):
    gt_dir, pred_dir = tmp_path / "gt", tmp_path / "pred"
    gt_dir.mkdir()
    pred_dir.mkdir()
    for i, chart_type in enumerate(("line", "pie")):
        (gt_dir / f"c{i}.json").write_text(
            json.dumps({"task1": {"output": {"chart_type": chart_type}}})
        )
    (pred_dir / "c0.json").write_text(json.dumps({"task1": {"output": {"chart_type": "line"}}}))
    (pred_dir / "c1.json").write_text(json.dumps(["pie"]))
    args = [
        "--task",
        "chart_info_task1",
        "--predictions",
        str(pred_dir),
        "--references",
        str(gt_dir),
    ]
    rc, _, _ = _run(tmp_path, *args)
    assert rc == 2
    assert f"{pred_dir / 'c1.json'} (id 'c1'): the file holds an array" in capsys.readouterr().err
    rc, lenient, _ = _run(tmp_path, *args, "--lenient")
    (pred_dir / "c1.json").unlink()
    rc2, missing, _ = _run(tmp_path, *args, "--allow_missing")
    assert rc == rc2 == 0 and lenient["metrics"]["num_invalid"] == 1
    assert missing["metrics"]["num_missing"] == 1
    # The refused file is scored exactly as a missing one.
    drop = ("num_invalid", "num_missing")
    assert {k: v for k, v in lenient["metrics"].items() if k not in drop} == {
        k: v for k, v in missing["metrics"].items() if k not in drop
    }


# -- references that cannot be scored: refused naming file, line and field; no metrics.json ------

BAD_REFERENCES = [
    ("chartqa", {"target": 12}, "field 'target' is 12; expected a string or a non-empty list"),
    ("chartqa", {"target": float("nan")}, "field 'target' is NaN; expected a string or a"),
    ("chartqa", {"target": None}, "field 'target' is null; expected a string or a non-empty"),
    ("deplot", {"target": 5}, "field 'target' is 5; expected a string or a non-empty list"),
    (
        "chart_to_text",
        {"target": "Sales rose .", "records": float("nan"), "title": "Sales"},
        "field 'records' is NaN; expected a string",
    ),
    (
        "chartcheck",
        {"target": "TRUE", "explanation": None},
        "field 'explanation' is null; expected a string",
    ),
    (
        "chartcheck",
        {"target": "TRUE", "reasoning_types": "Filter"},
        "field 'reasoning_types' is \"Filter\"; expected a list of strings",
    ),
    ("chartcheck", {"target": "maybe"}, "field 'target' is \"maybe\"; expected a label: TRUE"),
]


@pytest.mark.parametrize("task, bad, message", BAD_REFERENCES)
def test_a_reference_field_of_the_wrong_type_names_file_line_and_field(
    tmp_path, capsys, task, bad, message
):
    good = JSONL_TASKS[task][0][0]
    refs = tmp_path / "r.jsonl"  # by hand: write_jsonl refuses NaN
    refs.write_text(
        "".join(json.dumps(r) + "\n" for r in ({"id": "r0", **good}, {"id": "r1", **bad}))
    )
    preds = _jsonl(
        tmp_path / "p.jsonl",
        [{"id": f"r{i}", "prediction": "The claim is true. Sales rose ."} for i in range(2)],
    )
    args = ["--task", task, "--predictions", preds, "--references", str(refs)]
    rc, _, out = _run(tmp_path, *args)
    assert rc == 2 and not out.exists()
    assert f"chartjax-score: error: {task}: {refs}:2 (id 'r1'): {message}" in (
        capsys.readouterr().err
    )


def test_a_bad_target_in_the_predictions_file_names_that_file_and_line(tmp_path, capsys):
    preds = _jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": "a", "prediction": "12", "target": "12"},
            {"id": "b", "prediction": "12", "target": 12},
        ],
    )
    rc, _, out = _run(tmp_path, "--task", "chartqa", "--predictions", preds)
    assert rc == 2 and not out.exists()
    assert f"{preds}:2 (id 'b'): field 'target' is 12" in capsys.readouterr().err


def test_a_reference_without_target_names_file_and_line(tmp_path, capsys):
    preds = _jsonl(tmp_path / "p.jsonl", [{"id": "a", "prediction": "1"}])
    refs = _jsonl(tmp_path / "r.jsonl", [{"id": "a", "answer": "1"}])
    rc, _, out = _run(tmp_path, "--task", "chartqa", "--predictions", preds, "--references", refs)
    assert rc == 2 and not out.exists()
    assert f"{refs}:1 (id 'a'): no 'target' field" in capsys.readouterr().err


def _chart_info_args(tmp_path, task, gt_obj, pred_obj):
    gt_dir, pred_dir, img_dir = tmp_path / "gt", tmp_path / "pred", tmp_path / "img"
    for folder, obj in ((gt_dir, gt_obj), (pred_dir, pred_obj)):
        folder.mkdir()
        (folder / "c.json").write_text(json.dumps(obj))
    img_dir.mkdir()
    Image.new("RGB", (640, 480)).save(img_dir / "c.png")
    return [
        *("--task", f"chart_info_task{task}", "--predictions", str(pred_dir)),
        *("--references", str(gt_dir), "--images", str(img_dir)),
    ]


def _line_chart(*ys):
    series = {"name": "s", "data": [{"x": x, "y": y} for x, y in enumerate(ys)]}
    return {
        "task1": {"output": {"chart_type": "line"}},
        "task6": {"output": {"data series": [series]}},
    }


@pytest.mark.parametrize(
    "value, written", [("NaN", '"NaN"'), ("inf", '"inf"'), (math.inf, "Infinity")]
)
def test_chart_info_6b_refuses_a_non_finite_reference_value(tmp_path, capsys, value, written):
    # Before: the value was dropped, so an empty (or NaN) prediction scored 1.0 in every metric.
    args = _chart_info_args(tmp_path, "6b", _line_chart(1, value), _line_chart())
    rc, _, out = _run(tmp_path, *args)
    assert rc == 2 and not out.exists()
    assert (
        f"chart_info_task6b: {tmp_path / 'gt' / 'c.json'}: task6.output.data series[0].data[1].y "
        f"is {written}; a reference value must be a finite number" in capsys.readouterr().err
    )


def test_chart_info_6b_scores_a_non_finite_prediction_as_wrong(tmp_path):
    args = _chart_info_args(tmp_path, "6b", _line_chart(1, 2, 3), _line_chart(1, 2, "NaN"))
    rc, obj, _ = _run(tmp_path, *args)
    assert rc == 0 and obj["metrics"]["ds_score"] < 0.9  # 1 - the NaN point's share


NAN_REFERENCES = {
    "4": (
        {
            "task4": {
                "output": {
                    "axes": {"x-axis": [], "y-axis": [{"id": 1, "tick_pt": {"x": 3, "y": "NaN"}}]}
                }
            }
        },
        'task4.output.axes.y-axis[0].tick_pt.y is "NaN"',
    ),
    "5": (
        {
            "task5": {
                "output": {
                    "legend_pairs": [
                        {"id": 1, "bb": {"x0": 1, "y0": 2, "width": math.nan, "height": 3}}
                    ]
                }
            }
        },
        "task5.output.legend_pairs[0].bb.width is NaN",
    ),
}


@pytest.mark.parametrize("task", sorted(NAN_REFERENCES))
def test_chart_info_4_and_5_name_the_file_and_field_of_a_nan_reference(tmp_path, capsys, task):
    gt, field = NAN_REFERENCES[task]
    rc, _, out = _run(tmp_path, *_chart_info_args(tmp_path, task, gt, gt))
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert f"chart_info_task{task}: {tmp_path / 'gt' / 'c.json'}: {field}; a reference" in err
    assert "not a finite number" not in err  # the old message, from metrics.json's check


@pytest.mark.parametrize("where", ["file_in_the_way", "out_is_a_folder", "report_under_a_file"])
def test_an_output_that_cannot_be_written_is_refused_before_anything_is_read(
    tmp_path, capsys, where
):
    (tmp_path / "blocker").write_text("x")
    (tmp_path / "a_folder").mkdir()
    out, extra = str(tmp_path / "metrics.json"), []
    if where == "file_in_the_way":
        out = str(tmp_path / "blocker" / "metrics.json")
    elif where == "out_is_a_folder":
        out = str(tmp_path / "a_folder")
    else:
        extra = ["--report", str(tmp_path / "blocker" / "report.html")]
    # The predictions file does not exist: the refusal must come before it is read.
    missing = str(tmp_path / "no_such_predictions.jsonl")
    rc = score.main(["--task", "chartqa", "--predictions", missing, "--out", out, *extra])
    err = capsys.readouterr().err
    assert rc == 2 and "no_such_predictions" not in err
    assert ("is a file, not a folder" in err) or ("is a folder; give a file name" in err), err
    assert err.count("\n") == 1 and not (tmp_path / "metrics.json").exists()


@pytest.mark.parametrize("target", [None, "maybe", float("nan"), [1], 2])
def test_a_figureqa_reference_that_is_not_an_answer_is_refused(tmp_path, capsys, target):
    preds = _jsonl(
        tmp_path / "p.jsonl", [{"id": "0/0", "prediction": 1}, {"id": "0/1", "prediction": 0}]
    )
    refs = tmp_path / "r.jsonl"  # written by hand: NaN is what a pandas export writes
    rows = [{"id": "0/0", "target": 1}, {"id": "0/1", "target": target}]
    refs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    refs = str(refs)
    rc, _, out = _run(
        tmp_path, "--task", "figureqa", "--predictions", str(preds), "--references", str(refs)
    )
    err = capsys.readouterr().err
    assert rc == 2 and "r.jsonl:2" in err and "field 'target'" in err, err
    assert not out.exists()
    ok = _jsonl(tmp_path / "ok.jsonl", [{"id": "0/0", "target": "yes"}, {"id": "0/1", "target": 0}])
    rc, metrics, _ = _run(
        tmp_path, "--task", "figureqa", "--predictions", str(preds), "--references", str(ok)
    )
    assert rc == 0 and metrics["metrics"]["accuracy"] == 1.0


def test_chartcheck_test_two_from_a_build_names_its_test_set_and_compat_picks_the_metrics(
    tmp_path,
):
    """The metrics.json of a test_two score says which test set 2 the build holds (issue 30,
    item 1); --compat matcha_test scores explanations as matcha_test.py did (item 6)."""
    import os
    from pathlib import Path

    import tensorflow_datasets as tfds

    from tfds_builders.chartcheck.chartcheck import Builder

    manual = Path(__file__).resolve().parents[2] / "tfds_builders" / "chartcheck" / "dummy_data"
    for name, folder in (("release", manual), ("paper", manual / "paper_era")):
        data_dir = tmp_path / name
        Builder(data_dir=os.fspath(data_dir)).download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=os.fspath(folder))
        )
        rows = [
            {"id": f"test_two:{i}", "prediction": "Yes. Explanation: Votes rising."}
            for i in (["0", "198 qq", "2"] if name == "release" else ["0", "1", "2"])
        ]
        preds = _jsonl(tmp_path / f"{name}.jsonl", rows)
        rc, obj, _ = _run(
            tmp_path,
            *("--task", "chartcheck", "--predictions", preds, "--compat", "matcha_test"),
            *("--references", "tfds:chartcheck:test_two", "--data_dir", os.fspath(data_dir)),
        )
        assert rc == 0
        libraries = obj["provenance"]["libraries"]
        version = "reannotated_2024" if name == "release" else "paper_2023"
        assert libraries["chartcheck_test_two"].startswith(version)
        assert libraries["chartcheck_explanations"].startswith("matcha_test")


def test_tfds_references_without_a_build_are_one_line(tmp_path, capsys):
    """tfds:... references whose build is not under --data_dir (or TFDS's default) printed
    TFDS's 460-line catalogue (issue 44 item 15): one line naming where it looked."""
    pred = tmp_path / "p.jsonl"
    pred.write_text('{"id": "a", "prediction": "x"}\n')
    rc = score.main(["--task", "chartcheck", "--predictions", str(pred), "--references",
                     "tfds:chartcheck:test_two", "--data_dir", str(tmp_path / "tfds"),
                     "--out", str(tmp_path / "m.json")])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and (
        f"no build of 'chartcheck' under {tmp_path / 'tfds'} (looked for "
        f"{tmp_path / 'tfds' / 'chartcheck'}): give its --data_dir" in err
    ), err
    assert not (tmp_path / "m.json").exists()


def test_tfds_references_without_data_dir_name_the_default(tmp_path, monkeypatch, capsys):
    """The probe as met: no --data_dir, nothing built in ~/tensorflow_datasets (issue 44 item
    15): one line naming the default folder and --data_dir, not TFDS's catalogue."""
    monkeypatch.setenv("HOME", str(tmp_path))
    pred = tmp_path / "p.jsonl"
    pred.write_text('{"id": "a", "prediction": "x"}\n')
    rc = score.main(["--task", "chartcheck", "--predictions", str(pred), "--references",
                     "tfds:chartcheck:test_two", "--out", str(tmp_path / "m.json")])  # fmt: skip
    assert rc == 2
    root = tmp_path / "tensorflow_datasets"
    assert capsys.readouterr().err == (
        f"chartjax-score: error: --references tfds:chartcheck:test_two: no build of 'chartcheck' "
        f"under {root}, the default data_dir (no --data_dir given) (looked for "
        f"{root / 'chartcheck'}): give its --data_dir, or build it with `tfds build "
        f"tfds_builders/chartcheck --data_dir={root} ...`\n"
    )
    assert not (tmp_path / "m.json").exists()
