"""The official ICDAR 2019 CHART-Infographics synthetic JSON layout (docs/corpora.md §3.3).

Task k's "input" repeats the outputs its official counterpart repeats (tasks 2: 1; 3, 4, 5: 1-2;
6: 1-5, as in every `adobe-research/CHART-Synthetic` sample). Pie and donut files keep all six
tasks but tasks 2-6 are `{"input": {}, "name": ..., "output": {}}`. Files are written like the
release: 4-space indent, sorted keys.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii

TASK_NAMES = {
    1: "Chart Classification",
    2: "Text Detection and Recognition",
    3: "Text Role Classification",
    4: "Axes Analysis",
    5: "Legend Analysis",
    6: "Data Extraction",
}
TASK_INPUTS = {1: (), 2: (1,), 3: (1, 2), 4: (1, 2), 5: (1, 2), 6: (1, 2, 3, 4, 5)}
ROLES = ("chart_title", "axis_title", "tick_label", "legend_label")


def official_json(chart_type: str, ann: dict | None) -> dict:
    """Builds the task1..task6 document from the chart type and `geometry.annotate` output."""
    outputs = {1: {"chart_type": chart_type}}
    if ann is not None:
        outputs[2] = {"text_blocks": ann["text_blocks"]}
        outputs[3] = {"text_roles": ann["text_roles"]}
        outputs[4] = {"_plot_bb": ann["_plot_bb"], "axes": ann["axes"]}
        outputs[5] = {"legend_pairs": ann["legend_pairs"]}
        outputs[6] = {"data series": ann["data series"], "visual elements": ann["visual elements"]}
    doc = {}
    for k, name in TASK_NAMES.items():
        if k in outputs:
            inputs = {f"task{j}_output": outputs[j] for j in TASK_INPUTS[k]}
            doc[f"task{k}"] = {"input": inputs, "name": name, "output": outputs[k]}
        else:
            doc[f"task{k}"] = {"input": {}, "name": name, "output": {}}
    return doc


def dumps(doc: dict) -> str:
    """`json.dumps(doc, indent=4, sort_keys=True)`, character for character, in a third of
    the time: with an indent the standard library encodes in pure Python, generator by
    generator (hand-written as no library writes this layout faster). Values other than plain
    dict, list, tuple, str, int, float, bool and None, or keys other than str, are left to
    `json.dumps`."""
    out: list[str] = []
    try:
        _encode(doc, "", out.append)
    except _Unsupported:
        return json.dumps(doc, indent=4, sort_keys=True)
    return "".join(out)


class _Unsupported(Exception):
    pass


_INF = float("inf")


def _encode(o, pad: str, put) -> None:
    kind = type(o)
    if kind is str:
        put(encode_basestring_ascii(o))
    elif kind is float:
        if o != o:
            put("NaN")
        elif o == _INF:
            put("Infinity")
        elif o == -_INF:
            put("-Infinity")
        else:
            put(float.__repr__(o))
    elif kind is int:
        put(int.__repr__(o))
    elif o is None:
        put("null")
    elif o is True:
        put("true")
    elif o is False:
        put("false")
    elif kind is dict:
        if not o:
            put("{}")
            return
        if any(type(k) is not str for k in o):
            raise _Unsupported  # json converts such keys first, then sorts
        inner = pad + "    "
        sep = ",\n" + inner
        put("{\n" + inner)
        for i, (key, value) in enumerate(sorted(o.items())):
            if i:
                put(sep)
            put(encode_basestring_ascii(key))
            put(": ")
            _encode(value, inner, put)
        put("\n" + pad + "}")
    elif kind is list or kind is tuple:
        if not o:
            put("[]")
            return
        inner = pad + "    "
        sep = ",\n" + inner
        put("[\n" + inner)
        for i, value in enumerate(o):
            if i:
                put(sep)
            _encode(value, inner, put)
        put("\n" + pad + "]")
    else:
        raise _Unsupported
