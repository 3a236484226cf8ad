"""ChartQA-style questions about a chart's data table, their answers computed from the table.

Seven kinds: retrieval (a cell), `max` / `min` (the category of a series' highest / lowest
value), `greater` (is a series higher at one category than at another: Yes / No), and the
arithmetic `difference`, `sum` (of a series at two categories) and `average` (of a series over
all categories). Each kind has a human-style and an augmented-style wording (ChartQA's
`_human.json` holds human-written questions, `_augmented.json` machine-generated ones; these
templates only imitate the two registers). The table is the one the chart was drawn from, as its
`tables/<stem>.csv` holds it: a header row (the category axis title, then the series names) and
one row per category, numbers written as drawn.

Answers are exact decimal arithmetic on the cells as written (`Decimal`), written without
trailing zeros (`19.0` -> `19`, ChartQA's labels); averages are rounded half up to 2 places
(the conventions of math_questions, MatCha-style pretraining's table questions).
A kind whose answer would be ambiguous (a tie for the highest value, two equal values to
compare) is not asked.
"""

from __future__ import annotations

import csv
import dataclasses
import decimal
import io
from collections.abc import Sequence

import numpy as np

from chartjax.synth.math_questions import format_decimal

SOURCES = ("human", "augmented")
AVERAGE_PLACES = 2
# kind -> (human wording, augmented wording). Fields: {series}, {x} (the category axis title,
# lower-cased), {a} and {b} (two categories).
TEMPLATES: dict[str, tuple[str, str]] = {
    "retrieval": (
        "What was {series} in {a}?",
        "What is the value of {series} in {a}?",
    ),
    "max": (
        "Which {x} has the highest {series}?",
        "Which {x} had the highest value of {series}?",
    ),
    "min": (
        "Which {x} has the lowest {series}?",
        "Which {x} had the lowest value of {series}?",
    ),
    "greater": (
        "Is {series} in {a} greater than in {b}?",
        "Is the value of {series} in {a} greater than that in {b}?",
    ),
    "difference": (
        "What's the difference between {series} in {a} and {b}?",
        "What is the difference between the values of {series} in {a} and {b}?",
    ),
    "sum": (
        "What's the sum of {series} in {a} and {b}?",
        "What is the total of {series} in {a} and {b}?",
    ),
    "average": (
        "What is the average of {series}?",
        "What is the average value of {series}?",
    ),
}
KINDS = tuple(TEMPLATES)
TWO_CATEGORY_KINDS = frozenset({"greater", "difference", "sum"})


@dataclasses.dataclass(frozen=True)
class Table:
    """A chart's table: `header` = (category axis title, series...), `rows` = (category, cells...)."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    @classmethod
    def from_csv(cls, text: str) -> Table:
        lines = list(csv.reader(io.StringIO(text)))
        return cls(tuple(lines[0]), tuple(tuple(r) for r in lines[1:]))

    def to_csv(self) -> str:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([self.header, *self.rows])
        return buf.getvalue()

    @property
    def series(self) -> tuple[str, ...]:
        return self.header[1:]

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(r[0] for r in self.rows)

    def column(self, series: str) -> list[decimal.Decimal]:
        j = self.header.index(series)
        return [decimal.Decimal(r[j]) for r in self.rows]

    def value(self, series: str, category: str) -> decimal.Decimal:
        return self.column(series)[self.categories.index(category)]


def number(value: decimal.Decimal, places: int | None = None) -> str:
    """`value` (rounded half up to `places` if given) without trailing zeros: 19.0 -> "19"."""
    if places is not None:
        value = value.quantize(decimal.Decimal(1).scaleb(-places), decimal.ROUND_HALF_UP)
    return format_decimal(value)


def answer(table: Table, kind: str, series: str, a: str = "", b: str = "") -> str | None:
    """The answer to a question of `kind`, or None where it would be ambiguous."""
    column = table.column(series)
    cats = table.categories
    if kind == "retrieval":
        return number(table.value(series, a))
    if kind in ("max", "min"):
        best = max(column) if kind == "max" else min(column)
        at = [c for c, v in zip(cats, column) if v == best]
        return at[0] if len(at) == 1 else None
    if kind == "average":
        return number(sum(column) / len(column), AVERAGE_PLACES)
    va, vb = table.value(series, a), table.value(series, b)
    if kind == "greater":
        return None if va == vb else ("Yes" if va > vb else "No")
    if kind == "difference":
        return number(abs(va - vb))
    if kind == "sum":
        return number(va + vb)
    raise ValueError(f"unknown question kind {kind!r}; expected one of {KINDS}")


def query(kind: str, source: str, x_title: str, series: str, a: str = "", b: str = "") -> str:
    template = TEMPLATES[kind][SOURCES.index(source)]
    return template.format(x=x_title.lower(), series=series, a=a, b=b)


def questions(
    rng: np.random.Generator, table: Table, source: str, n: int, kinds: Sequence[str] = KINDS
) -> list[tuple[str, str]]:
    """Up to `n` `(query, label)` pairs of distinct kinds, in `source`'s wording."""
    out = []
    for k in rng.permutation(len(kinds)):
        if len(out) == n:
            break
        kind = kinds[int(k)]
        if kind in TWO_CATEGORY_KINDS and len(table.rows) < 2:
            continue
        series = table.series[int(rng.integers(len(table.series)))]
        order = rng.permutation(len(table.rows))
        a = table.categories[int(order[0])]
        b = table.categories[int(order[1])] if len(order) > 1 else ""
        label = answer(table, kind, series, a, b)
        if label is not None:
            out.append((query(kind, source, table.header[0], series, a, b), label))
    return out
