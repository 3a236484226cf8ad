"""FigureQA's 15 question templates, their answers from source data, and yes/no balancing.

Templates and ids as the release (docs/corpora.md §4.4); which figure types they apply to as
the paper's Table 2. Definitions implemented (all from the source data, never from pixels):

- minimum / maximum (0, 1): the element with the smallest / largest value (bar value, pie span).
- less / greater than (2, 3): value of X < / > value of Y.
- low / high median (4, 5): with the values sorted ascending (0-based) and n elements, as the
  original generator: odd n -> both are element n // 2; even n -> low = n/2 - 1, high = n/2.
  Values are tie-free (figureqa_data.is_unambiguous), so both are always well-defined
  (for n = 2 the low median is the minimum and the high median the maximum).
- min / max area under the curve (6, 7): trapezoid rule over the curve's points.
- smoothest / roughest (8, 9): least / greatest roughness (paper §3.2; figureqa_data.roughness).
- lowest / highest value (10, 11): the curve holding the smallest / largest single y value.
- continuous less / greater than (12, 13): as the original generator, X < Y means X's value is
  below Y's at every shared x (X lies strictly below Y everywhere); likewise for greater.
- intersect (14): the two polylines (piecewise linear on the shared x grid) cross, i.e. the
  difference y_X - y_Y changes sign. Curves never touch at a grid point (tie-free data), so this
  is exactly "neither less nor greater".

Per figure, one yes and one no question per applicable template where both exist. Balancing
then discards pairs per template, within a split, until yes == no (see `balance`).
"""

from __future__ import annotations

import numpy as np

from chartjax.synth.figureqa_data import (
    CATEGORICAL_TYPES,
    SourceData,
    auc,
    load_colors,
    roughness,
)

TEMPLATES = {
    0: "Is {c1} the minimum?",
    1: "Is {c1} the maximum?",
    2: "Is {c1} less than {c2}?",
    3: "Is {c1} greater than {c2}?",
    4: "Is {c1} the low median?",
    5: "Is {c1} the high median?",
    6: "Does {c1} have the minimum area under the curve?",
    7: "Does {c1} have the maximum area under the curve?",
    8: "Is {c1} the smoothest?",
    9: "Is {c1} the roughest?",
    10: "Does {c1} have the lowest value?",
    11: "Does {c1} have the highest value?",
    12: "Is {c1} less than {c2}?",
    13: "Is {c1} greater than {c2}?",
    14: "Does {c1} intersect {c2}?",
}
NUM_TEMPLATES = len(TEMPLATES)

# A candidate question: (question_id, color1 index, color2 index or -1, answer 0/1); indices are
# positions in SourceData.colors.
Candidate = tuple[int, int, int, int]


def median_positions(n: int) -> tuple[int, int]:
    """(low, high) median positions in ascending order, as the original generator."""
    if n % 2 == 1:
        return n // 2, n // 2
    return n // 2 - 1, n // 2


def _one_of_others(rng: np.random.Generator, n: int, target: int) -> int:
    others = [i for i in range(n) if i != target]
    return others[int(rng.integers(len(others)))]


def _pick(rng: np.random.Generator, options: list) -> object | None:
    return options[int(rng.integers(len(options)))] if options else None


def _single(rng: np.random.Generator, qid: int, n: int, target: int) -> list[Candidate]:
    """'Is X the <target property>?': yes for the target, no for a random other element."""
    return [(qid, target, -1, 1), (qid, _one_of_others(rng, n, target), -1, 0)]


def _pairs(rng: np.random.Generator, qid: int, relation: np.ndarray) -> list[Candidate]:
    """Yes/no for an ordered-pair relation (relation[a, b] true -> yes), where possible."""
    n = len(relation)
    ordered = [(a, b) for a in range(n) for b in range(n) if a != b]
    yes = _pick(rng, [p for p in ordered if relation[p]])
    no = _pick(rng, [p for p in ordered if not relation[p]])
    out = []
    if yes is not None:
        out.append((qid, yes[0], yes[1], 1))
    if no is not None:
        out.append((qid, no[0], no[1], 0))
    return out


def categorical_questions(rng: np.random.Generator, values: list[float]) -> list[Candidate]:
    v = np.asarray(values, dtype=float)
    n = len(v)
    order = np.argsort(v)
    low, high = median_positions(n)
    out = _single(rng, 0, n, int(order[0]))
    out += _single(rng, 1, n, int(order[-1]))
    out += _pairs(rng, 2, v[:, None] < v[None, :])
    out += _pairs(rng, 3, v[:, None] > v[None, :])
    out += _single(rng, 4, n, int(order[low]))
    out += _single(rng, 5, n, int(order[high]))
    return out


