"""(Re)writes the PlotQA builder fixture in this folder: `python make_dummy_data.py`.

Synthetic look-alikes in the release layout (docs/corpora.md §8.2), never real data:
`{train,val,test}/annotations.json` (a list, one entry per plot: `models` with `name`, `label`,
`color`, `bboxes`, `x`, `y`; `type`; `general_figure_info`; `image_index`), the QA pairs and the
images. The variants the builder accepts are spread over the splits:

* train/: `png/<index>.png` (RGBA, as the release; one RGB), `qa_pairs_V1.json` and
  `qa_pairs_V2.json` as `{"qa_pairs": [...]}`, pairs not ordered by plot;
* val/: the images only as `png.tar.gz` (members `png/1.png`, then `png/0.png`, after a
  directory member), `qa_pairs_v1.json` (lower case) as an unwrapped list, `qa_pairs_V2.json`;
* test/: `png/`, one plot.

V2 holds every V1 pair (same question_id) and more. Tiny images (6x4) of known colours.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent
W, H = 6, 4
WHITE, RED, BLUE = (255, 255, 255), (200, 30, 30), (30, 30, 200)


def _info(title: str, x_title: str, y_title: str) -> dict:
    return {
        "title": {"text": title, "bbox": {"x": 0, "y": 0, "w": 6, "h": 1}},
        "x_axis": {"label": {"text": x_title}, "major_labels": {}},
        "y_axis": {"label": {"text": y_title}, "major_labels": {}},
        "legend": {},
        "plot_info": {},
        "figure_info": {},
    }


def _model(label: str, color: str, x: list, y: list) -> dict:
    return {"name": label, "label": label, "color": color, "bboxes": [], "x": x, "y": y}


ANNOTATIONS = {
    "train": [
        {
            "image_index": 0,
            "type": "vbar_categorical",
            "general_figure_info": _info("Exports", "Year", "Exports (US$)"),
            "models": [
                _model("Chile", "#c81e1e", ["2010", "2011"], [12.5, 14]),
                _model("Kenya", "#1e1ec8", ["2010", "2011"], [3, 4.25]),
            ],
        },
        {
            "image_index": 1,
            "type": "hbar_categorical",  # categories on y, values on x
            "general_figure_info": _info("Rainfall", "Rainfall (mm)", "Country"),
            "models": [_model("Rainfall", "#c81e1e", [800, 650.5], ["Peru", "Chad"])],
        },
        {
            "image_index": 2,
            "type": "line",
            "general_figure_info": _info("Population", "Year", "People"),
            "models": [_model("Population", "#1e1ec8", [1990, 2000, 2010], [5, 7, 9])],
        },
    ],
    "val": [
        {
            "image_index": 0,
            "type": "dot_line",
            "general_figure_info": _info("Yield", "Year", "Tonnes"),
            "models": [_model("Wheat", "#c81e1e", ["2001", "2002"], [2.5, 3.5])],
        },
        {
            "image_index": 1,
            "type": "vbar_categorical",
            "general_figure_info": _info("Visitors", "Month", "Visitors"),
            "models": [_model("Visitors", "#1e1ec8", ["Jan", "Feb"], [100, 150])],
        },
    ],
    "test": [
        {
            "image_index": 0,
            "type": "line",
            "general_figure_info": _info("Debt", "Year", "Debt (%)"),
            "models": [_model("Debt", "#c81e1e", ["2015", "2016"], [40, 41])],
        },
    ],
}


def _qa(index, qid, question, answer, template, kind, plot_type) -> dict:
    return {
        "image_index": index,
        "question_string": question,
        "answer": answer,
        "answer_bbox": [],
        "template": template,
        "type": plot_type,
        "question_id": qid,
        "qid": kind,
    }


# (image_index, question_id, question, answer, template, qid, type, in V1)
PAIRS = {
    "train": [
        (2, 0, "Does the People increase over the years?", "Yes", "structural", "Q1", "line", 1),
        (
            0,
            1,
            "What is the Exports of Chile in 2011?",
            14,
            "data_retrieval",
            "Q2",
            "vbar_categorical",
            1,
        ),  # noqa: E501
        (
            1,
            2,
            "Which country has the highest rainfall?",
            "Peru",
            "min_max",
            "Q3",
            "hbar_categorical",
            1,
        ),  # noqa: E501
        (
            0,
            3,
            "What is the total Exports of Kenya?",
            7.25,
            "arithmetic",
            "Q4",
            "vbar_categorical",
            0,
        ),  # noqa: E501
        (0, 4, "How many legend labels are there?", 2, "structural", "Q5", "vbar_categorical", 1),  # noqa: E501
        (2, 5, "What is the average People?", 7, "arithmetic", "Q6", "line", 0),
    ],
    "val": [
        (
            1,
            10,
            "In which month were the Visitors highest?",
            "Feb",
            "min_max",
            "Q3",
            "vbar_categorical",
            1,
        ),  # noqa: E501
        (0, 11, "What is the Tonnes of Wheat in 2002?", 3.5, "data_retrieval", "Q2", "dot_line", 1),  # noqa: E501
        (
            1,
            12,
            "What is the difference between Visitors in Feb and Jan?",
            50,
            "arithmetic",
            "Q7",
            "vbar_categorical",
            0,
        ),  # noqa: E501
    ],
    "test": [
        (0, 7, "Is Debt in 2016 greater than in 2015?", "Yes", "comparison", "Q8", "line", 1),
        (0, 8, "What is the sum of Debt in 2015 and 2016?", 81, "arithmetic", "Q9", "line", 0),
    ],
}


def _image(index: int, folder: str) -> Image.Image:
    """RGBA (transparent left half, red right half), or for train plot 2 RGB blue."""
    if folder == "train" and index == 2:
        return Image.new("RGB", (W, H), BLUE)
    img = Image.new("RGBA", (W, H), (0, 0, 0, 0))
    for x in range(W // 2, W):
        for y in range(H):
            img.putpixel((x, y), (*(RED if index % 2 == 0 else BLUE), 255))
    return img


def _png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def main() -> None:
    for folder, entries in ANNOTATIONS.items():
        root = HERE / folder
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        (root / "annotations.json").write_text(json.dumps(entries, indent=1) + "\n")
        pairs = [_qa(*p[:7]) for p in PAIRS[folder]]
        v1 = [_qa(*p[:7]) for p in PAIRS[folder] if p[7]]
        v1_name = "qa_pairs_v1.json" if folder == "val" else "qa_pairs_V1.json"
        (root / v1_name).write_text(
            json.dumps(v1 if folder == "val" else {"qa_pairs": v1}, indent=1) + "\n"
        )
        (root / "qa_pairs_V2.json").write_text(json.dumps({"qa_pairs": pairs}, indent=1) + "\n")
        indices = [e["image_index"] for e in entries]
        if folder == "val":
            with tarfile.open(root / "png.tar.gz", "w:gz") as tar:
                d = tarfile.TarInfo("png")
                d.type, d.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(d)
                for index in reversed(indices):
                    data = _png(_image(index, folder))
                    info = tarfile.TarInfo(f"png/{index}.png")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        else:
            (root / "png").mkdir()
            for index in indices:
                _image(index, folder).save(root / "png" / f"{index}.png")


if __name__ == "__main__":
    main()
