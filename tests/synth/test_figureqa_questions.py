"""Data, question and balancing logic of the FigureQA-style generator (no rendering)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from chartjax.synth.figureqa import SplitSpec, figure_types, split_specs
from chartjax.synth.figureqa_data import (
    FIGURE_TYPES,
    SourceData,
    auc,
    color_set,
    is_unambiguous,
    load_colors,
    roughness,
    sample_source_data,
    scheme_set,
)
from chartjax.synth.figureqa_questions import (
    balance,
    candidate_questions,
    median_positions,
    qa_pair,
    to_color_ids,
)
from tests.synth.figureqa_oracle import answer, paper_roughness


# ------------------------------------------------------------------ roughness (paper §3.2)
@pytest.mark.parametrize(
    "x, y, expected",
    [
        ([0, 1, 2, 3], [0, 1, 0, 1], 4.0),  # slopes 1, -1, 1 -> |-2| + |2|
        ([0, 2, 3], [0, 2, 0], 3.0),  # slopes 1, -2 (uneven spacing)
        ([0, 1, 2, 3, 4], [3, 5, 7, 9, 11], 0.0),  # a straight line
        ([0, 1, 2, 3], [0, 1, 4, 9], 4.0),  # y = x^2: slopes 1, 3, 5
        ([0, 10], [5, 50], 0.0),  # two points: no slope change
        ([0, 0.5, 2], [1, 0, 3], 4.0),  # slopes -2, 2
    ],
)
def test_roughness_hand_computed(x, y, expected):
    assert roughness(np.array(x, float), np.array(y, float)) == pytest.approx(expected, abs=1e-12)
    assert paper_roughness(x, y) == pytest.approx(expected, abs=1e-12)


def test_auc_trapezoid_hand_computed():
    assert auc(np.array([0.0, 1.0, 3.0]), np.array([0.0, 2.0, 2.0])) == pytest.approx(5.0)
    assert auc(np.array([0.0, 2.0]), np.array([1.0, 3.0])) == pytest.approx(4.0)
    # uneven spacing weighs the wide interval: not proportional to the sum of y
    assert auc(np.array([0.0, 0.1, 10.0]), np.array([9.0, 0.0, 0.0])) == pytest.approx(0.45)


def test_medians_as_original_generator():
    assert median_positions(2) == (0, 1)
    assert median_positions(3) == (1, 1)
    assert median_positions(4) == (1, 2)
    assert median_positions(7) == (3, 3)
    assert median_positions(10) == (4, 5)


# ------------------------------------------------------------------ colours and schemes
def test_colours_far_from_white_and_split_in_halves():
    colors = load_colors()
    assert len(colors) == 100 and len({c.hex for c in colors}) == 100
    assert [c.id for c in colors] == list(range(100))
    assert all(min(c.rgb) < 230 for c in colors)  # no near-white colour (background is white)
    a, b = color_set("A"), color_set("B")
    assert len(a) == len(b) == 50 and not {c.id for c in a} & {c.id for c in b}


def test_schemes_match_table_1():
    train = {t: scheme_set(t, 1) for t in FIGURE_TYPES}
    assert train == {
        "vbar_categorical": "A",
        "hbar_categorical": "B",
        "line": "A",
        "dot_line": "B",
        "pie": "A",
    }
    assert all(scheme_set(t, 2) != train[t] for t in FIGURE_TYPES)


def test_every_colour_used_in_training_and_sets_respected():
    used = Counter()
    for i in range(300):
        t = FIGURE_TYPES[i % 5]
        rng = np.random.default_rng([11, i])
        data = sample_source_data(rng, t, color_set(scheme_set(t, 1)))
        ids = {c.id for c in data.colors}
        assert ids <= {c.id for c in color_set(scheme_set(t, 1))}
        used.update(ids)
    assert set(used) == set(range(100))


# ------------------------------------------------------------------ tie handling
def test_ties_are_rejected():
    def cat(values, t="vbar_categorical"):
        return SourceData(t, [], values=values)

    assert is_unambiguous(cat([1.0, 2.0, 3.0]))
    assert not is_unambiguous(cat([1.0, 2.0, 2.0]))  # tied max
    assert not is_unambiguous(cat([5.0, 1.0, 5.2]))  # closer than the bar gap
    assert not is_unambiguous(cat([1.0, 1.0, 3.0], "pie"))
    x = [0.0, 25.0, 50.0, 75.0, 100.0]

    def curves(*ys):
        return SourceData("line", [], x=x, ys=[list(y) for y in ys])

    noisy = [10, 14, 9, 15, 11]
    assert is_unambiguous(curves([0, 1, 2, 3, 4], noisy, [50, 40, 60, 45, 70]))
    # two straight lines: both roughness 0 -> "smoothest" would be a tie
    assert not is_unambiguous(curves([0, 1, 2, 3, 4], [20, 22, 24, 26, 28], noisy))
    # curves touching at a grid point make less/greater/intersect ambiguous
    assert not is_unambiguous(curves([0, 1, 2, 3, 4], [5, 1, 3, 0, 9], [50, 40, 60, 45, 70]))


def test_sampled_data_is_tie_free_and_in_table_1_ranges():
    for i in range(200):
        t = FIGURE_TYPES[i % 5]
        rng = np.random.default_rng([3, i])
        d = sample_source_data(rng, t, color_set("A"))
        assert is_unambiguous(d)
        if t in ("vbar_categorical", "hbar_categorical"):
            assert 2 <= len(d.values) <= 10 and all(1.0 <= v <= 100.0 for v in d.values)
        elif t == "pie":
            assert 2 <= len(d.values) <= 7 and sum(d.values) == pytest.approx(2 * np.pi)
        else:
            assert 2 <= len(d.ys) <= 7 and 5 <= len(d.x) <= 20
            assert all(0.0 <= v <= 100.0 for y in d.ys for v in y)


def test_counts_stay_uniform_despite_tie_rejection():
    """Ties are resampled per value set, not per figure, so Table 1's counts stay uniform."""
    for t, lo, hi in (("line", 2, 7), ("vbar_categorical", 2, 10)):
        counts = Counter(
            len(sample_source_data(np.random.default_rng([8, i]), t, color_set("B")).colors)
            for i in range(60 * (hi - lo + 1))
        )
        assert set(counts) == set(range(lo, hi + 1))
        assert min(counts.values()) > 30, counts  # expected 60 each


