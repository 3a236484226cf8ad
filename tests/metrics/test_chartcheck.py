"""ChartCheck label parsing and breakdowns (metrics reference §1.1)."""

import pytest

from chartjax.metrics import chartcheck as CC


@pytest.mark.parametrize(
    "text, flan, matcha",
    [
        ("The claim is true.", "TRUE", None),
        ("false", "FALSE", None),
        ("It is not true, it is false", "TRUE", None),  # both words: "true" is checked first
        ("Yes.", None, "TRUE"),
        ("no, it is false", "FALSE", "FALSE"),
        ("cannot say", None, None),
    ],
)
def test_label_parsers(text, flan, matcha):
    assert CC.parse_flan_t5(text) == flan
    assert CC.parse_matcha(text) == matcha


def test_gold_labels():
    assert [CC.parse_gold(x) for x in ("supports", "REFUTES", "Yes", 0, "The claim is false.")] == [
        "TRUE",
        "FALSE",
        "TRUE",
        "FALSE",
        "FALSE",
    ]
    with pytest.raises(ValueError, match="unknown ChartCheck gold label"):
        CC.parse_gold("maybe")


def test_chartcheck_unparseable_counted_or_dropped():
    gens = ["true", "false", "???", "true"]
    gold = ["TRUE", "TRUE", "FALSE", "FALSE"]
    out = CC.chartcheck_scores(
        gens,
        gold,
        chart_types=["bar", "bar", "pie", "pie"],
        reasoning_types=[["Filter"], [], ["Filter", "Compare"], ["Compare"]],
    )
    assert out.metrics["accuracy"] == 0.25 and out.metrics["num_unparseable"] == 1
    # TRUE: tp 1, support 2, predicted 2 -> 0.5; FALSE: tp 0, support 2, predicted 1 -> 0.
    assert out.metrics["macro_f1"] == pytest.approx(0.25)
    assert out.breakdowns["reasoning_type"]["Filter"]["n"] == 2
    assert out.breakdowns["chart_type"]["pie"]["accuracy"] == 0.0
    dropped = CC.chartcheck_scores(gens, gold, drop_unparseable=True)
    assert dropped.metrics["accuracy"] == pytest.approx(1 / 3)
    assert dropped.metrics["num_unparseable"] == 1


def test_reasoning_types_as_a_string_is_refused_not_split_into_letters():
    with pytest.raises(ValueError, match=r"reasoning_types\[1\] is a string; expected a list"):
        CC.chartcheck_scores(["true", "false"], ["TRUE", "FALSE"], reasoning_types=[[], "Filter"])


# --- as the authors counted and scored (issue 30, items 6, 7 and 9) --------------------------


def test_dropped_verdicts_are_counted_and_an_all_dropped_split_is_unavailable():
    gens = ["true", "false", "???", "true", "maybe"]
    gold = ["TRUE", "TRUE", "FALSE", "FALSE", "TRUE"]
    kept = CC.chartcheck_scores(gens, gold)
    assert (kept.metrics["num_skipped"], kept.metrics["num_scored"]) == (0, 5)
    dropped = CC.chartcheck_scores(gens, gold, drop_unparseable=True)
    assert (dropped.metrics["num_skipped"], dropped.metrics["num_scored"]) == (2, 3)
    assert dropped.metrics["num_unparseable"] == 2
    assert "drop_unparseable=True" in dropped.libraries["chartcheck"]
    none = CC.chartcheck_scores(["?", "!"], ["TRUE", "FALSE"], drop_unparseable=True)
    assert none.metrics == {"num_unparseable": 2, "num_skipped": 2, "num_scored": 0}
    assert set(none.unavailable) == {"accuracy", "macro_f1"}


def test_macro_f1_has_a_seeded_bootstrap_interval_around_it():
    gold = ["TRUE", "FALSE"] * 50
    gens = ["true" if i % 3 else "false" for i in range(100)]
    out = CC.chartcheck_scores(gens, gold)
    m = out.metrics
    assert m["macro_f1_ci95_low"] < m["macro_f1"] < m["macro_f1_ci95_high"]
    assert m["accuracy_ci95_low"] < m["accuracy"] < m["accuracy_ci95_high"]
    assert CC.chartcheck_scores(gens, gold).metrics == m  # the same numbers on a rerun
    perfect = CC.chartcheck_scores(["true", "false"] * 5, ["TRUE", "FALSE"] * 5).metrics
    assert perfect["macro_f1_ci95_low"] == perfect["macro_f1_ci95_high"] == 1.0


def test_explanation_metric_variants_are_the_authors_scripts():
    preds = ["The bars rise. They peak in 2014."]
    refs = ["The bars rising. They peaked in 2014."]
    flan = CC.explanation_scores(preds, refs, variant="flan_t5_script")
    matcha = CC.explanation_scores(preds, refs, variant="matcha_test")
    # Stemming (flan) matches rise/rising and peak/peaked; matcha_test.py's ROUGE does not.
    assert flan.metrics["explanation_rouge_1"] > matcha.metrics["explanation_rouge_1"]
    assert flan.libraries["chartcheck_explanations"].startswith("flan_t5_script (")
    assert "rouge_stemmer=False" in matcha.libraries["chartcheck_explanations"]
    assert "use_stemmer=False" in matcha.libraries["rouge_score"]
    # Without weights the model-based metrics stay unavailable, naming the authors' models.
    assert "microsoft/deberta-xlarge-mnli" in matcha.unavailable["explanation_bertscore_f1"]
    assert "BLEURT-20" in matcha.unavailable["explanation_bleurt"]
    assert "roberta-large" in flan.unavailable["explanation_bertscore_f1"]
    assert "bleurt-base-128" in flan.unavailable["explanation_bleurt"]
    with pytest.raises(ValueError, match="explanation metrics 'nope'"):
        CC.explanation_scores(preds, refs, variant="nope")
