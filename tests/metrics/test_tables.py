"""DePlot RMS/RNSS and ChartQA relaxed accuracy: metrics reference §5 and §7 items 4-6."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chartjax.data.tables import linearize
from chartjax.metrics import chartqa, tables

OFFICIAL_T = "title | my table\nyear | argentina | brazil\n1999 | 200 | 158"
OFFICIAL_P = "title | my table\nyear | argentina | brazil\n1999 | 202 | 0"


def _f1(target, prediction):
    return tables.rms_example([target], prediction)[2]


def test_rms_official_test_both_orientations():
    p, r, f = tables.rms_example([OFFICIAL_T], OFFICIAL_P)
    assert (p, r, f) == pytest.approx((1.99 / 3,) * 3)
    transposed_target = "title | my table\nyear | 1999\nargentina | 200\nbrazil | 158"
    assert tables.rms_example([transposed_target], OFFICIAL_P) == pytest.approx((1.99 / 3,) * 3)


@pytest.mark.parametrize(
    "target, prediction, expected",
    [
        ("title |\nyear | a\n2019 | 5", "title |\nyear | a\n2019 | 7", 0.5),  # free title point
        ("year | a\n2019 | 5", "year | a\n2019 | 7", 0.0),
        ("year,a\n2019,5", "year,a\n2019,7", 1.0),  # wrong separator: no datapoints at all
        ("year|a\n2019|5", "year|a\n2019|7", 1.0),
        ("year | a\n2019 | 0", "year | a\n2019 | 0.0", 0.0),  # zero target: string branch
        ("year | a\n2019 | 5%", "year | a\n2019 | 0.05", 1.0),
        ("year | a\n2019 | 100", "year | a\n2019 | 111", 0.0),
        ("year | a\n2019 | 100", "year | a\n2019 | 109", 0.91),
        ("x | y\nargentina | 5", "x | y\nargentine | 5", 1 - 1 / 11),
    ],
)
def test_rms_reference_quirks(target, prediction, expected):
    assert _f1(target, prediction) == pytest.approx(expected)


def test_rms_empty_prediction_and_byte_newlines():
    assert tables.rms_example(["year | a\n2019 | 5"], "") == (1.0, 0.0, 0.0)
    assert tables.rms_example(["year | a\n2019 | 5"], "YEAR | A<0x0A>2019 | 5") == (1.0, 1.0, 1.0)


def test_rms_corpus_means_and_best_target():
    out = tables.rms([OFFICIAL_P, ""], [[OFFICIAL_T, OFFICIAL_P], "year | a\n2019 | 5"]).metrics
    assert out == pytest.approx({"rms_precision": 1.0, "rms_recall": 0.5, "rms_f1": 0.5})


def test_rnss_reference_cases():
    assert tables.rnss_example(["baz | foo | 0.4"], "0.5 | foo | 0.6") == pytest.approx(0.875)
    # Zero-target inversion: (0, 0) -> 0 and (0, 5) -> 1.
    assert tables.rnss_example(["0"], "0") == 0.0
    assert tables.rnss_example(["0"], "5") == 1.0
    # "x%" is not a number for RNSS: all-percent tables are "both empty" -> 1; one side empty -> 0.
    assert tables.rnss_example(["a | 5%"], "a | 7%") == 1.0
    assert tables.rnss_example(["a | 5"], "a | b") == 0.0
    # Extra predicted numbers only enlarge the denominator, so they can raise the score.
    assert tables.rnss_example(["1 | 2"], "1 | 3") == pytest.approx(1 - 0.5 / 2)
    assert tables.rnss_example(["1 | 2"], "1 | 3 | 1000") == pytest.approx(1 - 0.5 / 3)
    out = tables.rnss(["0.5 | foo | 0.6", "5"], ["baz | foo | 0.4", ["0", "5"]])
    assert out.metrics["rnss"] == pytest.approx((0.875 + 1.0) / 2)


@pytest.mark.parametrize(
    "target, prediction, correct",
    [
        ("2010", "2008", True),  # the year quirk (pix2struct#35)
        ("45%", "45", False),
        ("45%", "0.45", True),
        ("0", "0.0", False),
        ("Yes", "yes ", False),
        ("1,000", "1000", False),
        ("100", " 104 ", True),
        ("12", "12.6", True),
        ("12", "12.61", False),
        ("nan", "nan", False),
        ("1_000", "1000", True),
        ("Yes", "yes", True),
    ],
)
def test_relaxed_correctness_truth_table(target, prediction, correct):
    assert chartqa.relaxed_correctness(target, prediction) is correct


def test_relaxed_accuracy_variants_and_mean():
    assert chartqa.relaxed_correctness("2010", "2008", year_exact=True) is False
    assert chartqa.relaxed_correctness("2010", "2010.0", year_exact=True) is True
    assert chartqa.relaxed_correctness("Yes", "yes ", strip=True) is True
    out = chartqa.relaxed_accuracy(["2008", "no", "4"], ["2010", ["yes", "No"], "5"])
    assert out.metrics["relaxed_accuracy"] == pytest.approx(2 / 3)


def test_a_missing_prediction_scores_zero_where_the_empty_table_would_not():
    target = "year | a\n2019 | 100"
    assert tables.rms_example([target], "") == (1.0, 0.0, 0.0)  # DePlot: vacuous precision
    assert tables.rnss_example(["title | none"], "") == 1.0  # no numbers on either side
    rms = tables.rms([None, target], [target, target]).metrics
    assert rms == {"rms_precision": 0.5, "rms_recall": 0.5, "rms_f1": 0.5}
    assert tables.rnss([None], ["title | none"]).metrics["rnss"] == 0.0
    assert chartqa.relaxed_accuracy([None, ""], ["", ""]).metrics["relaxed_accuracy"] == 0.5


cells = st.text(alphabet="abcdefgh", min_size=1, max_size=6)
numbers = st.integers(min_value=1, max_value=10_000).map(str)


@st.composite
def rectangular_tables(draw):
    n_rows = draw(st.integers(1, 4))
    n_cols = draw(st.integers(1, 3))
    headers = draw(st.lists(cells, min_size=n_cols + 1, max_size=n_cols + 1, unique=True))
    labels = draw(st.lists(cells, min_size=n_rows, max_size=n_rows, unique=True))
    rows = [[label, *draw(st.lists(numbers, min_size=n_cols, max_size=n_cols))] for label in labels]
    return headers, rows


@settings(max_examples=40, deadline=None)
@given(rectangular_tables(), st.booleans())
def test_rms_identity_and_transposition_invariance(table, with_title):
    headers, rows = table
    title = "t" if with_title else None
    target = linearize(headers, rows, title=title)
    assert tables.rms_example([target], target) == (1.0, 1.0, 1.0)
    transposed = [list(col) for col in zip(headers, *rows)]
    swapped = linearize(transposed[0], transposed[1:], title=title)
    assert tables.rms_example([target], swapped) == (1.0, 1.0, 1.0)