def curve_relations(ys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(less, greater, intersect) as k x k boolean matrices over ordered curve pairs."""
    diff = ys[:, None, :] - ys[None, :, :]
    less = np.all(diff < 0, axis=2)
    greater = np.all(diff > 0, axis=2)
    intersect = ~(less | greater)
    np.fill_diagonal(intersect, False)
    return less, greater, intersect


def continuous_questions(
    rng: np.random.Generator, x: list[float], ys: list[list[float]]
) -> list[Candidate]:
    xa = np.asarray(x, dtype=float)
    ya = np.asarray(ys, dtype=float)
    k = len(ya)
    aucs = np.array([auc(xa, y) for y in ya])
    rough = np.array([roughness(xa, y) for y in ya])
    out = _single(rng, 6, k, int(np.argmin(aucs)))
    out += _single(rng, 7, k, int(np.argmax(aucs)))
    out += _single(rng, 8, k, int(np.argmin(rough)))
    out += _single(rng, 9, k, int(np.argmax(rough)))
    out += _single(rng, 10, k, int(np.argmin(ya.min(axis=1))))
    out += _single(rng, 11, k, int(np.argmax(ya.max(axis=1))))
    less, greater, intersect = curve_relations(ya)
    out += _pairs(rng, 12, less)
    out += _pairs(rng, 13, greater)
    # Intersection is symmetric: draw from unordered pairs, then a random order.
    pairs = [(a, b) for a in range(k) for b in range(a + 1, k)]
    for answer, pool in (
        (1, [p for p in pairs if intersect[p]]),
        (0, [p for p in pairs if not intersect[p]]),
    ):
        p = _pick(rng, pool)
        if p is not None:
            a, b = p if rng.random() < 0.5 else (p[1], p[0])
            out.append((14, a, b, answer))
    return out


def candidate_questions(rng: np.random.Generator, data: SourceData) -> list[Candidate]:
    """All candidate questions of one figure, in a random order."""
    if data.figure_type in CATEGORICAL_TYPES:
        out = categorical_questions(rng, data.values)
    else:
        out = continuous_questions(rng, data.x, data.ys)
    return [out[i] for i in rng.permutation(len(out))]


def balance(qids: np.ndarray, answers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Keep-mask that balances yes/no per template over a whole split.

    For each template, the surplus answers of the majority class are dropped, chosen uniformly
    at random (the split's own seeded generator, so the result is deterministic and independent
    of the worker count). Only templates where one answer is sometimes impossible (12-14)
    have a surplus, so no figure loses all its questions.
    """
    keep = np.ones(len(qids), dtype=bool)
    for qid in range(NUM_TEMPLATES):
        yes = np.flatnonzero((qids == qid) & (answers == 1))
        no = np.flatnonzero((qids == qid) & (answers == 0))
        major, minor = (yes, no) if len(yes) > len(no) else (no, yes)
        surplus = len(major) - len(minor)
        if surplus:
            keep[rng.choice(major, size=surplus, replace=False)] = False
    return keep


def to_color_ids(candidates: list[Candidate], data: SourceData) -> list[Candidate]:
    """Replace per-figure colour positions by global colour ids (-1 stays -1)."""
    ids = [c.id for c in data.colors]
    return [(q, ids[a], ids[b] if b >= 0 else -1, ans) for q, a, b, ans in candidates]


def qa_pair(image_index: int, qid: int, c1_id: int, c2_id: int, answer: int, with_answer: bool):
    """One entry of qa_pairs.json with the release's keys (colours by global id)."""
    colors = load_colors()
    c1 = colors[c1_id]
    c2 = colors[c2_id] if c2_id >= 0 else None
    pair = {
        "image_index": image_index,
        "question_id": qid,
        "question_string": TEMPLATES[qid].format(c1=c1.name, c2=c2.name if c2 else ""),
    }
    if with_answer:
        pair["answer"] = answer
    pair.update(
        color1_name=c1.name,
        color1_id=c1.id,
        color1_rgb=c1.rgb,
        color2_name=c2.name if c2 else "--None--",
        color2_id=c2.id if c2 else -1,
        color2_rgb=c2.rgb if c2 else [-1, -1, -1],
    )
    return pair
