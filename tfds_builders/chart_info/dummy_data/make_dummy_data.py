"""(Re)writes the CHART-Info dummy releases in this folder: `python make_dummy_data.py`.

Synthetic look-alikes (docs/corpora.md §3.6) in the official schemas of docs/corpora.md §3.3 / §3.4:
  synthetic_2019/  png/ + json_gt/: a grouped vertical bar (all six tasks, string x/y values),
                   a pie (tasks 2-6 with empty input/output), a vertical box (dict box data),
                   a line (pixel polylines) and a scatter (flat scatter points, float y,
                   empty series name); files written with indent 4 and sorted keys.
  pmc_2020/        annotations_JSON/<class>/ + images/<class>/*.jpg: a vertical box (polygon
                   blocks incl. an inverted quad and an empty text, list box data with x,
                   tick types), an area chart (tasks 2-6 null), a vertical bar whose y values
                   come from value labels (strings, one unparseable), and a line chart whose
                   task 6 is test-mode (`{"input": ...}` only).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
NAMES = {
    1: "Chart Classification",
    2: "Text Detection and Recognition",
    3: "Text Role Classification",
    4: "Axes Analysis",
    5: "Legend Analysis",
    6: "Data Extraction",
}
INPUTS = {1: (), 2: (1,), 3: (1, 2), 4: (1, 2), 5: (1, 2), 6: (1, 2, 3, 4, 5)}


def bb(x0, y0, w, h) -> dict:
    return {"height": h, "width": w, "x0": x0, "y0": y0}


def doc(outputs: dict[int, dict | None]) -> dict:
    """task1..task6; None -> `{"input": {}, "output": {}}` as in 2019 pie files."""
    out = {}
    for k, name in NAMES.items():
        if outputs.get(k) is None:
            out[f"task{k}"] = {"input": {}, "name": name, "output": {}}
        else:
            inputs = {f"task{j}_output": outputs[j] for j in INPUTS[k] if outputs.get(j)}
            out[f"task{k}"] = {"input": inputs, "name": name, "output": outputs[k]}
    return out


def grouped_bar() -> dict:
    blocks = [
        {"bb": bb(431, 19, 480, 19), "id": 0, "text": "Sales by year"},
        {"bb": bb(190, 840, 24, 12), "id": 3, "text": "2005"},
        {"bb": bb(60, 826, 18, 12), "id": 7, "text": "0"},
        {"bb": bb(880, 98, 30, 14), "id": 14, "text": "2011"},
    ]
    return doc(
        {
            1: {"chart_type": "Grouped vertical bar"},
            2: {"text_blocks": blocks},
            3: {
                "text_roles": [
                    {"id": 0, "role": "chart_title"},
                    {"id": 3, "role": "tick_label"},
                    {"id": 7, "role": "tick_label"},
                    {"id": 14, "role": "legend_label"},
                ]
            },
            4: {
                "_plot_bb": bb(83, 47, 1175, 790),
                "axes": {
                    "x-axis": [{"id": 3, "tick_pt": {"x": 201, "y": 837}}],
                    "y-axis": [{"id": 7, "tick_pt": {"x": 83, "y": 832}}],
                },
            },
            5: {"legend_pairs": [{"bb": bb(843, 101, 33, 12), "id": 14}]},
            6: {
                "data series": [{"name": "2011", "data": [{"x": "2005.0", "y": "21.4268493652"}]}],
                "visual elements": {
                    "bars": [bb(140, 125, 62, 708)],
                    "boxplots": [],
                    "lines": [],
                    "scatter points": [],
                },
            },
        }
    )


def pie() -> dict:
    return doc({1: {"chart_type": "Pie"}})


def vertical_box() -> dict:
    stats = {"first_quartile": 3.5, "max": 9.0, "median": 5.25, "min": 1.0, "third_quartile": 7.0}
    element = {
        s: {"_bb": bb(100, 50 + i, 40, 0), "x": 120, "y": 50 + i}
        for i, s in enumerate(sorted(stats))
    }
    return doc(
        {
            1: {"chart_type": "Vertical box"},
            2: {"text_blocks": [{"bb": bb(100, 300, 30, 10), "id": 0, "text": "Group A"}]},
            3: {"text_roles": [{"id": 0, "role": "tick_label"}]},
            4: {"_plot_bb": bb(50, 20, 300, 260), "axes": {"x-axis": [], "y-axis": []}},
            5: {"legend_pairs": []},
            6: {
                "data series": [{"name": "Group A", "data": stats}],
                "visual elements": {
                    "bars": [],
                    "boxplots": [element],
                    "lines": [],
                    "scatter points": [],
                },
            },
        }
    )


def line() -> dict:
    return doc(
        {
            1: {"chart_type": "Line"},
            2: {"text_blocks": [{"bb": bb(10, 5, 60, 10), "id": 0, "text": "Rate"}]},
            3: {"text_roles": [{"id": 0, "role": "axis_title"}]},
            4: {"_plot_bb": bb(40, 20, 200, 100), "axes": {"x-axis": [], "y-axis": []}},
            5: {"legend_pairs": []},
            6: {
                "data series": [
                    {"name": "Rate", "data": [{"x": "1", "y": "2.5"}, {"x": "2", "y": "3.0"}]}
                ],
                "visual elements": {
                    "bars": [],
                    "boxplots": [],
                    "scatter points": [],
                    "lines": [[{"x": 40, "y": 100}, {"x": 240, "y": 60}]],
                },
            },
        }
    )


def scatter() -> dict:
    return doc(
        {
            1: {"chart_type": "Scatter"},
            2: {"text_blocks": []},
            3: {"text_roles": []},
            4: {"_plot_bb": bb(40, 20, 200, 100), "axes": {"x-axis": [], "y-axis": []}},
            5: {"legend_pairs": []},
            6: {
                "data series": [
                    {"name": "", "data": [{"x": "0.5", "y": 1.25}, {"x": "1.5", "y": 2.0}]}
                ],
                "visual elements": {
                    "bars": [],
                    "boxplots": [],
                    "lines": [],
                    "scatter points": [{"x": 50, "y": 90}, {"x": 150, "y": 40}],
                },
            },
        }
    )


def poly(x0, y0, x1, y1, x2, y2, x3, y3) -> dict:
    return {"x0": x0, "y0": y0, "x1": x1, "y1": y1, "x2": x2, "y2": y2, "x3": x3, "y3": y3}


def pmc_box() -> dict:
    blocks = [
        {"id": 0, "polygon": poly(10, 5, 90, 5, 90, 20, 10, 20), "text": "Expression"},
        # inverted quad (x2 < x0), as some PMC files have
        {"id": 1, "polygon": poly(60, 40, 40, 40, 40, 30, 60, 30), "text": "WT"},
        {"id": 2, "polygon": poly(5, 50, 15, 50, 15, 60, 5, 60), "text": ""},
    ]
    stats = {"first_quartile": 2.0, "max": 6.0, "median": 3.0, "min": 1.0, "third_quartile": 4.5}
    element = {
        s: {"_bb": bb(45.5, 60.0 + i, 20.0, 0.0), "x": 55.5, "y": 60.0 + i}
        for i, s in enumerate(sorted(stats))
    }
    outputs = {
        "task1": {"chart_type": "vertical box"},
        "task2": {"text_blocks": blocks},
        "task3": {
            "text_roles": [
                {"id": 0, "role": "chart_title"},
                {"id": 1, "role": "tick_label"},
                {"id": 2, "role": "other"},
            ]
        },
        "task4": {
            "_plot_bb": bb(30, 25, 100, 80),
            "axes": {
                "x-axis": [{"id": 1, "tick_pt": {"x": 50, "y": 105}}],
                "y-axis": [],
                "x-axis-2": [],
                "y-axis-2": [],
                "_x-tick-type": "markers",
                "_y-tick-type": None,
                "_x2-tick-type": None,
                "_y2-tick-type": None,
            },
        },
        "task5": {"legend_pairs": []},
        "task6": {
            "data series": [{"name": "[unnamed data series #0]", "data": [{"x": "WT", **stats}]}],
            "visual elements": {
                "bars": [],
                "boxplots": [element],
                "lines": [],
                "scatter points": [],
            },
        },
    }
    return {k: {"input": {}, "name": NAMES[int(k[-1])], "output": v} for k, v in outputs.items()}


def pmc_area() -> dict:
    out = {"task1": {"input": {}, "name": NAMES[1], "output": {"chart_type": "area"}}}
    out.update({f"task{k}": None for k in range(2, 7)})
    return out


def pmc_bar() -> dict:
    outputs = {
        "task1": {"chart_type": "vertical bar"},
        "task2": {"text_blocks": [{"id": 0, "polygon": poly(0, 0, 9, 0, 9, 5, 0, 5), "text": "A"}]},
        "task3": {"text_roles": [{"id": 0, "role": "tick_label"}]},
        "task4": {"_plot_bb": bb(5, 5, 50, 50), "axes": {"x-axis": [], "y-axis": []}},
        "task5": {"legend_pairs": []},
        "task6": {
            "data series": [
                {
                    "name": "[unnamed data series #0]",
                    "data": [{"x": "A", "y": "12.5"}, {"x": "B", "y": "n/a"}, {"x": "C", "y": 7.0}],
                }
            ],
            "visual elements": {
                "bars": [bb(10.5, 20.0, 8.0, 35.0)],
                "boxplots": [],
                "lines": [],
                "scatter points": [],
            },
        },
    }
    return {k: {"input": {}, "name": NAMES[int(k[-1])], "output": v} for k, v in outputs.items()}


def pmc_line_test_mode() -> dict:
    out = pmc_bar()
    out["task1"]["output"] = {"chart_type": "line"}
    out["task6"] = {"input": {"task1_output": {"chart_type": "line"}}}  # exporter's mask_output
    return out


def image(path: Path, seed: int, fmt: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 256, size=(12, 16, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, fmt)


def write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=4, sort_keys=True))


def main() -> None:
    for old in ("synthetic_2019", "pmc_2020"):
        shutil.rmtree(HERE / old, ignore_errors=True)
    synth = HERE / "synthetic_2019"
    for seed, (stem, make) in enumerate(
        [("344", grouped_bar), ("686", pie), ("21987", vertical_box), ("7", line), ("8", scatter)]
    ):
        write(synth / "json_gt" / f"{stem}.json", make())
        image(synth / "png" / f"{stem}.png", seed, "PNG")
    pmc = HERE / "pmc_2020"
    for seed, (cls, stem, make) in enumerate(
        [
            ("vertical_box", "PMC1087844___1471-2350-6-15-1", pmc_box),
            ("area", "PMC2___b-2_panel_1", pmc_area),
            ("vertical_bar", "PMC3___c-3", pmc_bar),
            ("line", "PMC5___e-5", pmc_line_test_mode),
        ]
    ):
        write(pmc / "annotations_JSON" / cls / f"{stem}.json", make())
        image(pmc / "images" / cls / f"{stem}.jpg", 10 + seed, "JPEG")


if __name__ == "__main__":
    main()
