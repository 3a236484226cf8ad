"""Generated data tables with templated summaries: a TAB-T5-style learning check (issue 15).

Each example is a small two-column Statista-like table (a year column -> line chart, or a
country column -> bar chart), a title and a summary written from one of several templates
that name the title's subject and measure and facts read off the table: the maximum and
minimum rows, the first and last values, the trend, the runner-up. Summaries are written
pre-tokenized (spaces around punctuation), as Statista's are. A constant summary cannot score
well: every template carries the table's own numbers and row names.

`statista_example` gives an example the keys of the chart_to_text/statista TFDS features that
chartjax.tasks.chart_to_text's `expand` reads, with the table in the builder's record form
(`records_from_table`) and linearized form (`tables.linearize`), so the task's own TAB-T5
prompt ("translate Chart to Text: <title> <s> <records>") is built from it.
`best_constant` picks the constant-summary baseline on training data.

Pure Python (no tf, jax or gin).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from chartjax.data import tables
from chartjax.data.table_records import records_from_table

SUBJECTS = (
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Hooli",
    "Vandelay",
    "Cyberdyne",
    "Tyrell",
    "Soylent",
    "Wonka",
)
# (measure, unit, value range)
MEASURES = (
    ("revenue", "million U.S. dollars", (50.0, 900.0)),
    ("net income", "million euros", (5.0, 120.0)),
    ("number of employees", "thousands", (1.0, 60.0)),
    ("unit sales", "million units", (2.0, 300.0)),
    ("advertising spending", "million U.S. dollars", (10.0, 400.0)),
    ("market share", "percent", (1.0, 45.0)),
)
COUNTRIES = (
    "Germany",
    "France",
    "Italy",
    "Spain",
    "Poland",
    "Sweden",
    "Austria",
    "Belgium",
    "Norway",
    "Portugal",
)
# Summary templates per table kind; the fields they fill are what `facts` computes.
YEAR_TEMPLATES = (
    "This statistic shows the {measure} of {subject} from {first_x} to {last_x} . "
    "In {last_x} , the {measure} of {subject} amounted to {last_y} {unit} .",
    "The {measure} of {subject} {trend} from {first_y} {unit} in {first_x} to {last_y} {unit} "
    "in {last_x} .",
    "In {max_x} , the {measure} of {subject} reached its peak at {max_y} {unit} . "
    "The lowest value was recorded in {min_x} , at {min_y} {unit} .",
)
COUNTRY_TEMPLATES = (
    "This statistic shows the {measure} of {subject} in {year} , by country . "
    "{max_x} had the highest {measure} , at {max_y} {unit} .",
    "In {year} , {min_x} had the lowest {measure} of {subject} , at {min_y} {unit} , "
    "while {max_x} ranked first with {max_y} {unit} .",
    "{max_x} accounted for the largest {measure} of {subject} in {year} , with {max_y} {unit} , "
    "followed by {second_x} with {second_y} {unit} .",
)
TEMPLATES = {"year": YEAR_TEMPLATES, "country": COUNTRY_TEMPLATES}


def facts(kind: str, rows: Sequence[Sequence[str]]) -> dict[str, str]:
    """The table facts a summary may name, read off its rows (`[x, value]` strings)."""
    values = [float(v) for _, v in rows]
    order = sorted(range(len(rows)), key=lambda i: values[i], reverse=True)
    out = {
        "max_x": rows[order[0]][0],
        "max_y": rows[order[0]][1],
        "min_x": rows[order[-1]][0],
        "min_y": rows[order[-1]][1],
        "second_x": rows[order[1]][0],
        "second_y": rows[order[1]][1],
        "first_x": rows[0][0],
        "first_y": rows[0][1],
        "last_x": rows[-1][0],
        "last_y": rows[-1][1],
    }
    out["trend"] = "increased" if values[-1] > values[0] else "decreased"
    return out


def generate_one(index: int, seed: int, *, min_rows: int = 3, max_rows: int = 4) -> dict:
    """Example `index` of the corpus of `seed`: a pure function of both.

    -> {"id", "kind", "title", "header", "rows", "summary", "template"}; values are distinct
    (so the maximum and minimum rows are unique), written with one decimal.
    """
    if not 2 <= min_rows <= max_rows:
        raise ValueError(f"need 2 <= min_rows <= max_rows, got {min_rows}, {max_rows}")
    rng = random.Random(f"{seed}/{index}")
    subject = rng.choice(SUBJECTS)
    measure, unit, (lo, hi) = rng.choice(MEASURES)
    kind = rng.choice(("year", "country"))
    n = rng.randint(min_rows, max_rows)
    year = rng.randint(2005, 2022)
    if kind == "year":
        xs = [str(year - n + 1 + k) for k in range(n)]
        title = f"{measure.capitalize()} of {subject} from {xs[0]} to {xs[-1]} ( in {unit} )"
        x_label = "Year"
    else:
        xs = rng.sample(COUNTRIES, n)
        title = f"{measure.capitalize()} of {subject} in {year} , by country ( in {unit} )"
        x_label = "Country"
    values: set[str] = set()
    while len(values) < n:
        values.add(f"{rng.uniform(lo, hi):.1f}")
    ys = rng.sample(sorted(values), n)
    rows = [[x, y] for x, y in zip(xs, ys)]
    template = rng.randrange(len(TEMPLATES[kind]))
    fields = {"subject": subject, "measure": measure, "unit": unit, "year": str(year)}
    fields.update(facts(kind, rows))
    summary = TEMPLATES[kind][template].format(**fields)
    return {
        "id": f"statista/gen-{seed}-{index}",
        "kind": kind,
        "title": title,
        "header": [x_label, measure.capitalize()],
        "rows": rows,
        "summary": summary[0].upper() + summary[1:],
        "template": f"{kind}/{template}",
    }


def generate(num: int, seed: int, **kwargs) -> list[dict]:
    return [generate_one(i, seed, **kwargs) for i in range(num)]


def statista_example(ex: dict) -> dict:
    """`ex` as the chart_to_text/statista TFDS example chartjax.tasks.chart_to_text reads."""
    return {
        "id": ex["id"],
        "title": ex["title"],
        "summary": ex["summary"],
        "chart_type": "line" if ex["kind"] == "year" else "bar",
        "complexity": 0,  # two columns: "simple"
        "ocr.text": [],
        "ocr.bbox": [],
        "table.records": records_from_table(ex["header"], ex["rows"]),
        "table.linearized": tables.linearize(ex["header"], ex["rows"]),
    }


def best_constant(
    candidates: Sequence[str], references: Sequence[str], tokenize: str = "13a"
) -> tuple[str, float]:
    """The candidate that, written for every example, scores the highest corpus BLEU against
    `references` (chartjax.metrics.text.bleu, as Chart-to-Text's BLEU); ties -> the first.
    Choose on training summaries, then score the winner on held-out ones."""
    from chartjax.metrics.text import bleu

    if not candidates or not references:
        raise ValueError("best_constant: needs candidates and references")
    best, best_score = None, -1.0
    for cand in candidates:
        preds = [cand] * len(references)
        # force: the summaries are pre-tokenized on purpose (no warning; same score)
        score = bleu(preds, list(references), tokenize=tokenize, force=True).metrics["bleu"]
        if score > best_score:
            best, best_score = cand, score
    return best, best_score
