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
