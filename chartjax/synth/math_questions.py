"""Generated numerical-reasoning questions: the toy stand-in for MatCha's math-reasoning
objective (MATH and DROP rendered as images, the answer as target; docs/pretraining.md).

Each question is a pure function of (seed, index). Two families:
* arithmetic on numbers written in the question: "What is 37 + 485?" (+, -, x);
* reasoning over a small table drawn from the chart generator's topics (chart_info_tables:
  the same categories, units and value ranges the charts show): the total, the mean, the
  difference between two rows, the largest or smallest row, how many rows exceed a value.

Answers are computed exactly in decimal (no float rounding): integers as integers, others with
the fewest decimals that write them exactly, means rounded half up to 2 decimals.
"""

from __future__ import annotations

import dataclasses
from decimal import ROUND_HALF_UP, Decimal

import numpy as np

from chartjax.synth import chart_info_tables as tb

KINDS = ("add", "subtract", "multiply", "total", "mean", "difference", "argmax", "argmin", "count")
ARITHMETIC = {"add": "+", "subtract": "-", "multiply": "x"}


@dataclasses.dataclass(frozen=True)
class Question:
    kind: str
    question: str
    answer: str
    header: tuple[str, ...] = ()  # the table the question is about (empty: arithmetic)
    rows: tuple[tuple[str, ...], ...] = ()

    def lines(self) -> list[tuple[str, ...]]:
        """What the page shows: the table (header, rows), then the question."""
        table = [self.header, *self.rows] if self.header else []
        return [*table, (self.question,)]


def format_decimal(value: Decimal) -> str:
    """Integers without a point; otherwise the fewest decimals (no trailing zeros, no "-0")."""
    if value == value.to_integral_value():
        return str(int(value))
    text = format(value.normalize(), "f")
    return text


def _rng(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, index, 0x6D617468])  # "math": apart from the charts


def _arithmetic(rng: np.random.Generator, kind: str) -> Question:
    if kind == "multiply":
        a, b = int(rng.integers(2, 100)), int(rng.integers(2, 10))
        value = a * b
    else:
        a, b = int(rng.integers(0, 1000)), int(rng.integers(0, 1000))
        value = a + b if kind == "add" else a - b
    return Question(kind, f"What is {a} {ARITHMETIC[kind]} {b}?", str(value))


def _table(rng: np.random.Generator, max_topics: int | None) -> tb.ChartData:
    return tb.synthesize(
        rng, tb.GROUPED_VBAR, max_categories=5, max_topics=max_topics, max_series=1
    )


def _reasoning(rng: np.random.Generator, kind: str, max_topics: int | None) -> Question:
    data = _table(rng, max_topics)
    cats = list(data.categories)
    values = [Decimal(row[0]) for row in data.cells]
    header, rows = (data.x_label, data.y_label), tuple((c, r[0]) for c, r in zip(cats, data.cells))
    unit = data.y_label
    if kind == "total":
        question, answer = f"What is the total of {unit}?", format_decimal(sum(values))
    elif kind == "mean":
        mean = (sum(values) / len(values)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        question, answer = f"What is the average of {unit}?", format_decimal(mean)
    elif kind == "difference":
        i, j = (int(k) for k in rng.choice(len(cats), 2, replace=False))
        question = f"What is the difference between {cats[i]} and {cats[j]}?"
        answer = format_decimal(values[i] - values[j])
    elif kind in ("argmax", "argmin"):
        if len(set(values)) < len(values):  # ties have no single answer: draw again
            return _reasoning(rng, kind, max_topics)
        pick = max if kind == "argmax" else min
        best = pick(range(len(values)), key=lambda k: values[k])
        word = "highest" if kind == "argmax" else "lowest"
        question, answer = f"Which {data.x_label} has the {word} value?", cats[best]
    else:  # count
        threshold = values[int(rng.integers(len(values)))]
        question = f"How many {data.x_label} values are above {format_decimal(threshold)}?"
        answer = str(sum(v > threshold for v in values))
    return Question(kind, question, answer, header, rows)


def make_question(
    seed: int, index: int, kinds: tuple[str, ...] = KINDS, max_topics: int | None = None
) -> Question:
    """Question `index` of a corpus: its kind drawn uniformly from `kinds`."""
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown question kinds {sorted(unknown)}; known: {KINDS}")
    rng = _rng(seed, index)
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind in ARITHMETIC:
        return _arithmetic(rng, kind)
    return _reasoning(rng, kind, max_topics)
