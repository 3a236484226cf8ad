"""Chart -> code: MatCha's chart-derendering target written from a chart's own data
(docs/pretraining.md).

MatCha derendered charts into the plotting code that drew them (IPython notebooks crawled from
GitHub [unverified: docs/models.md §2]); we have the generator's spec instead, so the target is
short matplotlib-style code that redraws the chart's data table (chart_info/tables.py derives the
table from the CHART-Info data series):

    # stacked_vertical_bar
    ax.set_title("GDP growth (annual %)")
    ax.set_xlabel("Year")
    ax.set_ylabel("Percent")
    ax.bar(["2001", "2002"], [1.5, 2.75], label="Germany")

One call per series (`bar`/`barh`/`plot`/`scatter`; `label=` its column header), box plots one
`ax.bxp([...])` of matplotlib's stats dicts. `parse_code` reads it back into the table with
`ast` (nothing is executed), keeping each number as written ("1.50" stays "1.50"), so the code
and the chart's table carry the same data and the table metrics (RMS, RNSS) score the code.
"""

from __future__ import annotations

import ast
import json

from chartjax.data import tables
from chartjax.tasks.chart_info import tables as cit

CODE_PROMPT = "Generate the code that draws the figure below:"
BOX_KEYS = ("whislo", "q1", "med", "q3", "whishi")  # matplotlib bxp's names of the 5 statistics
LABEL_CALLS = ("set_title", "set_xlabel", "set_ylabel")


def _plot_call(chart_type: str) -> str:
    if "bar" in chart_type:
        return "barh" if "horizontal" in chart_type else "bar"
    return "scatter" if chart_type == "scatter" else "plot"


def _literal(cell: str) -> str:
    """A cell as a Python literal: numbers as written, anything else a quoted string."""
    try:
        float(cell)
        ast.literal_eval(cell)  # "1e3", "nan", "007" are strings here
        return cell
    except (ValueError, SyntaxError):
        return json.dumps(cell, ensure_ascii=False)


def _list(cells) -> str:
    return "[" + ", ".join(_literal(c) for c in cells) + "]"


def table_code(chart_type: str, table: tables.Table) -> str:
    """The code of a chart's linearized table (`tables.parse` of its DePlot target)."""
    lines = [f"# {chart_type}"]
    header = list(table.header)
    for call, text in zip(LABEL_CALLS, (table.title, header[0] if header else "", None)):
        if text is not None:
            lines.append(f"ax.{call}({json.dumps(text, ensure_ascii=False)})")
    if "box" in chart_type:
        stats = [
            "{"
            + ", ".join(
                [f'"label": {json.dumps(r[0])}']
                + [f'"{k}": {_literal(v)}' for k, v in zip(BOX_KEYS, r[1:])]
            )
            + "}"
            for r in table.rows
        ]
        lines.append("ax.bxp([" + ", ".join(stats) + "])")
        return tables.ROW_SEP.join(lines)
    call = _plot_call(chart_type)
    for j, name in enumerate(header[1:], start=1):
        pairs = [(r[0], r[j]) for r in table.rows if j < len(r) and r[j] != ""]
        xs, ys = _list(p[0] for p in pairs), _list(p[1] for p in pairs)
        lines.append(f"ax.{call}({xs}, {ys}, label={json.dumps(name, ensure_ascii=False)})")
    return tables.ROW_SEP.join(lines)


def chart_code_record(example: dict, prompt: str = CODE_PROMPT) -> dict | None:
    """The chart -> code record of a CHART-Info example (None: no task-6 data series)."""
    record = cit.chart_info_record(example, prompt)
    if record is None:
        return None
    table = tables.parse(record["target"])
    record["target"] = table_code(example["chart_type"], table)
    record["meta"] = {
        **record["meta"],
        "table": tables.linearize(table.header, table.rows, table.title),
    }
    return record


# ------------------------------------------------------------------ code -> table ---------


def _text(node: ast.AST, source: str) -> str:
    """A literal's cell text: strings as they are, numbers as written in the source."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ast.get_source_segment(source, node) or ""


def parse_code(code: str) -> tables.Table:
    """The table drawn by `table_code`'s code (also partial or malformed code: what parses).

    Lines that do not parse are skipped, so a prediction is scored on what it got right.
    """
    code = code.replace(tables.BYTE_NEWLINE, tables.ROW_SEP)
    kind, labels = "", {}
    series: list[tuple[str, list[str], list[str]]] = []
    box_rows: list[tuple[str, ...]] = []
    for line in code.split(tables.ROW_SEP):
        line = line.strip()
        if line.startswith("#"):
            kind = kind or line[1:].strip()
            continue
        try:
            node = ast.parse(line, mode="eval").body
        except SyntaxError:
            continue
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name = node.func.attr
        if name in LABEL_CALLS and node.args:
            labels[name] = _text(node.args[0], line)
        elif name == "bxp" and node.args and isinstance(node.args[0], ast.List):
            for d in node.args[0].elts:
                if isinstance(d, ast.Dict):
                    cells = {_text(k, line): _text(v, line) for k, v in zip(d.keys, d.values)}
                    box_rows.append((cells.get("label", ""), *(cells.get(k, "") for k in BOX_KEYS)))
        elif len(node.args) >= 2 and all(isinstance(a, ast.List) for a in node.args[:2]):
            xs = [_text(e, line) for e in node.args[0].elts]
            ys = [_text(e, line) for e in node.args[1].elts]
            label = next((_text(k.value, line) for k in node.keywords if k.arg == "label"), "")
            series.append((label, xs, ys))
    title = labels.get("set_title")
    x_title = labels.get("set_xlabel", "")
    if box_rows:
        return tables.Table((x_title, *cit.BOX_HEADER), tuple(box_rows), title)
    header = (x_title, *(s[0] for s in series))
    rows: dict[tuple, list[str]] = {}
    for j, (_, xs, ys) in enumerate(series):
        seen: dict[str, int] = {}
        for n, (x, y) in enumerate(zip(xs, ys)):
            seen[x] = seen.get(x, -1) + 1
            key = (j, n) if kind == "scatter" else (x, seen[x])  # as series_table
            rows.setdefault(key, [x] + [""] * len(series))[j + 1] = y
    return tables.Table(header, tuple(tuple(r) for r in rows.values()), title)


def code_table_text(code: str) -> str:
    """The linearized table of a code prediction (what the table metrics read)."""
    table = parse_code(code)
    if not table.header and not table.rows:
        return ""
    return tables.linearize(table.header, table.rows, table.title)
