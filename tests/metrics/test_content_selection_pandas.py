"""records_from_table against pandas itself: the official Chart-to-Text preprocessing
(``baseline_models/Chart2Text/etc/templatePreprocess.py``) read each table with ``pd.read_csv``
and wrote ``cleanAxisValue(str(df.at[row, column]))``; the oracle below repeats that with the
installed pandas."""

import csv
import io
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chartjax.data.table_records import pandas_column, pandas_header, records_from_table

pd = pytest.importorskip("pandas")


def _csv(header, rows) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def _official(text: str) -> str:
    """templatePreprocess.py's dataLine (openData / openMultiColumnData, cleanAxisLabel,
    cleanAxisValue and the record loops), without its trailing space."""

    def label(x):
        return re.sub(r"\s", "_", x).replace("%", "").replace("*", "")

    def value(v):
        if v == "-" or v == "nan":
            return "0"
        v = re.sub(r"\s", "_", v)
        return v.replace("|", "").replace(",", "").replace("%", "").replace("*", "")

    df = pd.read_csv(io.StringIO(text))
    cols = df.columns
    chart = "line_chart" if cols[0].lower() == "year" else "bar_chart"
    line = ""
    for m in range(df.shape[0]):
        if len(cols) == 2:
            for col, axis in zip(cols, "xy"):
                line += f"{label(col)}|{value(str(df.at[m, col]))}|{axis}|{chart} "
        else:
            for n, col in enumerate(cols):
                line += f"{label(col)}|{value(str(df.at[m, col]))}|{n}|{chart} "
    return line.rstrip(" ")


def _pandas_strings(cells) -> list[str]:
    df = pd.read_csv(io.StringIO(_csv(["x", "h"], [[f"r{i}", c] for i, c in enumerate(cells)])))
    return [str(df.at[i, "h"]) for i in range(len(df))]


def test_issue_example_decimal_column_prints_integers_as_floats():
    header, rows = ["Country", "Share"], [["A", "12.5"], ["B", "45"]]
    out = records_from_table(header, rows)
    assert out == (
        "Country|A|x|bar_chart Share|12.5|y|bar_chart Country|B|x|bar_chart Share|45.0|y|bar_chart"
    )
    assert out == _official(_csv(header, rows))


# Columns whose typing is worth pinning: thousands separators and percent signs keep a column
# textual, negatives and "+" stay integers, a missing cell makes integers float, and so on.
COLUMNS = [
    ["12.5", "45"],
    ["1,234", "45"],
    ["1,234.5", "45"],
    ["45%", "3"],
    ["-5", "3"],
    ["-5", "3.5"],
    ["007", "+5"],
    [" 45", "46 "],
    ["1e3", "2"],
    ["5.", ".5"],
    ["+.5", "1.e5"],
    ["inf", "-Infinity"],
    ["inf ", "1"],
    ["1e", "2"],
    [".", "1"],
    ["TRUE", "false"],
    ["True", ""],
    ["True", "1"],
    ["", "45"],
    ["", ""],
    [" ", "1"],
    ["-", "3"],
    ["nan", "3"],
    ["NA", "3.5"],
    [" NA", "3"],
    ["n/a", "-"],
    ["1_000", "2"],
    ["0x10", "1"],
    ["1 000", "2"],
    ["\u0661\u0662", "3"],
    ["\u22125", "3"],  # a Unicode minus is text
    ["1e16", "0.00001"],
    ["3.14159265358979323846", "9007199254740993"],
    ["9007199254740993", ""],
    ["1e400", "1e-400"],
    ["-0", "0"],
    ["-0.0", "1"],
    ["18446744073709551615", "1"],
    ["18446744073709551616", "1"],
    ["-9223372036854775809", "1"],
    ["-9223372036854775809", ""],
    ["1.5", "12345678901234567890123"],
    ["Q3 '20", "2019"],
]


@pytest.mark.parametrize("cells", COLUMNS, ids=repr)
def test_pandas_column_matches_pandas(cells):
    assert pandas_column(cells) == _pandas_strings(cells)


def test_pandas_header_matches_pandas():
    for header in (["", "a"], [" ", "a"], ["a", "a", "a.1"], ["a", "a.1", "a"], ["NA", "b"]):
        df = pd.read_csv(io.StringIO(_csv(header, [["1"] * len(header)])))
        assert pandas_header(header) == list(df.columns), header


def test_short_row_and_multi_column_match_pandas():
    header = ["Year", "White", "Black", ""]
    rows = [["2018", "250", "3.5", "1,234"], ["2019", "", "4"], ["2020", "40", "-", "7"]]
    text = _csv(header, rows)
    assert records_from_table(header, rows) == _official(text)
    out = records_from_table(header, rows)
    assert "White|250.0|1|line_chart" in out  # a missing cell makes the column float
    assert "White|0|1|line_chart" in out and "Unnamed:_3|7|3|line_chart" in out


_NUMBER = st.one_of(
    st.integers(-(10**6), 10**9).map(str),
    st.floats(-1e7, 1e7, allow_nan=False).map(lambda f: f"{f:.{abs(hash(f)) % 4}f}"),
    st.integers(1000, 10**7).map(lambda i: f"{i:,}"),
    st.integers(0, 100).map(lambda i: f"{i}%"),
    st.decimals(-100, 100, places=2).map(str),
)
_CELL = st.one_of(_NUMBER, st.sampled_from([c for col in COLUMNS[:31] for c in col] + ["Q3 '20"]))


@settings(max_examples=150, deadline=None)
@given(
    st.integers(2, 4).flatmap(
        lambda w: st.tuples(
            st.lists(
                st.sampled_from(["Year", "year", "Sales", "", "Share in %*", "a"]),
                min_size=w,
                max_size=w,
            ),
            st.lists(st.lists(_CELL, min_size=w, max_size=w), min_size=1, max_size=5),
        )
    )
)
def test_records_match_the_pandas_preprocessing(table):
    header, rows = table
    assert records_from_table(header, rows) == _official(_csv(header, rows))
