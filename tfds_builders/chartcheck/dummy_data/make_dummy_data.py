"""(Re)writes the ChartCheck dummy release in this folder: `python make_dummy_data.py`.

Synthetic look-alikes of the official files (docs/corpora.md §1.9) with their quirks: unnamed index
column, `Unnamed: 6` and True/False in test_two.csv, quoted multi-line fields, double-percent-
encoded image names saved under the raw, once- and twice-unquoted forms, GIF/TIFF/JPEG/PNG with
mixed-case extensions, RGBA/palette/16-bit images, chart-type metadata (one name under two types,
one once-encoded name), reasoning annotations for test_one, and the JSON variant in json_variant/.
test_two.csv is in the layout of the 2024 re-annotation (9fa228a); paper_era/ holds a test set 2
in the layout of the paper's file (ChartCheck 276f08e, claim_..._test_two_V2.json: MTurk review
fields, no `id`) with the same charts, one claim as it read before its rewrite and one label as
it was before the re-annotation changed it.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
URL = "https://chartfc.s3.amazonaws.com/"
HEADER = ["", "chart_img", "caption", "label", "claim", "explanation"]

TRAIN = [
    [
        "0",
        URL + "Sales_bar.png",
        "Annual sales of ACME, 2010-2015",
        "TRUE",
        "Sales peaked in 2014.",
        "The tallest bar, at about 40 units, is the 2014 bar.",
    ],
    [
        "1",
        URL + "Sales_bar.png",
        '\nAnnual sales of ACME,\n"best" years',
        "FALSE",
        "Sales fell in 2014.",
        "The 2014 bar is the tallest,\nso sales rose.",
    ],
    [
        "2",
        URL + "Lock_%2526_dam_10.png",
        "Lock & dam 10 traffic",
        "TRUE",
        "Traffic doubled.",
        "The line doubles.",
    ],
    [
        "3",
        URL + "Caf%25C3%25A9_prices.PNG",
        "Café prices",
        "FALSE",
        "Coffee got cheaper.",
        "Prices rise every year.",
    ],
    ["4", URL + "Rainfall_line.GIF", "Rainfall", "TRUE", "It rained most in May.", "May peaks."],
]
VAL = [
    [
        "0",
        URL + "Sales_bar.png",
        "Annual sales",
        "FALSE",
        "2010 was the best year.",
        "It was 2014.",
    ],
    ["1", URL + "Population.tif", "Population", "TRUE", "Population grew.", "Rising bars."],
    ["2", URL + "Temperature.JPG", "Temperature", "FALSE", "July was cold.", "July is hottest."],
]
TEST = [
    ["0", URL + "Share_pie.png", "Market share", "TRUE", "A has the largest share.", "A is 50%."],
    ["1", URL + "Share_pie.png", "Market share", "FALSE", "B has the largest share.", "B is 20%."],
    ["2", URL + "Growth.jpeg", "Growth", "TRUE", "Growth was positive.", "All bars > 0."],
    ["3", URL + "Depth_16bit.tiff", "Depth", "FALSE", "Depth is constant.", "It varies."],
]
# test_two: `True`/`False`, an extra `Unnamed: 6` column, an index "198 qq", mojibake.
TEST_TWO = [
    [
        "0",
        URL + "Votes_scatter.png",
        "Votes (ë\u008f™ë‘\u0090ì²œì‹œ)",
        "True",
        "Votes rose.",
        "The points go up.",
        "",
    ],
    [
        "198 qq",
        URL + "Votes_scatter.png",
        "Votes",
        "False",
        "Votes fell.",
        "They rose.",
        "A stray second explanation.",
    ],
    [
        "2",
        URL + "Rainfall_line.GIF",
        "Rainfall again",
        "True",
        "May is wettest.",
        "Peak in May.",
        "",
    ],
]
# chart_img basename -> the name the image is saved under in images/ (raw, once, twice unquoted).
SAVED_AS = {
    "Sales_bar.png": "Sales_bar.png",
    "Lock_%2526_dam_10.png": "Lock_&_dam_10.png",
    "Caf%25C3%25A9_prices.PNG": "Caf%C3%A9_prices.PNG",
    "Rainfall_line.GIF": "Rainfall_line.GIF",
    "Population.tif": "Population.tif",
    "Temperature.JPG": "Temperature.JPG",
    "Share_pie.png": "Share_pie.png",
    "Growth.jpeg": "Growth.jpeg",
    "Depth_16bit.tiff": "Depth_16bit.tiff",
    "Votes_scatter.png": "Votes_scatter.png",
}
# <type>.json metadata: file_name encoded once; Votes_scatter.png listed under two types.
CHART_TYPES = {
    "barchart_vertical": ["Sales_bar.png", "Lock_%26_dam_10.png", "Votes_scatter.png"],
    "line_chart": ["Rainfall_line.GIF"],
    "pie_chart": ["Share_pie.png"],
    "scatter_plot": ["Votes_scatter.png"],
}


def _rgb(w: int, h: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def write_images(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    Image.fromarray(_rgb(8, 6, 1)).save(folder / SAVED_AS["Sales_bar.png"])
    Image.fromarray(_rgb(5, 4, 2)).save(folder / SAVED_AS["Lock_%2526_dam_10.png"])
    Image.fromarray(_rgb(4, 3, 3)).save(folder / SAVED_AS["Caf%25C3%25A9_prices.PNG"], "PNG")
    # Palette GIF, index 0 transparent (black in the palette) -> white; index 1 red.
    gif = Image.fromarray(np.array([[0, 1, 1], [1, 0, 1]], dtype=np.uint8), mode="P")
    gif.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
    gif.save(folder / SAVED_AS["Rainfall_line.GIF"], "GIF", transparency=0)
    Image.fromarray(_rgb(6, 5, 4)).save(folder / SAVED_AS["Population.tif"], "TIFF")
    Image.new("RGB", (8, 8), (200, 30, 30)).save(folder / SAVED_AS["Temperature.JPG"], "JPEG")
    # RGBA: transparent red -> white, opaque blue stays, half-transparent black -> grey 127.
    rgba = np.array([[[255, 0, 0, 0], [0, 0, 255, 255], [0, 0, 0, 128]]], dtype=np.uint8)
    Image.fromarray(rgba, mode="RGBA").save(folder / SAVED_AS["Share_pie.png"])
    Image.new("RGB", (8, 8), (30, 200, 30)).save(folder / SAVED_AS["Growth.jpeg"], "JPEG")
    # 16-bit grey TIFF: 0, 65535, 32896 -> 0, 255, 128 after rescaling to 8 bits.
    deep = np.array([[0, 65535, 32896]], dtype=np.uint16)
    Image.fromarray(deep).save(folder / SAVED_AS["Depth_16bit.tiff"], "TIFF")
    # Palette PNG without transparency.
    pal = Image.fromarray(np.array([[0, 1], [1, 0]], dtype=np.uint8), mode="P")
    pal.putpalette([10, 20, 30, 40, 50, 60] + [0] * 762)
    pal.save(folder / SAVED_AS["Votes_scatter.png"])


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([header, *rows])


def _json_record(row: list[str]) -> dict:
    return {"chart_img": row[1], "caption": row[2], "claim": row[4], "explanation": row[5]}


def write_json_variant(folder: Path) -> None:
    """ChartCheck_final-style files: no train.json, so only three splits exist there."""
    folder.mkdir(parents=True, exist_ok=True)
    # validation.json: no `id`, a non-unique `db_id`, string labels, rewrite fields at -1.
    val = [
        {
            "db_id": "3HIT",
            **_json_record(r),
            "label": r[3],
            "claim_rewritten": -1,
            "explanation_rewritten": -1,
            "label_claim": -1,
            "label_explanation": -1,
        }
        for r in VAL
    ]
    # test.json: int ids, JSON bool labels, literal NaN caption (Python's json writes NaN).
    test = [{"id": int(r[0]), **_json_record(r), "label": r[3] == "TRUE"} for r in TEST]
    test[0]["caption"] = float("nan")
    # test_two.json: string labels "TRUE"/"FALSE", one id "198 qq".
    test_two = [
        {"id": int(r[0]) if r[0].isdigit() else r[0], **_json_record(r), "label": r[3].upper()}
        for r in TEST_TWO
    ]
    for name, data in (("validation", val), ("test", test), ("test_two", test_two)):
        (folder / f"{name}.json").write_text(json.dumps(data, indent=1, ensure_ascii=False))
    write_images(folder / "images")


# The paper-era test set 2 of the same charts: row 1's claim before its rewrite, row 2's label
# before the re-annotation turned it (1 supports / 2 refutes; test_two.csv has 2 / 1).
PAPER_TEST_TWO = [
    [URL + "Votes_scatter.png", "Votes (ë\u008f™ë‘\u0090ì²œì‹œ)", "TRUE", "Votes rose. ", "Up."],
    [URL + "Votes_scatter.png", "Votes", "FALSE", "Votes dropped a lot", "They rose."],
    [URL + "Rainfall_line.GIF", "Rainfall again", "FALSE", "May is driest.", "Peak in May."],
]
PAPER_FILE = "claim_explanation_verification_pre_tasksets_test_two_V2.json"


def write_paper_era(folder: Path) -> None:
    """The paper's test_two file as ChartCheck 276f08e has it, with the images it needs."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "db_id": "3PIOQ99R85KXJS7404KD8AU0849UNP",
            "chart_img": img,
            "caption": caption,
            "label": label,
            "claim": claim,
            "explanation": expl,
            "claim_rewritten": -1,
            "explanation_rewritten": -1,
            "claim_error_corrected": -1,
            "explanation_error_corrected": -1,
            "label_claim": -1,
            "label_explanation": -1,
        }
        for img, caption, label, claim, expl in PAPER_TEST_TWO
    ]
    (folder / PAPER_FILE).write_text(json.dumps(rows, indent=4, ensure_ascii=False))
    (folder / "images").mkdir(exist_ok=True)
    for name in ("Votes_scatter.png", "Rainfall_line.GIF"):
        shutil.copy(HERE / "images" / SAVED_AS[name], folder / "images" / SAVED_AS[name])


