"""The generated tables with templated summaries (chartjax.synth.table_summaries): facts the
summaries state are those of their own table, seeds reproduce, and the constant baseline is
the candidate with the best corpus BLEU."""

from __future__ import annotations

import pytest

from chartjax.synth import table_summaries as ts

N = 300


@pytest.fixture(scope="module")
def corpus():
    return ts.generate(N, 7)


def test_seeds_reproduce_and_differ(corpus):
    assert ts.generate(20, 7) == corpus[:20]
    assert ts.generate_one(5, 7) == corpus[5]
    other = ts.generate(20, 8)
    assert sum(a["summary"] == b["summary"] for a, b in zip(corpus, other)) < 3


def test_tables_are_well_formed(corpus):
    for ex in corpus:
        rows = ex["rows"]
        assert 3 <= len(rows) <= 4
        values = [float(v) for _, v in rows]
        assert len(set(values)) == len(values)  # a unique maximum and minimum
        assert all(v == f"{float(v):.1f}" for _, v in rows)
        xs = [x for x, _ in rows]
        if ex["kind"] == "year":
            assert ex["header"][0] == "Year"
            assert [int(x) for x in xs] == list(range(int(xs[0]), int(xs[0]) + len(xs)))
        else:
            assert ex["header"][0] == "Country" and len(set(xs)) == len(xs)
            assert set(xs) <= set(ts.COUNTRIES)


def _independent_facts(rows):
    """Recomputed here without the generator's `facts`."""
    by_value = sorted(rows, key=lambda r: float(r[1]))
    up = float(rows[-1][1]) > float(rows[0][1])
    return {
        "max": by_value[-1],
        "min": by_value[0],
        "second": by_value[-2],
        "first": rows[0],
        "last": rows[-1],
        "trend": "increased" if up else "decreased",
    }


# What each template must state: (the rows it names with their values, whether the trend).
STATES = {
    "year/0": (("first_x", "last"), False),
    "year/1": (("first", "last"), True),
    "year/2": (("max", "min"), False),
    "country/0": (("max",), False),
    "country/1": (("min", "max"), False),
    "country/2": (("max", "second"), False),
}


def test_summaries_state_their_tables_facts(corpus):
    seen = set()
    for ex in corpus:
        s, title = ex["summary"], ex["title"]
        subject = next(x for x in ts.SUBJECTS if x in title)
        measure, unit = next((m, u) for m, u, _ in ts.MEASURES if title.lower().startswith(m))
        assert subject in s and measure in s.lower() and unit in s and unit in title
        f = _independent_facts(ex["rows"])
        names, trend = STATES[ex["template"]]
        for name in names:
            if name == "first_x":
                assert f"from {f['first'][0]} to" in s
                continue
            x, y = f[name]
            assert x in s and f"{y} {unit}" in s, (name, ex)
        if trend:
            assert f["trend"] in s
            assert s.index(f["first"][1]) < s.index(f["last"][1])
        seen.add(ex["template"])
    assert seen == set(STATES)  # every template occurs


def test_statista_example_records_by_hand():
    ex = {
        "id": "statista/gen-0-0",
        "kind": "year",
        "title": "Revenue of Acme from 2019 to 2020 ( in million euros )",
        "header": ["Year", "Revenue"],
        "rows": [["2019", "12.5"], ["2020", "45.0"]],
        "summary": "s",
    }
    out = ts.statista_example(ex)
    assert out["table.records"] == (
        "Year|2019|x|line_chart Revenue|12.5|y|line_chart "
        "Year|2020|x|line_chart Revenue|45.0|y|line_chart"
    )
    assert out["table.linearized"] == "Year | Revenue\n2019 | 12.5\n2020 | 45.0"
    assert (out["chart_type"], out["complexity"]) == ("line", 0)


def test_best_constant_picks_the_highest_bleu():
    refs = ["the sales rose to 5 units in 2020 ."] * 3 + ["the sales fell to 2 units ."]
    cands = ["completely unrelated words here", "the sales rose to 5 units in 2020 .", "x"]
    best, score = ts.best_constant(cands, refs)
    assert best == cands[1]
    # three of four references match exactly; corpus BLEU is then well above the others'
    assert 0.7 < score < 1.0
    # ties go to the first candidate
    assert ts.best_constant(["a b c d e", "a b c d e"], ["a b c d e"])[1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="needs candidates"):
        ts.best_constant([], refs)
