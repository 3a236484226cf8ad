"""PlotQA relaxed accuracy overall and per template, worked by hand."""

import pytest

from chartjax.metrics import plotqa as P


def test_overall_and_per_template_with_wilson_intervals():
    rows = [  # (prediction, target, template)
        ("12.5", "12.6", "data_retrieval"),  # right: 0.1 / 12.6 = 0.0079
        ("Yes", "yes", "data_retrieval"),  # right: case-insensitive
        ("Brazil", "Argentina", "min_max"),  # wrong
        ("105.1", "100", "arithmetic"),  # wrong: 5.1 / 100 > 0.05
        ("0.0", "0", "arithmetic"),  # wrong: a zero target is compared as text
    ]
    preds, targets, templates = zip(*rows)
    s = P.plotqa_scores(list(preds), list(targets), templates=list(templates))
    assert s.metrics["relaxed_accuracy"] == pytest.approx(2 / 5)
    # Wilson(2, 5): center (0.4 + 1.96^2 / 10) / (1 + 1.96^2 / 5) = 0.443449, half 0.325831
    assert s.metrics["relaxed_accuracy_ci95_low"] == pytest.approx(0.117618, abs=1e-6)
    assert s.metrics["relaxed_accuracy_ci95_high"] == pytest.approx(0.769280, abs=1e-6)
    t = s.breakdowns["template"]
    assert list(t) == ["arithmetic", "data_retrieval", "min_max"]
    assert (t["data_retrieval"]["relaxed_accuracy"], t["data_retrieval"]["n"]) == (1.0, 2)
    # Wilson(2, 2) = [0.342372, 1]; Wilson(0, 2) = [0, 0.657628]
    assert t["data_retrieval"]["relaxed_accuracy_ci95_low"] == pytest.approx(0.342372, abs=1e-6)
    assert t["arithmetic"]["relaxed_accuracy"] == 0.0
    assert t["arithmetic"]["relaxed_accuracy_ci95_high"] == pytest.approx(0.657628, abs=1e-6)
    assert "question_type" not in s.breakdowns
    assert s.libraries["protocol"] == "pix2struct"


def test_question_types_where_given_and_missing_predictions():
    s = P.plotqa_scores(
        [None, "3", "x"],
        ["3", "3", ["y", "x"]],
        question_types=["structural", None, "structural"],
    )
    assert s.metrics["relaxed_accuracy"] == pytest.approx(2 / 3)  # the missing one is wrong
    assert s.breakdowns["question_type"] == {
        "structural": {
            "relaxed_accuracy": 0.5,
            "n": 2,
            # Wilson(1, 2): 0.5 -+ 0.405471
            "relaxed_accuracy_ci95_low": pytest.approx(0.094529, abs=1e-6),
            "relaxed_accuracy_ci95_high": pytest.approx(0.905471, abs=1e-6),
        }
    }
