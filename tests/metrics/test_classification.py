"""Hand-computed vectors for chartjax.metrics.classification."""

import pytest

from chartjax.metrics import classification as C

PRED = ["a", "a", "b", "b", "a", "c"]
GOLD = ["a", "b", "b", "b", "a", "a"]


def test_accuracy():
    assert C.accuracy(PRED, GOLD) == pytest.approx(4 / 6)
    assert C.accuracy([1, 0], [1, 1]) == 0.5
    with pytest.raises(ValueError, match="differ in length"):
        C.accuracy([1], [1, 0])
    with pytest.raises(ValueError, match="no examples"):
        C.accuracy([], [])


def test_macro_f1_default_labels():
    # a: tp=2, support=3, predicted=3 -> 4/6; b: tp=2, support=3, predicted=2 -> 4/5;
    # c: tp=0, support=0, predicted=1 -> 0.  mean = (2/3 + 0.8 + 0) / 3
    assert C.macro_f1(PRED, GOLD) == pytest.approx((2 / 3 + 0.8) / 3)


def test_macro_f1_given_labels_counts_absent_label_as_zero():
    # 'd' has neither support nor predictions: F1 = 0 and it stays in the mean when given.
    assert C.macro_f1(PRED, GOLD, labels=["a", "b", "d"]) == pytest.approx((2 / 3 + 0.8 + 0) / 3)
    assert C.macro_f1(PRED, GOLD, labels=["a", "b"]) == pytest.approx((2 / 3 + 0.8) / 2)


def test_macro_f1_matches_sklearn_binary_case():
    # ChartCheck: TRUE/FALSE; one unparseable prediction (None) counts as wrong.
    pred = ["TRUE", "TRUE", "FALSE", None, "TRUE"]
    gold = ["TRUE", "FALSE", "FALSE", "FALSE", "TRUE"]
    # TRUE: tp=2, support 2, predicted 3 -> 0.8; FALSE: tp=1, support 3, predicted 1 -> 0.5
    assert C.macro_f1(pred, gold) == pytest.approx(0.65)
    assert C.macro_f1(pred, gold, labels=["TRUE", "FALSE"]) == pytest.approx(0.65)
    assert C.accuracy(pred, gold) == pytest.approx(0.6)


def test_confusion_matrix_rows_are_targets():
    m = C.confusion_matrix(PRED, GOLD, ["a", "b", "c"])
    assert m == [[2, 0, 1], [1, 2, 0], [0, 0, 0]]
    with pytest.raises(ValueError, match="prediction 'c'"):
        C.confusion_matrix(PRED, GOLD, ["a", "b"])
    with pytest.raises(ValueError, match="target 'a'"):
        C.confusion_matrix(PRED, GOLD, ["b", "c"])


def test_confusion_breakdown_shape_and_extra_column():
    out = C.confusion_breakdown(
        ["TRUE", None, "FALSE"], ["TRUE", "TRUE", "FALSE"], ["TRUE", "FALSE"]
    )
    assert out == {
        "TRUE": {"pred_TRUE": 1, "pred_FALSE": 0, "pred_None": 1},
        "FALSE": {"pred_TRUE": 0, "pred_FALSE": 1, "pred_None": 0},
    }


def test_wilson_interval_known_values():
    low, high = C.wilson_interval(8, 10)
    assert (low, high) == (pytest.approx(0.490157, abs=1e-6), pytest.approx(0.943319, abs=1e-6))
    # k = 0: the upper bound is z^2 / (n + z^2) = 3.8416 / 13.8416 exactly.
    low, high = C.wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(3.8416 / 13.8416, abs=1e-12)
    low, high = C.wilson_interval(10, 10)
    assert high == 1.0 and low == pytest.approx(1 - 3.8416 / 13.8416, abs=1e-12)
    assert C.wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        C.wilson_interval(3, 2)


def test_group_by_multilabel_and_order():
    keys = ["x", ["Filter", "Compare"], 10, 2, [], ["Filter", "Filter"]]
    groups = C.group_by(keys, [1, 2, 3, 4, 5, 6])
    assert groups == {"2": [4], "10": [3], "Compare": [2], "Filter": [2, 6], "x": [1]}
    assert list(groups) == ["2", "10", "Compare", "Filter", "x"]
    with pytest.raises(ValueError):
        C.group_by(["a"], [1, 2])


def test_breakdown_per_group():
    out = C.breakdown(PRED, GOLD, ["p", "p", "q", ["q", "r"], "p", "r"])
    assert out["p"]["accuracy"] == pytest.approx(2 / 3) and out["p"]["n"] == 3
    assert out["q"] == {
        "accuracy": 1.0,
        "n": 2,
        "accuracy_ci95_low": pytest.approx(C.wilson_interval(2, 2)[0]),
        "accuracy_ci95_high": 1.0,
    }
    assert out["r"]["accuracy"] == 0.5 and out["r"]["n"] == 2
    with_f1 = C.breakdown(PRED, GOLD, ["g"] * 6, with_macro_f1=True)
    assert with_f1["g"]["macro_f1"] == pytest.approx(C.macro_f1(PRED, GOLD))


def test_classification_metrics():
    out = C.classification_metrics(PRED, GOLD)
    low, high = C.wilson_interval(4, 6)
    assert out == {
        "accuracy": pytest.approx(4 / 6),
        "macro_f1": pytest.approx((2 / 3 + 0.8) / 3),
        "accuracy_ci95_low": pytest.approx(low),
        "accuracy_ci95_high": pytest.approx(high),
    }
