"""tools/bench/baselines.py: RMS F1 without the title row, the paired bootstrap margin, the
constant baselines and number cells, on hand-computed tables."""

from __future__ import annotations

import numpy as np
import pytest

from chartjax.tools.bench import baselines as lc

TARGET = "TITLE | GDP\nYear | Annual %\n2000 | 10\n2001 | 20"
# One value exact, one 25% off (DePlot's RMS gives 0 beyond 10%), a wrong title.
PRED = "TITLE | Inflation\nYear | Annual %\n2000 | 10\n2001 | 25"


def test_drop_title():
    assert lc.drop_title(TARGET) == "Year | Annual %\n2000 | 10\n2001 | 20"
    assert lc.drop_title("title | x<0x0A>a | b") == "a | b"  # DePlot's parser: any case, <0x0A>
    assert lc.drop_title("Year | v\n1 | 2") == "Year | v\n1 | 2"  # no title row: unchanged
    assert lc.drop_title("") == ""


def test_rms_f1_with_and_without_the_title_row():
    # With the title: 3 datapoints a side, the title's value scores 0 ("gdp" vs "inflation"),
    # 2000 scores 1, 2001 scores 0 -> P = R = 1/3. Without: P = R = 1/2.
    assert lc.rms_f1_per_chart([PRED], [TARGET]) == pytest.approx([1 / 3])
    assert lc.rms_f1_per_chart([PRED], [TARGET], title=False) == pytest.approx([0.5])
    # A title-only prediction: everything it gets is the title, nothing without it.
    only = "TITLE | GDP"
    assert lc.rms_f1_per_chart([only], [TARGET], title=False) == pytest.approx([0.0])
    assert lc.rms_f1_per_chart([only], [TARGET])[0] == pytest.approx(2 * 1 * (1 / 3) / (4 / 3))


def test_paired_bootstrap():
    a, b = np.array([0.5, 0.4, 0.6, 0.5]), np.array([0.1, 0.1, 0.1, 0.1])
    out = lc.paired_bootstrap(a, b, seed=0, n=500)
    assert out["mean"] == pytest.approx(0.4) and out["resamples"] == 500
    lo, hi = out["ci95"]
    assert 0.3 <= lo <= 0.4 <= hi <= 0.5  # resampled means lie between the extreme diffs
    same = lc.paired_bootstrap(a, a - 0.2, seed=0, n=100)  # a constant difference
    assert same["ci95"] == pytest.approx([0.2, 0.2])


def test_constant_baselines(tmp_path):
    tables = tmp_path / "raw" / "tables"
    tables.mkdir(parents=True)
    train = [
        "TITLE | GDP\nYear | Annual %\n2000 | 10\n2001 | 20",
        "TITLE | GDP\nYear | Annual %\n2000 | 11\n2001 | 19",
        "TITLE | Rent\nCity | US$\nOslo | 900\nLima | 300",
    ]
    for i, t in enumerate(train):
        tables.joinpath(f"{i}.txt").write_text(t)
    heldout = ["TITLE | GDP\nYear | Annual %\n2000 | 10.5\n2001 | 40"]
    out = lc.constant_baselines(str(tmp_path / "raw"), heldout, seed=0)
    assert set(out) == {"table", "title_only", "table_no_title"}
    assert not out["table_no_title"]["prediction"].lower().startswith("title |")
    assert out["title_only"]["rms_f1_no_title"] == 0.0
    # a GDP table (either) is the best fit on the others; held out, 2000 is within 10%
    # (10 or 11 vs 10.5) and 2001 is not: 1 point of 2 at a score of 1 - 0.5/10.5 or 1 - 0.5/10.5
    f1 = out["table_no_title"]["rms_f1_no_title"]
    assert f1 == pytest.approx((1 - 0.5 / 10.5) / 2)


NC_TARGET = "TITLE | Sales\nYear | Sales\n2001 | 12.5\n2002 | 7\n2003 | n/a"


def test_number_cells_are_matched_by_row_label_then_position():
    # 2002 found by its label (rows out of order); 2001's value wrong; "n/a" is not a number.
    assert lc.number_cells_exact("Year | Sales\n2002 | 7\n2001 | 12.4", NC_TARGET) == (1, 2)
    # No labels in common: rows by position.
    assert lc.number_cells_exact("x | y\na | 12.5\nb | 7", NC_TARGET) == (2, 2)
    assert lc.number_cells_exact("", NC_TARGET) == (0, 2)
    rates = lc.number_cell_rates(["Year | Sales\n2001 | 12.5\n2002 | 7", ""], [NC_TARGET] * 2)
    assert rates.tolist() == [1.0, 0.0]


# ---------------------------------------------------------------- ChartQA -------------------

