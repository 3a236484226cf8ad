"""Lexical text metrics: reference vectors (metrics reference §1.2, §2.1, §2.3, §6.3, §7.8/9)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chartjax.metrics import text as T

HYP = "The share rose to 45 percent in 2020 ."
REF = "The share of adults rose to 45 percent in 2020 ."
# Hand computation: precisions 9/9, 7/8, 5/7, 4/6; BP = exp(1 - 11/9).
BLEU_64 = (1 * 7 / 8 * 5 / 7 * 4 / 6) ** 0.25 * math.exp(1 - 11 / 9)


def test_sacrebleu_reference_case_and_signature():
    out = T.bleu([HYP], [REF])
    assert BLEU_64 == pytest.approx(0.6433, abs=1e-4)
    assert out.metrics["bleu"] == pytest.approx(BLEU_64, abs=1e-9)
    sig = out.libraries["sacrebleu"]
    assert "nrefs:1" in sig and "tok:13a" in sig and "smooth:exp" in sig and "2.6.0" in sig
    assert "tok:none" in T.bleu([HYP], [REF], tokenize="none").libraries["sacrebleu"]


def test_sacrebleu_tokenize_none_keeps_glued_punctuation():
    # 13a splits "2020." into "2020 ."; with tokenize="none" the glued token never matches.
    glued = "The share rose to 45 percent in 2020."
    assert T.bleu([glued], [REF]).metrics["bleu"] == pytest.approx(BLEU_64, abs=1e-9)
    assert T.bleu([glued], [REF], tokenize="none").metrics["bleu"] < BLEU_64 - 0.05


def test_bleu_variable_reference_counts():
    out = T.bleu([HYP, "a b c d e"], [[REF, "x"], "a b c d e"])
    assert 0 < out.metrics["bleu"] <= 1
    assert "nrefs:var" in out.libraries["sacrebleu"]


def test_chartcheck_bleu_reference_case():
    out = T.chartcheck_bleu([HYP], [REF])
    assert out.metrics["bleu"] == pytest.approx(BLEU_64, abs=1e-12)
    assert out.metrics["bleu_brevity_penalty"] == pytest.approx(math.exp(1 - 11 / 9))
    assert out.metrics["bleu_length_ratio"] == pytest.approx(9 / 11)


def test_chartcheck_bleu_shortest_reference_and_no_smoothing():
    # Refs of 7 and 10 tokens for a 9-token hypothesis: nmt uses the shortest (7) -> BP 1;
    # sacrebleu uses the closest (10) -> BP exp(1 - 10/9).
    hyp = "a b c d e f g h i"
    refs = [["a b c d e f g", "a b c d e f g h i j"]]
    cc = T.chartcheck_bleu([hyp], refs).metrics
    assert cc["bleu_brevity_penalty"] == 1.0
    # Clipped matches against the union of both references: all 9/8/7/6 n-grams match.
    assert cc["bleu"] == pytest.approx(1.0)
    sb = T.bleu([hyp], refs).metrics["bleu"]
    assert sb == pytest.approx(math.exp(1 - 10 / 9), abs=1e-6)
    # No smoothing: no 4-gram match gives 0 (sacrebleu's exp smoothing does not).
    assert T.chartcheck_bleu(["a b c x d"], ["a b c y d"]).metrics["bleu"] == 0.0
    assert T.bleu(["a b c x d"], ["a b c y d"]).metrics["bleu"] > 0.0


def test_rouge_reference_case():
    out = T.rouge(
        ["The share rose to 45 percent in 2020."],
        ["The share of adults rose to 45 percent in 2020."],
    ).metrics
    assert out["rouge_1"] == pytest.approx(0.8889, abs=1e-4)
    assert out["rouge_2"] == pytest.approx(0.75, abs=1e-4)
    assert out["rouge_l"] == pytest.approx(0.8889, abs=1e-4)
    assert out["rouge_lsum"] == pytest.approx(0.8889, abs=1e-4)


def test_rouge_best_reference_and_mean():
    out = T.rouge(["a b c", "x y"], [["q r", "a b c"], "p"]).metrics
    assert out["rouge_1"] == pytest.approx(0.5)  # (1 + 0) / 2


def test_meteor_nltk_doctest_values():
    hyp = "It is a guide to action which ensures that the military always obeys the commands of the party"
    ref = "It is a guide to action that ensures that the military will forever heed Party commands"
    assert T.meteor([hyp], [ref]).metrics["meteor"] == pytest.approx(0.6944, abs=1e-4)
    assert T.meteor(["non matching hypothesis"], ["this is a cat"]).metrics["meteor"] == 0.0
    out = T.meteor([hyp, "non matching hypothesis"], [ref, "this is a cat"])
    assert out.metrics["meteor"] == pytest.approx(0.6944 / 2, abs=1e-4)
    assert "wordnet 3.0" in out.libraries["nltk_meteor"]


def test_punkt_offline_tokenization():
    import nltk

    text = "Sales rose. They fell. Mr. Smith paid $3.5 million in the U.S. in 2019."
    assert nltk.word_tokenize(text) == [
        "Sales",
        "rose",
        ".",
        "They",
        "fell",
        ".",
        "Mr.",
        "Smith",
        "paid",
        "$",
        "3.5",
        "million",
        "in",
        "the",
        "U.S.",
        "in",
        "2019",
        ".",
    ]
    assert T.split_sentences(f"  {text} ") == (
        "Sales rose.\nThey fell.\nMr. Smith paid $3.5 million in the U.S. in 2019."
    )


def test_cider_hand_vectors():
    # Identical two-token captions: orders 1 and 2 give similarity 1, orders 3 and 4 give 0.
    out = T.cider(["a b", "c d"], ["a b", "c d"], tokenize=False).metrics
    assert out == {"cider": pytest.approx(5.0), "cider_d": pytest.approx(5.0)}
    # Example A: hyp "a a b" vs ref "a b" (tf-idf weight L = log 2 for every n-gram).
    plain_a = 10 * (3 / math.sqrt(10) + 1 / math.sqrt(2)) / 4
    clipped_a = 10 * (2 / math.sqrt(10) + 1 / math.sqrt(2)) * math.exp(-1 / 72) / 4
    out = T.cider(["a a b", "c d"], ["a b", "c d"], tokenize=False).metrics
    assert out["cider"] == pytest.approx((plain_a + 5) / 2, abs=1e-12)
    assert out["cider_d"] == pytest.approx((clipped_a + 5) / 2, abs=1e-12)
    # A one-example corpus has IDF log(1) = 0 everywhere.
    assert T.cider(["a b"], ["a b"], tokenize=False).metrics == {"cider": 0.0, "cider_d": 0.0}


def test_ptb_tokenize_removes_punctuation():
    assert T.ptb_tokenize(
        'In 2019, Singapore imported "approximately" 236.8 billion (dollars).'
    ) == [
        "in",
        "2019",
        "singapore",
        "imported",
        "approximately",
        "236.8",
        "billion",
        "dollars",
    ]


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="lengths differ"):
        T.rouge(["a"], ["a", "b"])


words = st.lists(
    st.sampled_from(["sales", "rose", "fell", "in", "2020", "45", "percent"]),
    min_size=1,
    max_size=12,
)


@settings(max_examples=25, deadline=None)
@given(st.lists(words, min_size=1, max_size=4))
def test_rouge_identical_is_perfect_and_order_invariant(sentences):
    texts = [" ".join(s) for s in sentences]
    assert T.rouge(texts, texts).metrics["rouge_1"] == pytest.approx(1.0)
    a = T.rouge(texts, list(reversed(texts))).metrics
    b = T.rouge(list(reversed(texts)), texts).metrics
    assert a == pytest.approx(b)


def test_bleu_group_breakdown_equals_subset_bleu():
    preds = [HYP, "a b c d e", "sales fell in 2020 .", "the share rose"]
    refs = [REF, "a b c d f", "sales rose in 2020 .", "the share of adults rose"]
    out = T.bleu(preds, refs, groups={"split": ["x", "y", "x", "y"]})
    for group, idx in (("x", [0, 2]), ("y", [1, 3])):
        subset = T.bleu([preds[i] for i in idx], [refs[i] for i in idx]).metrics["bleu"]
        assert out.breakdowns["split"][group] == {"bleu": pytest.approx(subset), "n": 2}
    assert out.metrics["bleu"] == pytest.approx(T.bleu(preds, refs).metrics["bleu"])


def test_chart_to_text_parallel_equals_serial(monkeypatch):
    from chartjax.metrics import chart_to_text as C2T

    preds = ["In 2020 , sales were 45 percent .", "Most adults agree .", "Sales fell ."] * 3
    refs = [
        "Sales rose to 45 % in 2020 .",
        "Most adults agree with this .",
        "Sales fell a lot .",
    ] * 3
    serial = C2T.chart_to_text_scores(preds, refs, workers=1)
    monkeypatch.setattr(C2T, "PARALLEL_MIN_EXAMPLES", 0)
    parallel = C2T.chart_to_text_scores(preds, refs, workers=2)
    assert parallel.metrics == serial.metrics
    assert {"meteor", "cider", "cider_d", "bleu", "rouge_l"} <= set(serial.metrics)
