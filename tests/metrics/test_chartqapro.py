"""ChartQAPro scored as lmms-eval scores it (lmms-eval tasks/chartqapro), worked by hand."""

import pytest

from chartjax.metrics import chartqapro as Q


@pytest.mark.parametrize(
    "target, prediction, expected",
    [
        ("apple", "apple", 1.0),
        ("apple", "apples", 1 - 1 / 6),  # one insertion over 6 characters
        ("abcd", "abcx", 0.75),
        ("abcd", "abxy", 0.0),  # distance 2/4 = 0.5 reaches the threshold
        ("", "", 1.0),
        ("", "a", 0.0),
    ],
)
def test_anls(target, prediction, expected):
    assert Q.anls(target, prediction) == pytest.approx(expected)


@pytest.mark.parametrize(
    "target, prediction, kwargs, expected",
    [
        ("Chicago", " Chicago.\n", {}, 1.0),  # whitespace and a trailing "." stripped
        ("Chicago", "CHICAGO", {}, 1.0),  # ANLS on lowercased text
        ("apple", "Apples", {}, pytest.approx(5 / 6)),
        ("45%", "45", {}, 1.0),  # "%" stripped, not divided by 100 (pix2struct: wrong)
        ("200", "210", {}, 1.0),  # 10 / 200 = 0.05
        ("200", "210.5", {}, 0.0),  # 10.5 / 200 = 0.0525
        ("0", "0.0", {}, 1.0),  # a zero target needs exactly zero (pix2struct: wrong)
        ("0", "0.01", {}, 0.0),
        ("2010", "2008", {}, 1.0),  # 2 / 2010 within 5 %
        ("2010", "2008", {"year": ["YES"]}, 0.0),  # a year item: exact
        ("2010", "2008", {"year": "NO"}, 1.0),
        ("True", "true", {"question_type": "Fact Checking"}, 1.0),
        ("Option A", "Option B", {"question_type": "Multi Choice"}, 0.0),
        ("Option A", "Option B", {"question_type": "Factoid"}, 0.875),  # ANLS 1 - 1/8
        # lists, item by item: the second year item is wrong -> (1 + 0) / 2
        ("[1990, 2000]", "[1990, 2001]", {"year": ["YES", "YES"]}, 0.5),
        ("[1990, 2000]", "[1990, 2001]", {"year": ["NO", "NO"]}, 1.0),  # 1 / 2000
        ("[1990, 2000]", "[1990, 2001]", {"year": ["YES"]}, 0.5),  # one flag for every item
        ("[a, b, c]", "[a, b]", {}, pytest.approx(2 / 3)),  # a missing item scores 0
        ("['North', 'South']", "[north, south]", {}, 1.0),
        ("[5, 7]", "5", {}, 0.5),  # a single answer is one item
    ],
)
def test_answer_score(target, prediction, kwargs, expected):
    assert Q.answer_score(target, prediction, **kwargs) == expected


def test_split_list():
    assert Q.split_list("[a, b]") == ["a", "b"]
    assert Q.split_list("['a, x', 'b']") == ["a, x", "b"]  # a Python literal keeps its commas
    assert Q.split_list("[1, 2.5]") == ["1", "2.5"]
    assert Q.split_list("a, b") == ["a, b"]


def test_scores_and_question_type_breakdown():
    rows = [  # (prediction, target, question type, year flags) -> score
        ("Apples", "apple", "Factoid", None),  # 5/6
        ("2008", "2010", "Factoid", ["YES"]),  # 0
        ("Yes", "yes.", "Fact Checking", None),  # 1 (the target's "." stripped too)
        (None, "B", "Multi Choice", None),  # missing: 0
        ("4", ["5", "4.1"], "Hypothetical", None),  # best of the targets: 0.1 / 4.1 -> 1
    ]
    preds, targets, types, years = zip(*rows)
    s = Q.chartqapro_scores(list(preds), list(targets), question_types=types, years=years)
    assert s.metrics["relaxed_accuracy"] == pytest.approx((5 / 6 + 0 + 1 + 0 + 1) / 5)
    low, high = s.metrics["relaxed_accuracy_ci95_low"], s.metrics["relaxed_accuracy_ci95_high"]
    assert 0.0 <= low <= s.metrics["relaxed_accuracy"] <= high <= 1.0
    q = s.breakdowns["question_type"]
    assert q["Factoid"]["relaxed_accuracy"] == pytest.approx(5 / 12) and q["Factoid"]["n"] == 2
    assert q["Fact Checking"]["relaxed_accuracy"] == 1.0
    assert q["Multi Choice"]["relaxed_accuracy"] == 0.0
    assert s.libraries["protocol"] == "lmms_eval"
    plain = Q.chartqapro_scores(["a"], ["a"])
    assert plain.breakdowns == {} and plain.metrics["relaxed_accuracy"] == 1.0
