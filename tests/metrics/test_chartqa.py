"""ChartQA relaxed accuracy: pix2struct's truth table, the suites' protocols, and the per-source
scores of a test set with their intervals. Every expected value is worked by hand below."""

import pytest

from chartjax.metrics import chartqa as C

# docs/metrics.md §5.3 truth table [derived]: (target, prediction) -> correct.
TRUTH = [
    ("2010", "2008", True),  # |2008 - 2010| / 2010 = 0.001: the year quirk (pix2struct#35)
    ("45%", "45", False),  # 0.45 vs 45
    ("45%", "0.45", True),
    ("0", "0.0", False),  # a zero target falls back to the string compare
    ("Yes", "yes ", False),  # no strip
    ("1,000", "1000", False),
    ("100", " 104 ", True),  # float() strips
    ("12", "12.6", True),  # 0.6 / 12 = 0.05: inclusive
    ("12", "12.61", False),
    ("nan", "nan", False),
]


@pytest.mark.parametrize("target, prediction, correct", TRUTH)
def test_pix2struct_truth_table(target, prediction, correct):
    assert C.relaxed_correctness(target, prediction) is correct
    assert C.protocol_correct(target, prediction, "pix2struct") is correct


# (target, prediction) -> correct under pix2struct, lmms_eval, vlmevalkit, big_vision.
PROTOCOL_CASES = [
    # 5 / 100 = 0.05 against the target; 5 / 95 = 0.0526 against the prediction (VLMEvalKit).
    ("100", "95", (True, True, False, True)),
    ("100", "95.2", (True, True, False, True)),  # 4.8 / 95.2 = 0.0504
    ("100", "105", (True, True, True, True)),  # 5 / 105 = 0.0476
    ("Yes", "yes ", (False, True, True, False)),  # lmms_eval and VLMEvalKit strip the answer
    ("Yes", "yes", (True, True, True, False)),  # big_vision is case-sensitive
    ("Yes", "Yes", (True, True, True, True)),
    ("2010", "2008", (True, True, True, True)),  # the year quirk is in every suite
    # VLMEvalKit: the prediction "0" is the swapped "target": zero, so strings are compared.
    ("0", "0", (True, True, True, True)),
]


@pytest.mark.parametrize("target, prediction, expected", PROTOCOL_CASES)
def test_protocols(target, prediction, expected):
    names = ("pix2struct", "lmms_eval", "vlmevalkit", "big_vision")
    assert tuple(C.protocol_correct(target, prediction, n) for n in names) == expected


def test_per_source_mean_pooled_and_intervals():
    rows = [  # (prediction, target, source, correct under pix2struct)
        ("2008", "2010", "human"),  # correct: year quirk
        ("no", "No", "human"),  # correct: case-insensitive
        ("12.61", "12", "human"),  # wrong: 0.61 / 12 > 0.05
        ("Yes ", "yes", "human"),  # wrong: no strip
        ("0.45", ["45%", "x"], "augmented"),  # correct: 45% = 0.45, the best target counts
        ("1000", "1,000", "augmented"),  # wrong
        (None, "", "augmented"),  # missing: wrong even against an empty target
    ]
    preds, targets, sources = zip(*rows)
    s = C.chartqa_scores(list(preds), list(targets), list(sources))
    m = s.metrics
    # human 2/4, augmented 1/3; overall = their mean, (0.5 + 1/3) / 2 = 5/12; pooled 3/7.
    assert m["relaxed_accuracy_human"] == 0.5
    assert m["relaxed_accuracy_augmented"] == pytest.approx(1 / 3)
    assert m["relaxed_accuracy"] == pytest.approx(5 / 12)
    assert m["relaxed_accuracy_pooled"] == pytest.approx(3 / 7)
    # Wilson 95 % (z = 1.96): p = 2/4 -> 0.5 -+ 0.349964 (center 0.5); p = 1/3 -> center
    # (1/3 + z^2/6) / (1 + z^2/3) = 0.426918, half 0.365427; p = 3/7 -> [0.158217, 0.749546].
    assert m["relaxed_accuracy_human_ci95_low"] == pytest.approx(0.150036, abs=1e-6)
    assert m["relaxed_accuracy_human_ci95_high"] == pytest.approx(0.849964, abs=1e-6)
    assert m["relaxed_accuracy_augmented_ci95_low"] == pytest.approx(0.061490, abs=1e-6)
    assert m["relaxed_accuracy_augmented_ci95_high"] == pytest.approx(0.792345, abs=1e-6)
    assert m["relaxed_accuracy_pooled_ci95_low"] == pytest.approx(0.158217, abs=1e-6)
    assert m["relaxed_accuracy_pooled_ci95_high"] == pytest.approx(0.749546, abs=1e-6)
    # MOVER over the two Wilson intervals, weights 1/2:
    # low = 5/12 - sqrt((0.5 * 0.349964)^2 + (0.5 * (1/3 - 0.061490))^2) = 0.195096
    # high = 5/12 + sqrt((0.5 * 0.349964)^2 + (0.5 * (0.792345 - 1/3))^2) = 0.705270
    assert m["relaxed_accuracy_ci95_low"] == pytest.approx(0.195096, abs=1e-6)
    assert m["relaxed_accuracy_ci95_high"] == pytest.approx(0.705270, abs=1e-6)
    assert s.breakdowns["source"]["human"]["n"] == 4
    assert s.breakdowns["source"]["augmented"]["n"] == 3
    assert s.libraries["protocol"] == "pix2struct"
    assert "mean of the sources" in s.libraries["relaxed_accuracy"]


