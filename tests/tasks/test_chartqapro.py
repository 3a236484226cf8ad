"""The ChartQAPro prompt as lmms-eval writes it (lmms-eval tasks/chartqapro), and the protocol
data inference reads."""

import pytest

from chartjax.tasks import chartqa, chartqapro

SUFFIX = "\nAnswer the question with a single word."


def test_plain_question_and_context():
    assert chartqapro.prompt("Which year peaked?", "Factoid") == "Which year peaked?" + SUFFIX
    assert (
        chartqapro.prompt(["Is it rising?"], "Fact Checking", paragraph="Sales in 2020.")
        == "Context: Sales in 2020.\n\nIs it rising?" + SUFFIX
    )
    assert chartqapro.prompt("Q?", "Factoid", paragraph="  ") == "Q?" + SUFFIX  # no context


def test_conversation_writes_the_earlier_turns():
    text = chartqapro.prompt(
        ["Which is largest?", "By how much?"], "Conversational", answers=["Asia", "12"]
    )
    # The separators are [unverified] (module TURN / TURN_SEPARATOR).
    assert text == "Q1: Which is largest? A1: Asia Q2: By how much?" + SUFFIX
    with pytest.raises(ValueError, match="earlier answers"):
        chartqapro.prompt(["a?", "b?", "c?"], "Conversational", answers=["x"])


def test_protocols_are_data_for_inference():
    assert chartqapro.PROTOCOLS["lmms_eval"] == {
        "scoring": "lmms_eval",
        "prompt_suffix": SUFFIX,
        "max_new_tokens": 16,
    }
    assert chartqa.PROTOCOLS["lmms_eval"]["prompt_suffix"] == SUFFIX
    assert chartqa.PROTOCOLS["lmms_eval"]["max_new_tokens"] == 16
    assert set(chartqa.PROTOCOLS) == {"pix2struct", "lmms_eval", "vlmevalkit", "big_vision"}
    assert chartqa.SCORER.compat == ("spec", *chartqa.PROTOCOLS)
    # every preset scores by a protocol the metric knows
    from chartjax.metrics.chartqa import PROTOCOLS as SCORING

    assert {p["scoring"] for p in chartqa.PROTOCOLS.values()} <= set(SCORING)