# (table, human (query, label), augmented (query, label)) per chart of a ChartQA-layout folder.
CHARTQA = {
    "train": [
        ("Year,Sales\n2001,10\n2002,20\n", ("What was Sales in 2001?", "10"),
         ("Which year has the highest Sales?", "2002")),
        ("Country,Sales\nPeru,100\nChile,50\n", ("What was Sales in Chile?", "50"),
         ("Which country has the highest Sales?", "Peru")),
        ("Country,Sales\nPeru,52\nChile,200\n", ("What was Sales in Peru?", "52"),
         ("Which country has the highest Sales?", "Chile")),
        ("Country,Sales\nPeru,300\nChile,9\n", ("What was Sales in Peru?", "300"),
         ("Which country has the highest Sales?", "Peru")),
    ],
    "test": [
        ("Country,Sales\nChile,51\nPeru,7\n", ("What was Sales in Chile?", "51"),
         ("Which country has the highest Sales?", "Chile")),
        ("Country,Sales\nPeru,50\nChile,3\n", ("What was Sales in Peru?", "50"),
         ("Which country has the highest Sales?", "Peru")),
        ("Month,Sales\nJan,5\nFeb,4\n", ("Which month has the lowest Sales?", "Feb"),
         ("What was Sales in Jan?", "5")),
    ],
}  # fmt: skip


def _chartqa_corpus(root) -> str:
    import json

    for folder, charts in CHARTQA.items():
        (root / "raw" / folder / "tables").mkdir(parents=True)
        qa = {"human": [], "augmented": []}
        for i, (table, human, augmented) in enumerate(charts):
            (root / "raw" / folder / "tables" / f"two_col_{i}.csv").write_text(table)
            for source, (query, label) in (("human", human), ("augmented", augmented)):
                qa[source].append({"imgname": f"two_col_{i}.png", "query": query, "label": label})
        for source, rows in qa.items():
            (root / "raw" / folder / f"{folder}_{source}.json").write_text(json.dumps(rows))
    return str(root)


def test_chartqa_templates_and_relaxed_mode():
    assert lc.question_template("What was Sales in Peru?", ["Peru", "Chile"]) == (
        "What was Sales in {}?"
    )
    assert lc.question_template("Is East Asia big?", ["Asia", "East Asia"]) == "Is {} big?"
    assert lc.question_template("Janitors in Jan?", ["Jan"]) == "Janitors in {}?"  # whole words
    # 50 and 52 are each within 5% of both; the tie goes to the first in sorted order
    assert lc.relaxed_mode(["10", "50", "52", "300"]) == "50"
    assert lc.relaxed_mode(["Peru", "Chile", "Peru"]) == "Peru"
    assert lc.relaxed_mode(["Peru", "50", "52"], candidates=["Peru", "300"]) == "Peru"


def test_chartqa_constant_and_question_only_answers(tmp_path):
    """By hand: the constant "50" (within 5% of 51 and 50: human 2/3, augmented 0); the
    question-only answers "50" for "What was Sales in {}?" (train 10, 50, 52, 300), "Peru" for
    the country's highest (Peru, Chile, Peru) and, for the month template training never saw,
    the training answers' relaxed mode "50": human 51 ok, 50 ok, Feb no; augmented Chile no,
    Peru ok, 5 no."""
    from chartjax.metrics.classification import wilson_interval

    out = lc.chartqa_answers(_chartqa_corpus(tmp_path))
    const, qo = out["constant"], out["question_only"]
    assert out["heldout_questions"] == 6
    assert const["answer"] == "50"
    assert (const["relaxed_accuracy_human"], const["relaxed_accuracy_augmented"]) == (2 / 3, 0.0)
    assert const["relaxed_accuracy"] == pytest.approx(1 / 3)
    assert (qo["templates"], qo["unseen_templates"]) == (3, 1)
    assert (qo["relaxed_accuracy_human"], qo["relaxed_accuracy_augmented"]) == (2 / 3, 1 / 3)
    assert qo["relaxed_accuracy"] == pytest.approx(0.5)
    low, high = wilson_interval(2, 3)
    assert (qo["relaxed_accuracy_human_ci95_low"], qo["relaxed_accuracy_human_ci95_high"]) == (
        pytest.approx(low),
        pytest.approx(high),
    )
    assert qo["relaxed_accuracy_ci95_low"] < 0.5 < qo["relaxed_accuracy_ci95_high"]


def test_chartqa_check_needs_the_interval_above_both_baselines():
    from chartjax.tools.bench import benches

    def res(low):
        model = {"relaxed_accuracy_ci95_low": low}
        base = {
            "constant": {"relaxed_accuracy_ci95_high": 0.1},
            "question_only": {"relaxed_accuracy_ci95_high": 0.2},
        }
        return {"arms": {"qa": {"eval": {"test": model}}}, "baseline": base}

    assert benches.chartqa_check(res(0.25))["holds"]
    got = benches.chartqa_check(res(0.15))
    assert got["above"] == {"constant": True, "question_only": False} and not got["holds"]