def test_equal_sources_have_no_pooled_mean_and_a_protocol_changes_the_numbers():
    preds, targets = ["yes ", "95", "a", "b"], ["Yes", "100", "a", "c"]
    sources = ["human", "human", "augmented", "augmented"]
    s = C.chartqa_scores(preds, targets, sources)
    # human: "yes " wrong (no strip), 95 right; augmented: a right, b wrong -> 0.5 and 0.5.
    assert s.metrics["relaxed_accuracy"] == 0.5 and "relaxed_accuracy_pooled" not in s.metrics
    v = C.chartqa_scores(preds, targets, sources, protocol="vlmevalkit")
    # VLMEvalKit: "yes" right after stripping, 95 wrong (5 / 95 > 0.05): human still 0.5.
    assert v.metrics["relaxed_accuracy_human"] == 0.5
    assert v.libraries["protocol"] == "vlmevalkit"
    assert v.libraries["relaxed_accuracy"].startswith("vlmevalkit")
    lm = C.chartqa_scores(preds, targets, sources, protocol="lmms_eval")
    assert lm.metrics["relaxed_accuracy_human"] == 1.0  # stripped "yes" and 95 both right
    with pytest.raises(ValueError, match="unknown protocol"):
        C.chartqa_scores(preds, targets, sources, protocol="spec")


def test_without_sources_overall_is_pooled_and_unsourced_rows_count_only_there():
    s = C.chartqa_scores(["1", "2", "3"], ["1", "2", "x"])
    assert s.metrics["relaxed_accuracy"] == pytest.approx(2 / 3)
    # Wilson(2, 3) = [0.207655, 0.938510]
    assert s.metrics["relaxed_accuracy_ci95_low"] == pytest.approx(0.207655, abs=1e-6)
    assert s.metrics["relaxed_accuracy_ci95_high"] == pytest.approx(0.938510, abs=1e-6)
    assert s.breakdowns == {} and "pooled" in s.libraries["relaxed_accuracy"]
    mixed = C.chartqa_scores(["1", "2", "3"], ["1", "2", "x"], ["human", None, "human"])
    # overall pooled over the three rows; human 1/2 over its two rows.
    assert mixed.metrics["relaxed_accuracy"] == pytest.approx(2 / 3)
    assert mixed.metrics["relaxed_accuracy_human"] == 0.5
    assert "relaxed_accuracy_augmented" not in mixed.metrics


def test_mean_interval_is_seeded_and_contains_the_mean():
    values = [1.0, 0.0, 0.5, 0.8333, 1.0]
    low, high = C.mean_interval(values)
    assert (low, high) == C.mean_interval(values)
    assert 0.0 <= low <= sum(values) / 5 <= high <= 1.0
    assert C.mean_interval([1.0, 1.0]) == (1.0, 1.0)
