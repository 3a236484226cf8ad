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
