"""Chart-to-Text content selection (CS) and its record strings (metrics reference §2.2).

Hand-written: no library implements this benchmark-specific metric. The record format follows
the Chart-to-Text preprocessing (``baseline_models/Chart2Text/etc/templatePreprocess.py``), whose
``testData.txt`` lines are what the official CS script (``evaluation_metrics/cs/
ocrdata_auto_eval.py``) reads as "data".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from statistics import fmean

__all__ = [
    "CS_FILLERS",
    "content_selection",
    "content_selection_score",
    "cs_records",
    "records_from_table",
]

# The official script's 23 filler tokens (never records).
CS_FILLERS = frozenset(
    ["in", "the", "and", "or", "an", "as", "can", "be", "a", ":", "-", "to", "but", "is", "of"]
    + ["it", "on", ".", "at", "(", ")", ",", ";"]
)

# pandas.read_csv's default missing-value strings: the official preprocessing read the CSV with
# pandas, so these cells became NaN, printed as "nan", and were then written as "0".
_PANDAS_NA = frozenset(
    ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN"]
    + ["<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"]
)
_WHITESPACE = re.compile(r"\s")


def _clean_label(label: str, position: int) -> str:
    if not label.strip():
        label = f"Unnamed: {position}"  # pandas' name for an empty header cell
    return _WHITESPACE.sub("_", label).replace("%", "").replace("*", "")


def _clean_value(value: str) -> str:
    if value in _PANDAS_NA or value == "-":
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
      Space-separated records, row by row. The chart type is ``line_chart`` if the first header
      is "year" (any case) else ``bar_chart``. Two-column tables give, per row,
      ``<x label>|<x value>|x|<type> <y label>|<y value>|y|<type>``; wider tables give, per row
      and column j, ``<label j>|<value>|<j>|<type>``. Labels: whitespace -> "_", "%" and "*"
      removed, an empty header cell becomes "Unnamed:_<j>". Values: whitespace -> "_", "|", ",",
      "%" and "*" removed; "-" and pandas' missing-value strings (empty, "nan", "NA", ...) -> "0".
      Example: ``records_from_table(["Year", "Sales"], [["2020", "45"]])`` ==
      ``"Year|2020|x|line_chart Sales|45|y|line_chart"``.

    Differences from the original (pandas-based) preprocessing: cells are kept as written, so a
    numeric column that pandas would have read as float because of a missing cell keeps "2740"
    where the original wrote "2740.0"; the original's trailing space is not emitted (CS only
    tests substrings of whitespace-free tokens, so neither changes CS except for such floats).
    """
    if not header:
        raise ValueError("records_from_table: empty header")
    width = len(header)
    labels = [_clean_label(str(h), j) for j, h in enumerate(header)]
    chart_type = "line_chart" if str(header[0]).strip().lower() == "year" else "bar_chart"
    axes = ["x", "y"] if width == 2 else [str(j) for j in range(width)]
    records = []
    for i, row in enumerate(rows):
        if len(row) > width:
            raise ValueError(
                f"records_from_table: row {i} has {len(row)} cells for {width} headers"
            )
        cells = [*map(str, row), *[""] * (width - len(row))]
        for label, value, axis in zip(labels, cells, axes):
            records.append(f"{label}|{_clean_value(value)}|{axis}|{chart_type}")
    return " ".join(records)


def cs_records(gold: str, data: str, title: str) -> list[str]:
    """Gold-summary tokens that count as records: lower-cased, non-filler, distinct, in order.

    A token is a record if it is a substring of ``lower(data with "_" -> " " + " " + title)``
    (the official substring test: gold "20" counts when the data holds "2020").
    """
    context = (data.replace("_", " ") + " " + title).lower()
    records: list[str] = []
    for token in gold.split():
        low = token.lower()
        if low not in CS_FILLERS and low not in records and low in context:
            records.append(low)
    return records


def content_selection(prediction: str, gold: str, data: str, title: str) -> float:
    """CS of one example: the fraction of gold records that the prediction mentions.

    Prediction tokens are whitespace-split and lower-cased only (no punctuation splitting, so
    "2020," does not match "2020"); each record can be matched once. 0.0 when the gold summary
    has no records (the ``ocrdata_auto_eval.py`` convention).
    """
    records = cs_records(gold, data, title)
    if not records:
        return 0.0
    remaining = list(records)
    hits = 0
    for token in prediction.split():
        low = token.lower()
        if low in remaining:
            remaining.remove(low)
            hits += 1
    return hits / len(records)


def content_selection_score(
    predictions: Sequence[str],
    golds: Sequence[str],
    datas: Sequence[str],
    titles: Sequence[str],
) -> float:
    """Mean per-example CS as a fraction in [0, 1] (the official script prints it x100)."""
    n = len(predictions)
    if not (len(golds) == len(datas) == len(titles) == n):
        raise ValueError(
            "content_selection_score: predictions, golds, datas and titles differ in length: "
            f"{n}, {len(golds)}, {len(datas)}, {len(titles)}"
        )
    if n == 0:
        raise ValueError("content_selection_score: no examples")
    return fmean(
        content_selection(p, g, d, t) for p, g, d, t in zip(predictions, golds, datas, titles)
    )
