"""Writes the FigureQA builder fixture (docs/corpora.md §4.7): synthetic look-alikes, never real
data.

The real release is under the MSR Open Data License (no redistribution), so every value here is
invented; only the structure follows the release. Images are tiny (12 wide × 8 high) and cover
the PNG modes the builder must flatten to RGB: RGB, RGBA (with transparent pixels), palette and
greyscale. Colour ids are invented, not the line numbers of `x11_colors_refined.txt`.

Run from anywhere: `python tfds_builders/figureqa/dummy_data/make_dummy_data.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent
W, H = 12, 8
WHITE = (255, 255, 255)
NONE2 = {"color2_name": "--None--", "color2_id": -1, "color2_rgb": [-1, -1, -1]}
WEB_GREEN = {"name": "Web Green", "id": 41, "rgb": [0, 128, 0]}
DARK_ORANGE = {"name": "Dark Orange", "id": 17, "rgb": [255, 140, 0]}
MEDIUM_BLUE = {"name": "Medium Blue", "id": 56, "rgb": [0, 0, 205]}
CRIMSON = {"name": "Crimson", "id": 12, "rgb": [220, 20, 60]}
PERU = {"name": "Peru", "id": 83, "rgb": [205, 133, 63]}


def c(n: int, color: dict) -> dict:
    return {
        f"color{n}_name": color["name"],
        f"color{n}_id": color["id"],
        f"color{n}_rgb": color["rgb"],
    }


def bbox(x, y, w, h) -> dict:
    return {"x": x, "y": y, "w": w, "h": h}


def axis(values: list[str], label: str) -> dict:
    boxes = [bbox(10 + 20 * i, 300, 12.5, 10) for i in range(len(values))]
    return {
        "label": {"text": label, "bbox": bbox(150, 380, 60.234375, 14)},
        "major_labels": {"values": values, "bboxes": boxes},
        "major_ticks": {"values": values, "bboxes": boxes},
        "minor_ticks": {"values": [], "bboxes": []},
        "rule": {"bbox": bbox(40, 350, 340, 1)},
    }


# ------------------------------------------------------------------------------------- images


def vbar_rgb() -> Image.Image:
    """train1/png/0.png: green bar (cols 2-4, rows 3-7), orange bar (cols 7-9, rows 1-7)."""
    img = Image.new("RGB", (W, H), WHITE)
    for x in range(2, 5):
        for y in range(3, H):
            img.putpixel((x, y), tuple(WEB_GREEN["rgb"]))
    for x in range(7, 10):
        for y in range(1, H):
            img.putpixel((x, y), tuple(DARK_ORANGE["rgb"]))
    return img


def line_rgba() -> Image.Image:
    """train1/png/1.png: RGBA; row 2 blue, row 5 crimson, everything else fully transparent
    black (0, 0, 0, 0), which the builder must turn white."""
    img = Image.new("RGBA", (W, H), (0, 0, 0, 0))
    for x in range(W):
        img.putpixel((x, 2), (*MEDIUM_BLUE["rgb"], 255))
        img.putpixel((x, 5), (*CRIMSON["rgb"], 255))
    return img


def hbar_palette() -> Image.Image:
    """validation1/png/0.png: palette mode; a Peru bar on rows 2-4, cols 0-8."""
    img = Image.new("RGB", (W, H), WHITE)
    for x in range(9):
        for y in range(2, 5):
            img.putpixel((x, y), tuple(PERU["rgb"]))
    # ADAPTIVE keeps the two colours exact (the default web palette would dither Peru).
    return img.convert("P", palette=Image.Palette.ADAPTIVE, colors=2)


def grey(level: int) -> Image.Image:
    """no_annot_test1 images: greyscale ('L') with a uniform level."""
    return Image.new("L", (W, H), level)


# ---------------------------------------------------------------------------------- annotations


def vbar_annotation() -> dict:
    """Real-file shape: double-nested figure_info, `x_gridlines`, float text boxes."""
    names = [WEB_GREEN["name"], DARK_ORANGE["name"]]
    return {
        "type": "vbar_categorical",
        "image_index": 0,
        "models": [
            {
                "name": "bars",
                "labels": names,
                "colors": ["#008000", "#FF8C00"],
                "bboxes": [bbox(60, 150, 40, 200), bbox(120, 50.5, 40, 299.5)],
                "x": names,
                "y": [40.0, 61.25],
                "width": 0.5,
            }
        ],
        "general_figure_info": {
            "title": {"text": " title", "bbox": bbox(5, 9, 50.234375, 16)},
            "figure_info": {"bbox": {"bbox": bbox(0, 0, 400, 400)}},
            "plot_info": {"bbox": bbox(40, 30, 340, 320)},
            "x_axis": axis(names, "xaxis_label"),
            "y_axis": axis(["0", "20", "40", "60"], "yaxis_label"),
            "x_gridlines": {
                "values": names,
                "bboxes": [bbox(80, 30, 1, 320), bbox(140, 30, 1, 320)],
            },
            "legend": {
                "bbox": bbox(300, 40, 70, 40),
                "items": [
                    {
                        "model": n,
                        "label": {"text": n, "bbox": bbox(320, 45 + 15 * i, 40.5, 10)},
                        "preview": {"bbox": bbox(305, 45 + 15 * i, 10, 10)},
                    }
                    for i, n in enumerate(names)
                ],
            },
        },
    }


def line_annotation() -> dict:
    """Docs shape: single-nested figure_info and `x_grid_lines`/`y_grid_lines`; keys reordered."""
    return {
        "general_figure_info": {
            "y_grid_lines": {
                "values": ["0", "5"],
                "bboxes": [bbox(40, 300, 340, 1), bbox(40, 100, 340, 1)],
            },
            "x_grid_lines": {"values": [], "bboxes": []},
            "figure_info": {"bbox": bbox(0, 0, 600, 400)},
            "title": {"text": "title", "bbox": bbox(5, 9, 30, 16)},
            # Duplicated labels, as in real line-plot files.
            "x_axis": axis(["0", "10", "0", "10"], "xaxis_label"),
            "y_axis": axis(["0", "5"], "yaxis_label"),
        },
        "models": [
            {
                "name": "Medium Blue",
                "label": "Medium Blue",
                "color": "#0000CD",
                "bboxes": [bbox(40, 200, 100, 3.5)],
                "x": [0.0, 5.0, 10.0],
                "y": [1.0, 1.5, 2.0],
            },
            {
                "name": "Crimson",
                "label": "Crimson",
                "color": "#DC143C",
                "bboxes": [bbox(40, 100, 100, 50.25)],
                "x": [0.0, 5.0, 10.0],
                "y": [4.0, 0.5, 3.0],
            },
        ],
        "image_index": 1,
        "type": "line",
    }


def hbar_annotation() -> dict:
    return {
        "type": "hbar_categorical",
        "image_index": 0,
        "models": [
            {
                "name": "bars",
                "labels": ["Peru"],
                "colors": ["#CD853F"],
                "bboxes": [bbox(40, 100, 250.75, 30)],
                "x": [12.5],
                "y": ["Peru"],
                "width": 0.5,
            }
        ],
        "general_figure_info": {
            "figure_info": {"bbox": {"bbox": bbox(0, 0, 500, 400)}},
            "plot_info": {"bbox": bbox(40, 30, 440, 320)},
        },
    }


# ------------------------------------------------------------------------------------ qa pairs


def train_qa() -> list[dict]:
    # Key orders differ on purpose (the release's were Python 2 dict orders).
    return [
        {
            "image_index": 0,
            "question_id": 0,
            "question_string": "Is Web Green the minimum?",
            "answer": 1,
            **c(1, WEB_GREEN),
            **NONE2,
        },
        {
            "answer": 1,
            "question_string": "Is Dark Orange greater than Web Green?",
            **c(2, WEB_GREEN),
            **c(1, DARK_ORANGE),
            "question_id": 3,
            "image_index": 0,
        },
        {
            "image_index": 0,
            "question_id": 1,
            "question_string": "Is Web Green the maximum?",
            "answer": 0,
            **c(1, WEB_GREEN),
            **NONE2,
        },
        {
            "image_index": 1,
            "question_id": 14,
            "question_string": "Does Medium Blue intersect Crimson?",
            "answer": 1,
            **c(1, MEDIUM_BLUE),
            **c(2, CRIMSON),
        },
        {
            "image_index": 1,
            "question_id": 8,
            "question_string": "Is Crimson the smoothest?",
            "answer": 0,
            **c(1, CRIMSON),
            **NONE2,
        },
    ]


def validation_qa() -> list[dict]:
    return [
        {
            "image_index": 0,
            "question_id": 1,
            "question_string": "Is Peru the maximum?",
            "answer": 1,
            **c(1, PERU),
            **NONE2,
        },
        {
            "image_index": 0,
            "question_id": 0,
            "question_string": "Is Peru the minimum?",
            "answer": 1,
            **c(1, PERU),
            **NONE2,
        },
    ]


def test_qa() -> list[dict]:
    return [
        {
            "image_index": 0,
            "question_id": 4,
            "question_string": "Is Crimson the low median?",
            **c(1, CRIMSON),
            **NONE2,
        },
        {
            "image_index": 1,
            "question_id": 12,
            "question_string": "Is Peru less than Crimson?",
            **c(1, PERU),
            **c(2, CRIMSON),
        },
        {
            "image_index": 1,
            "question_id": 6,
            "question_string": "Does Peru have the minimum area under the curve?",
            **c(1, PERU),
            **NONE2,
        },
    ]


def write_split(name: str, images: list[Image.Image], qa: list[dict], annotations: list | None):
    split = HERE / name
    (split / "png").mkdir(parents=True, exist_ok=True)
    for i, img in enumerate(images):
        img.save(split / "png" / f"{i}.png")
    doc = {"qa_pairs": qa, "total_distinct_questions": 15, "total_distinct_colors": 100}
    (split / "qa_pairs.json").write_text(json.dumps(doc))
    if annotations is not None:
        (split / "annotations.json").write_text(json.dumps(annotations))


def main():
    write_split(
        "train1", [vbar_rgb(), line_rgba()], train_qa(), [line_annotation(), vbar_annotation()]
    )
    write_split("validation1", [hbar_palette()], validation_qa(), [hbar_annotation()])
    write_split("no_annot_test1", [grey(200), grey(30)], test_qa(), None)


if __name__ == "__main__":
    main()
