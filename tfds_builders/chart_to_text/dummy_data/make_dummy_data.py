"""(Re)writes the Chart-to-Text dummy repository in this folder: `python make_dummy_data.py`.

Synthetic look-alikes of vis-nlp/Chart-to-text files (docs/corpora.md §2.6): Statista simple and
multiColumn charts named by number, tokenized one-line titles/captions with trailing newlines,
real-CSV tables (apostrophes, quoted commas, a missing cell), a Statista metadata.csv (columns
[unverified]) for simple charts only; Pew charts renumbered (split files list old ids, joined
through metadata.csv), " | "-joined OCR data without trailing newline, OCR boxes, a multi-
paragraph caption, curly quotes, a `no_data-*` row, and the `dataset_split` folder.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
PEW_HEADER = [
    "id",
    "old_id",
    "title",
    "imgPath",
    "caption",
    "URL",
    "dataPath",
    "chartType",
    "complexity",
    "topic",
    "bboxesPath",
]


def _image(path: Path, seed: int, mode: str = "RGB") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    channels = 4 if mode == "RGBA" else 3
    pixels = rng.integers(0, 256, size=(6, 9, channels), dtype=np.uint8)
    if mode == "RGBA":
        pixels[0, 0, 3] = 0  # one transparent pixel -> white
    Image.fromarray(pixels).save(path)


def _text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _csv(path: Path, rows: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)


def _split_files(folder: Path, splits: dict[str, list[str]]) -> None:
    for split, names in splits.items():
        _csv(folder / f"{split}_index_mapping.csv", [["File_No"], *[[n] for n in names]])
    all_names = [n for names in splits.values() for n in names]
    _csv(folder / "all_index_mapping.csv", [["File_No"], *[[n] for n in all_names]])


def write_statista(root: Path) -> None:
    base = root / "statista_dataset" / "dataset"
    tables = {
        (base, 1): [
            ["Quarter", "Number of users in millions"],
            ["Q3 '20", "2740"],
            ["Q2 '20", "2701"],
        ],
        (base, 2): [
            ["Characteristic", "Share of respondents"],
            ["Yes, definitely", "45%"],
            ["No", "55%"],
        ],
        (base, 3): [["Year", "Revenue in billion U.S. dollars"], ["2019", "1.5"], ["2020", "2"]],
        (base / "multiColumn", 1): [
            ["Year", "White", "Black or African American"],
            ["2019", "250.52", "44.08"],
            ["2018", "", "40.1"],
        ],
    }
    titles = {
        (base, 1): "Number of monthly active Facebook users worldwide as of 3rd quarter 2020 "
        "( in millions )",
        (base, 2): "Would you buy this product again ?",
        (base, 3): "Revenue of the company from 2019 to 2020 ( in billion U.S. dollars )",
        (base / "multiColumn", 1): "Population by race in the U.S. 2018 - 2019",
    }
    captions = {
        (base, 1): "Facebook had 2.74 billion monthly active users in the third quarter of 2020 .",
        (base, 2): "45 % of respondents would definitely buy the product again .",
        (base, 3): "The company 's revenue rose to 2 billion U.S. dollars in 2020 .",
        (base / "multiColumn", 1): "In 2019 , 250.52 million White people lived in the U.S. .",
    }
    for seed, ((folder, number), table) in enumerate(tables.items()):
        _csv(folder / "data" / f"{number}.csv", table)
        _text(folder / "titles" / f"{number}.txt", titles[folder, number] + "\n")
        _text(folder / "captions" / f"{number}.txt", captions[folder, number] + "\n")
        _image(folder / "imgs" / f"{number}.png", seed, "RGBA" if number == 2 else "RGB")
    boxes = [{"sentence": "Number of users ", "bounding_box": [3, 1, 40, 9]}]
    _text(base / "bboxes" / "1.json", json.dumps(boxes))
    # Statista metadata.csv: only `id` and `chartType` are known columns [unverified].
    _csv(base / "metadata.csv", [["id", "chartType"], ["1", "Line"], ["2", "pie"], ["3", "Bar"]])
    _text(base / "sta.txt", "Total charts: 3\n")
    _split_files(
        base / "dataset_split",
        {
            "train": ["two_col-1.txt", "multi_col-1.txt"],
            "val": ["two_col-2.txt"],
            "test": ["two_col-3.txt"],
        },
    )


def write_pew(root: Path) -> None:
    base = root / "pew_dataset" / "dataset"
    url = "https://www.pewresearch.org/"
    simple = [
        [
            "1",
            "two_col-7",
            "Foreign-born population in the United States, 1850-2018",
            "imgs/1.png",
            "The foreign-born population reached a record 44.8 million in 2018.\n\n"
            "It has more than quadrupled since 1965.",
            url + "a",
            "data/1.txt",
            "line",
            "simple",
            "Hispanic Trends",
            "bboxes/1.json",
        ],
        [
            "2",
            "two_col-1440",
            "Most say the \u201cnew normal\u201d is here",
            "imgs/2.png",
            "About six-in-ten say so.",
            url + "b",
            "data/2.txt",
            "bar",
            "simple",
            "Politics",
            "bboxes/2.json",
        ],
        [
            "3",
            "no_data-24687",
            "A chart without data",
            "imgs/3.png",
            "Not in any split.",
            url + "c",
            "data/3.txt",
            "pie",
            "simple",
            "Science",
            "bboxes/3.json",
        ],
        [
            "4",
            "two_col-9",
            "Share who use social media",
            "imgs/4.png",
            "72% use social media.",
            url + "d",
            "data/4.txt",
            "bar",
            "simple",
            "Internet",
            "bboxes/4.json",
        ],
    ]
    multi = [
        [
            "1",
            "multi_col-3246",
            "Views by party",
            "imgs/1.png",
            "Republicans and Democrats differ.",
            url + "e",
            "data/1.txt",
            "bar",
            "complex",
            "Politics",
            "bboxes/1.json",
        ],
    ]
    _csv(base / "metadata.csv", [PEW_HEADER, *simple])
    _csv(base / "multiColumn" / "metadata.csv", [PEW_HEADER, *multi])
    for seed, (folder, row) in enumerate(
        [(base, r) for r in simple] + [(base / "multiColumn", multi[0])]
    ):
        chart_id = row[0]
        if row[1].startswith("no_data"):
            continue  # the metadata row exists, its files do not matter here
        _image(folder / row[3], 10 + seed, "RGBA" if chart_id == "2" else "RGB")
        _text(folder / "titles" / f"{chart_id}.txt", row[2])  # raw, no trailing newline
        _text(folder / "captions" / f"{chart_id}.txt", row[4])
        _text(folder / row[6], f"{row[2].lower()}  | 50  | 40  | 30  | 1900  | 1925 ")
    boxes = [
        {"sentence": "foreign born populations in millions ", "bounding_box": [0, 29, 265, 48]},
        {"sentence": "50 ", "bounding_box": [9, 54, 25, 66]},
    ]
    _text(base / "bboxes" / "1.json", json.dumps(boxes))  # chart 2 and 4 have no boxes file
    _split_files(
        base / "dataset_split",
        {
            "train": ["two_col-7.txt", "multi_col-3246.txt"],
            "val": ["two_col-1440.txt"],
            "test": ["two_col-9.txt"],
        },
    )


def main() -> None:
    for old in ("statista_dataset", "pew_dataset"):
        shutil.rmtree(HERE / old, ignore_errors=True)
    write_statista(HERE)
    write_pew(HERE)


if __name__ == "__main__":
    main()
