"""chartjax.metrics.report: schema building/validation, JSON(L) IO, provenance, plots."""

import hashlib
import json
import os
import re

import numpy as np
import pytest

from chartjax.metrics import report as R


def _valid(**overrides):
    obj = dict(
        task="figureqa",
        split="validation2",
        step=12000,
        num_examples=4,
        metrics={"accuracy": 0.75, "macro_f1": np.float64(0.7), "cider_d": 3.9, "num_skipped": 2},
        breakdowns={"figure_type": {"vbar": {"accuracy": 0.5, "n": 2}}},
        unavailable={"bleurt": "no checkpoint given (--bleurt_checkpoint)"},
        provenance={"chartjax": "0.1.0"},
    )
    obj.update(overrides)
    return obj


def test_build_metrics_exact_schema_and_plain_numbers():
    out = R.build_metrics(
        task="t",
        split="s",
        step=None,
        num_examples=np.int64(3),
        metrics={"accuracy": np.float32(0.5)},
    )
    assert list(out) == [
        "task",
        "split",
        "step",
        "num_examples",
        "metrics",
        "breakdowns",
        "unavailable",
        "provenance",
    ]
    assert out["num_examples"] == 3 and type(out["num_examples"]) is int
    assert type(out["metrics"]["accuracy"]) is float
    assert out["breakdowns"] == {} and out["unavailable"] == {} and out["provenance"] == {}
    json.dumps(out)  # plain JSON types only


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"metrics": {"accuracy": 1.2}}, "metrics.accuracy"),
        ({"metrics": {"accuracy": float("nan")}}, "metrics.accuracy"),
        ({"metrics": {"bleu": -0.1}}, "metrics.bleu"),
        ({"metrics": {"Accuracy": 0.5}}, "metrics.Accuracy"),
        ({"metrics": {"accuracy": "0.5"}}, "metrics.accuracy"),
        ({"metrics": {"accuracy": True}}, "metrics.accuracy"),
        ({"unavailable": {"bleurt": None}}, "unavailable.bleurt"),
        ({"unavailable": {"accuracy": "x"}}, "unavailable.accuracy"),
        (
            {"breakdowns": {"figure_type": {"vbar": {"accuracy": 2.0}}}},
            "breakdowns.figure_type.vbar.accuracy",
        ),
        ({"breakdowns": {"Figure Type": {}}}, "breakdowns.Figure Type"),
        ({"step": -1}, "step"),
        ({"step": 1.5}, "step"),
        ({"num_examples": -3}, "num_examples"),
        ({"task": ""}, "task"),
        ({"extra": 1}, "extra"),
    ],
)
def test_validate_metrics_names_the_field(overrides, field):
    with pytest.raises(ValueError, match=re.escape(field)):
        R.validate_metrics(_valid(**overrides))


def test_validate_accepts_native_unit_metrics_and_missing_field_is_named():
    R.validate_metrics(
        _valid(
            metrics={
                "cider": 12.0,
                "bleurt": -1.3,
                "perplexity": 5e4,
                "num_unparseable": 7,
                "accuracy": 0.0,
            },
            unavailable={},
        )
    )
    obj = _valid()
    del obj["num_examples"]
    with pytest.raises(ValueError, match="num_examples"):
        R.validate_metrics(obj)


def test_write_metrics_atomic_and_validated(tmp_path):
    path = tmp_path / "sub" / "metrics.json"
    R.write_metrics(path, _valid())
    loaded = json.loads(path.read_text())
    assert loaded["metrics"]["macro_f1"] == 0.7 and loaded["step"] == 12000
    assert path.read_text().startswith('{\n  "task": "figureqa"')
    with pytest.raises(ValueError, match="metrics.accuracy"):
        R.write_metrics(path, _valid(metrics={"accuracy": 7.0}))
    # The failed write left the previous file intact and no temp files behind.
    assert json.loads(path.read_text()) == loaded
    assert os.listdir(path.parent) == ["metrics.json"]


def test_provenance_fields():
    prov = R.provenance(config_text="x = 1\n", checkpoint="runs/x/1", libraries={"nltk": "3.9"})
    assert prov["chartjax"] == "0.1.0"
    assert prov["config_sha256"] == hashlib.sha256(b"x = 1\n").hexdigest()
    assert prov["checkpoint"] == "runs/x/1" and prov["libraries"] == {"nltk": "3.9"}
    assert prov["git"] == "unknown" or re.fullmatch(r"[0-9a-f]{4,40}", prov["git"])
    assert R.provenance()["config_sha256"] is None


def test_plot_breakdown_writes_png(tmp_path):
    bd = {
        "figure_type": {
            "vbar": {"accuracy": 0.5, "n": 2, "accuracy_ci95_low": 0.1, "accuracy_ci95_high": 0.9},
            "pie": {"accuracy": 1.0, "n": 1, "accuracy_ci95_low": 0.2, "accuracy_ci95_high": 1.0},
        },
        "question_template": {str(i): {"accuracy": i / 15, "n": 3} for i in range(15)},
        "confusion": {"TRUE": {"pred_TRUE": 3}},
    }
    path = tmp_path / "plot.png"
    R.plot_breakdown(bd, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    with Image.open(path) as im:
        assert im.height > im.width * 0.5  # two panels stacked (the confusion one is skipped)
    with pytest.raises(ValueError, match="no breakdown reports 'bleu'"):
        R.plot_breakdown(bd, tmp_path / "x.png", metric="bleu")
