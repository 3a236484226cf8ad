"""The Chart-to-Text record string of a data table (``records_from_table``), as the paper's
preprocessing (``baseline_models/Chart2Text/etc/templatePreprocess.py``) wrote ``testData.txt``
from ``pandas.read_csv``: the "data" that the content selection metric
(chartjax/metrics/content_selection.py), the Chart-to-Text builder and its tasks read.

Hand-written: pandas' column typing is reproduced without pandas (the builders run without it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["pandas_column", "pandas_header", "records_from_table"]

# pandas.read_csv's default missing-value strings: the official preprocessing read the CSV with
# pandas, so these cells became NaN, printed as "nan", and were then written as "0".
_PANDAS_NA = frozenset(
    ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN"]
    + ["<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"]
)
# What pandas' C parser reads as a number (ASCII digits, "." decimal point, no thousands
# separator, surrounding ASCII whitespace allowed), as an infinity (exact, any case) or a bool.
_SPACE = "[ \t\n\v\f\r]*"
_INT = re.compile(f"{_SPACE}[+-]?[0-9]+{_SPACE}")
_FLOAT = re.compile(f"{_SPACE}[+-]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?{_SPACE}")
_INF = frozenset(["inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"])
_BOOL = {"True": "True", "TRUE": "True", "true": "True"}
_BOOL |= {"False": "False", "FALSE": "False", "false": "False"}
_INT64, _UINT64 = 2**63, 2**64
_WHITESPACE = re.compile(r"\s")


def _as_float(cell: str) -> float | None:
    if _FLOAT.fullmatch(cell):
        return float(cell)
    return float(cell) if cell.lower() in _INF else None


def pandas_column(cells: Sequence[str]) -> list[str]:
    """``str()`` of each cell as ``pandas.read_csv`` types the column that holds them.

    pandas gives a column one type: int64 when every cell is an integer (``"007"`` -> ``"7"``,
    ``"+5"`` -> ``"5"``); float64 when every cell is a number or missing, so its integers print
    with ``.0`` (``["12.5", "45"]`` -> ``["12.5", "45.0"]``, ``["45", ""]`` -> ``["45.0",
    "nan"]``, ``"1e3"`` -> ``"1000.0"``); bool for True/TRUE/true/False/FALSE/false only;
    otherwise the strings as written (``"1,234"``, ``"45%"``, ``" NA"``), missing cells ``"nan"``.
    Integers beyond int64 are uint64 when all fit and none is missing, else kept as written
    (there pandas' choice depends on the cells' order) unless a decimal makes the column float.
    """
    missing = [c in _PANDAS_NA for c in cells]
    present = [c for c, m in zip(cells, missing) if not m]
    if present and all(_INT.fullmatch(c) for c in present):
        ints = [int(c) for c in present]
        if all(-_INT64 <= i < _INT64 for i in ints):
            if not any(missing):
                return [str(i) for i in ints]
        elif not any(missing) and all(0 <= i < _UINT64 for i in ints):
            return [str(i) for i in ints]  # uint64
        else:
            return ["nan" if m else c for c, m in zip(cells, missing)]
    floats = [_as_float(c) for c in present]
    if all(f is not None for f in floats):  # also an all-missing column: float64 NaN
        return ["nan" if m else repr(_as_float(c)) for c, m in zip(cells, missing)]
    if all(c in _BOOL for c in present):
        return ["nan" if m else _BOOL[c] for c, m in zip(cells, missing)]
    return ["nan" if m else c for c, m in zip(cells, missing)]


def pandas_header(header: Sequence[str]) -> list[str]:
    """Column names as ``pandas.read_csv`` gives them: an empty cell is ``"Unnamed: <j>"``,
    a repeated name gets ``.1``, ``.2``, ... skipping names the header already holds
    (``["a", "a", "a.1"]`` -> ``["a", "a.2", "a.1"]``, as pandas' C parser dedups)."""
    names = [h if h else f"Unnamed: {j}" for j, h in enumerate(map(str, header))]
    counts: dict[str, int] = {}
    for i, name in enumerate(names):
        count = counts.get(name, 0)
        if count > 0:
            base = name
            while count > 0:
                counts[base] = count + 1
                name = f"{base}.{count}"
                count = count + 1 if name in names else counts.get(name, 0)
            names[i] = name
        counts[name] = count + 1
    return names


def _clean_label(label: str) -> str:
    return _WHITESPACE.sub("_", label).replace("%", "").replace("*", "")


def _clean_value(value: str) -> str:
    """The preprocessing's ``cleanAxisValue`` of ``str(df.at[row, column])``."""
    if value in ("-", "nan"):
        return "0"
    cleaned = _WHITESPACE.sub("_", value)
    for char in "|,%*":
        cleaned = cleaned.replace(char, "")
    return cleaned


def records_from_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """The Chart-to-Text record string of a data table (one line of ``testData.txt``).

    Args:
      header: the CSV header cells, e.g. ``["Year", "Sales"]`` (Statista ``data/<N>.csv`` row 0).
      rows: the data rows as strings, e.g. ``[["2019", "40"], ["2020", "45"]]``; a short row is
        padded with empty cells.

    Returns:
      Space-separated records, row by row, as ``templatePreprocess.py`` wrote them from
      ``pd.read_csv``. The chart type is ``line_chart`` if the first column name is "year"
      (any case) else ``bar_chart``. Two-column tables give, per row,
      ``<x label>|<x value>|x|<type> <y label>|<y value>|y|<type>``; wider tables give, per row
      and column j, ``<label j>|<value>|<j>|<type>``. Values are the cells as pandas typed their
      column (:func:`pandas_column`: a column holding any decimal or missing cell is float and
      its integers end in ``.0``), then whitespace -> "_", "|", ",", "%" and "*" removed, and
      "-" and missing cells -> "0". Labels are pandas' column names (:func:`pandas_header`:
      empty -> "Unnamed: <j>", repeats -> "<name>.1"), whitespace -> "_", "%" and "*" removed.
      Example: ``records_from_table(["Year", "Sales"], [["2019", "12.5"], ["2020", "45"]])`` ==
      ``"Year|2019|x|line_chart Sales|12.5|y|line_chart Year|2020|x|line_chart
      Sales|45.0|y|line_chart"``. The original's trailing space is not emitted.
    """
    if not header:
        raise ValueError("records_from_table: empty header")
    width = len(header)
    names = pandas_header(header)
    labels = [_clean_label(name) for name in names]
    chart_type = "line_chart" if names[0].lower() == "year" else "bar_chart"
    axes = ["x", "y"] if width == 2 else [str(j) for j in range(width)]
    padded = []
    for i, row in enumerate(rows):
        if len(row) > width:
            raise ValueError(
                f"records_from_table: row {i} has {len(row)} cells for {width} headers"
            )
        padded.append([*map(str, row), *[""] * (width - len(row))])
    columns = [pandas_column([row[j] for row in padded]) for j in range(width)]
    records = []
    for i in range(len(padded)):
        for label, column, axis in zip(labels, columns, axes):
            records.append(f"{label}|{_clean_value(column[i])}|{axis}|{chart_type}")
    return " ".join(records)