def main() -> None:
    for old in ("images", "json_variant", "annotation_reasoning_types", "paper_era"):
        shutil.rmtree(HERE / old, ignore_errors=True)
    write_images(HERE / "images")
    write_csv(HERE / "train.csv", HEADER, TRAIN)
    write_csv(HERE / "val.csv", HEADER, VAL)
    write_csv(HERE / "test.csv", HEADER, TEST)
    write_csv(HERE / "test_two.csv", [*HEADER, "Unnamed: 6"], TEST_TWO)
    for chart_type, names in CHART_TYPES.items():
        entries = [
            {
                "file_name": n,
                "type": chart_type,
                "url": URL + n,
                "source": "wikimedia",
                "description": "",
                "wikipedia_pages": [],
            }
            for n in names
        ]
        (HERE / f"{chart_type}.json").write_text(json.dumps([entries], indent=1))
    reasoning = HERE / "annotation_reasoning_types"
    reasoning.mkdir()
    row = TEST[0]
    records = [
        {
            "db_id": "3HIT",
            "claim_id": 0,
            **_json_record(row),
            "label": row[3],
            "reasoning_types": ["Retrieve", "Compare"],
        }
    ]
    (reasoning / "claim_explanation_test_one_ID_reasoning.json").write_text(
        json.dumps(records, indent=1)
    )
    write_json_variant(HERE / "json_variant")
    write_paper_era(HERE / "paper_era")


if __name__ == "__main__":
    main()