# ------------------------------------------------------------------ questions
def _annotation(d: SourceData) -> dict:
    """The source-data part of an annotations.json entry, as the renderer writes it."""
    names = [c.name for c in d.colors]
    if d.figure_type == "vbar_categorical":
        return {"type": d.figure_type, "models": [{"x": names, "y": d.values}]}
    if d.figure_type == "hbar_categorical":
        return {"type": d.figure_type, "models": [{"x": d.values, "y": names}]}
    if d.figure_type == "pie":
        return {"type": "pie", "models": [{"label": n, "span": s} for n, s in zip(names, d.values)]}
    return {
        "type": d.figure_type,
        "models": [{"label": n, "x": d.x, "y": y} for n, y in zip(names, d.ys)],
    }


def test_candidate_answers_match_independent_oracle():
    """Many unrendered figures, so every template gets both answers many times."""
    seen = Counter()
    for i in range(400):
        t = FIGURE_TYPES[i % 5]
        rng = np.random.default_rng([5, i])
        d = sample_source_data(rng, t, color_set(scheme_set(t, 1)))
        cands = candidate_questions(rng, d)
        ann = _annotation(d)
        per_template = Counter(q for q, *_ in cands)
        assert all(n <= 2 for n in per_template.values())
        categorical = t in ("vbar_categorical", "hbar_categorical", "pie")
        applicable = set(range(6)) if categorical else set(range(6, 15))
        always = set(range(6)) if categorical else set(range(6, 12))  # 12-14 may lack a yes/no
        assert always <= set(per_template) <= applicable
        for qid, c1, c2, ans in to_color_ids(cands, d):
            qa = qa_pair(0, qid, c1, c2, ans, with_answer=True)
            assert answer(ann, qa) == ans, (i, qa)
            seen[qid, ans] += 1
    assert all(seen[q, a] > 10 for q in range(15) for a in (0, 1)), seen


def test_balance_drops_only_surplus_and_is_seeded():
    qids = np.array([12, 12, 12, 12, 12, 3, 3, 14])
    answers = np.array([0, 0, 0, 1, 0, 1, 0, 1])
    keep = balance(qids, answers, np.random.default_rng(0))
    kept = Counter(zip(qids[keep].tolist(), answers[keep].tolist()))
    assert kept == {(12, 0): 1, (12, 1): 1, (3, 0): 1, (3, 1): 1}
    assert keep[3] and keep[5] and keep[6] and not keep[7]
    again = balance(qids, answers, np.random.default_rng(0))
    assert (keep == again).all()


# ------------------------------------------------------------------ split planning
def test_split_specs_and_types():
    specs = split_specs(7, 2, 0)
    assert [(s.name, s.num_images, s.scheme, s.public_answers) for s in specs] == [
        ("train1", 7, 1, True),
        ("validation1", 2, 1, True),
        ("validation2", 2, 2, True),
    ]
    with pytest.raises(ValueError, match="train1"):
        split_specs(-1, 0, 0)
    types = figure_types(1, SplitSpec("train1", 23, 1, True))
    counts = Counter(types)
    assert set(counts) == set(FIGURE_TYPES) and max(counts.values()) - min(counts.values()) <= 1
    assert types == figure_types(1, SplitSpec("train1", 23, 1, True))
    assert types != figure_types(2, SplitSpec("train1", 23, 1, True))
