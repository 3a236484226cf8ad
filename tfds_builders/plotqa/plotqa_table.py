"""A PlotQA plot's data table, derived from its `annotations.json` entry (no table file ships).

The entry's `models` list holds one series each (docs/corpora.md §8.2): a legend text (`label`,
else `name` [which of the two is the legend text: unverified]), and the plotted points as two
parallel lists `x` and `y`. The table is CSV text (the csv module's quoting, `\\n` line ends):

    <category axis title>,<series 1>,<series 2>,...
    <category 1>,<value>,<value>,...

* The category axis is the one whose values are not all numbers: for vertical bars, lines and
  dot-lines that is `x` (years are numbers there, and then `x` is still the category axis); a
  horizontal-bar entry whose `x` holds only numbers and whose `y` does not is read with `y` as
  the categories and `x` as the values (which axis PlotQA's `hbar_categorical` entries put the
  categories on is [unverified]; either is read).
* The header's first cell is that axis's title, `general_figure_info.<x_axis|y_axis>.label.text`
  [unverified path], or "" when absent.
* Rows follow the categories in the order they first appear over the series; a series without a
  value at a category leaves its cell empty. Numbers are written as the JSON held them (`40`,
  `12.5`, floats by `repr`); text as written.

An entry without `models` (or whose models hold no points) has the table "".
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def cell_text(value: Any) -> str:
    """A value as the table writes it: integral ints as ints, floats by repr, text as is."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return str(value)


def _axis_title(info: Any, axis: str) -> str:
    try:
        text = info[axis]["label"]["text"]
    except (KeyError, TypeError):
        return ""
    return text if isinstance(text, str) else ""


def _series(model: Mapping[str, Any], index: int) -> str:
    for key in ("label", "name"):
        value = model.get(key)
        if isinstance(value, str) and value:
            return value
    return f"series {index + 1}"


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else []


def categories_on_y(models: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the entry puts its categories on `y` (numbers only in `x`, text in `y`)."""
    xs = [v for m in models for v in _as_list(m.get("x"))]
    ys = [v for m in models for v in _as_list(m.get("y"))]
    return bool(xs) and all(map(_is_number, xs)) and not all(map(_is_number, ys))


def plot_table(entry: Mapping[str, Any]) -> str:
    """The table text of one `annotations.json` entry (see the module docstring)."""
    models = [m for m in _as_list(entry.get("models")) if isinstance(m, Mapping)]
    if not models:
        return ""
    on_y = categories_on_y(models)
    cat_key, val_key = ("y", "x") if on_y else ("x", "y")
    info = entry.get("general_figure_info")
    header = [_axis_title(info, "y_axis" if on_y else "x_axis")]
    rows: dict[str, list[str]] = {}
    for k, model in enumerate(models):
        header.append(_series(model, k))
        for cat, value in zip(_as_list(model.get(cat_key)), _as_list(model.get(val_key))):
            row = rows.setdefault(cell_text(cat), [""] * len(models))
            row[k] = cell_text(value)
    if not rows:
        return ""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([cat, *cells] for cat, cells in rows.items())
    return buf.getvalue()
