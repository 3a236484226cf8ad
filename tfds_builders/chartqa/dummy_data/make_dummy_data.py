"""(Re)writes the ChartQA builder fixture in this folder: `python make_dummy_data.py`.

Synthetic look-alikes in the release layout (`ChartQA Dataset/{train,val,test}/`), never real
data: `png/<imgname>` (tiny, in the modes the builder flattens to RGB: RGB, RGBA with
transparent pixels, palette, greyscale), `tables/<stem>.csv` (header row, empty cells `nan`,
numbers like `19.0`), `<folder>_human.json` and `<folder>_augmented.json` (lists of
`{"imgname", "query", "label"}`, string labels) and, in train/ only, `annotations/<stem>.json`
for one chart of two (the full version's folder; its schema here is a reduced look-alike).
val/ and test/ have no annotations/ (the first public version). Image names follow the
release's kinds: `two_col_*`, `multi_col_*` (Statista), `OECD_*`, numeric (Pew / OWID).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent
W, H = 6, 4
WHITE = (255, 255, 255)
RED, BLUE = (200, 30, 30), (30, 30, 200)

TABLES = {
    "train": {
        "two_col_1": "Characteristic,Share of respondents\n2018,19.0\n2019,23.5\n2020,31.0\n",
        "multi_col_7": (
            "Characteristic,Male,Female\nUnder 18,12.0,14.0\n18-34,nan,22.0\n35+,40.0,38.5\n"
        ),
    },
    "val": {
        "OECD_GDP_growth_2015": "Country,Value\nChile,2.3\nKenya,5.7\n",
        "41699051005347": "Year,Approve,Disapprove\n2010,45.0,48.0\n2012,50.0,44.0\n",
    },
    "test": {
        "two_col_90": "Characteristic,Revenue in million euros\nQ1,120.0\nQ2,95.0\n",
        "multi_col_3": "Year,Online,In store\n2019,10.0,90.0\n",
    },
}

QUESTIONS = {
    "train": {
        "human": [
            ("two_col_1.png", "What's the highest share of respondents?", "31"),
            ("multi_col_7.png", "What is the difference between Male and Female in 35+?", "1.5"),
            ("two_col_1.png", "Is the share in 2020 greater than in 2018?", "Yes"),
        ],
        "augmented": [
            ("multi_col_7.png", "What is the value of Female in Under 18?", "14"),
            ("two_col_1.png", "In which year was the share of respondents 23.5?", "2019"),
        ],
    },
    "val": {
        "human": [
            ("OECD_GDP_growth_2015.png", "Which country grew faster?", "Kenya"),
            ("41699051005347.png", "What's the sum of Approve in 2010 and 2012?", "95"),
        ],
        "augmented": [
            ("41699051005347.png", "What percentage disapprove in 2012?", "44"),
            ("OECD_GDP_growth_2015.png", "What was the GDP growth of Chile?", "2.3"),
        ],
    },
    "test": {
        "human": [
            ("two_col_90.png", "What is the average revenue?", "107.5"),
            ("multi_col_3.png", "How many times larger is In store than Online?", "9"),
        ],
        "augmented": [("two_col_90.png", "What was the revenue in Q2?", "95")],
    },
}

# train/annotations/: one chart has an annotation, the other none (its annotation is "").
ANNOTATIONS = {
    "two_col_1": {
        "type": "v_bar",
        "general_figure_info": {"title": {"text": "Share of respondents", "bbox": [0, 0, 6, 1]}},
        "models": [{"name": "Share of respondents", "x": ["2018", "2019", "2020"]}],
    }
}


def rgb_bars() -> Image.Image:
    """Red left half, blue right half, white top row."""
    img = Image.new("RGB", (W, H), WHITE)
    for x in range(W):
        for y in range(1, H):
            img.putpixel((x, y), RED if x < W // 2 else BLUE)
    return img


def rgba_transparent() -> Image.Image:
    """Transparent everywhere but a red column at x = 2 (becomes red on white)."""
    img = Image.new("RGBA", (W, H), (0, 0, 0, 0))
    for y in range(H):
        img.putpixel((2, y), (*RED, 255))
    return img


def palette() -> Image.Image:
    """Palette image: index 0 white, index 1 blue in the bottom row."""
    img = Image.new("P", (W, H), 0)
    img.putpalette([*WHITE, *BLUE] + [0] * (3 * 254))
    for x in range(W):
        img.putpixel((x, H - 1), 1)
    return img


def grey(level: int) -> Image.Image:
    return Image.new("L", (W, H), level)


IMAGES = {
    "train": {"two_col_1": rgb_bars, "multi_col_7": rgba_transparent},
    "val": {"OECD_GDP_growth_2015": palette, "41699051005347": lambda: grey(200)},
    "test": {"two_col_90": rgb_bars, "multi_col_3": lambda: grey(30)},
}


def main() -> None:
    for folder in TABLES:
        root = HERE / folder
        shutil.rmtree(root, ignore_errors=True)
        (root / "png").mkdir(parents=True)
        (root / "tables").mkdir()
        for stem, text in TABLES[folder].items():
            (root / "tables" / f"{stem}.csv").write_text(text)
            IMAGES[folder][stem]().save(root / "png" / f"{stem}.png")
        for source, rows in QUESTIONS[folder].items():
            entries = [{"imgname": i, "query": q, "label": a} for i, q, a in rows]
            (root / f"{folder}_{source}.json").write_text(json.dumps(entries, indent=1) + "\n")
    (HERE / "train" / "annotations").mkdir()
    for stem, doc in ANNOTATIONS.items():
        (HERE / "train" / "annotations" / f"{stem}.json").write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
