"""(Re)writes the ChartQAPro builder fixture in this folder: `python make_dummy_data.py`.

Synthetic look-alikes of the HF dataset's files (the layout `push_to_hub` writes, [unverified]
for ChartQAPro), never real data: `data/test-00000-of-00002.parquet` (rows 0-3) and
`data/test-00001-of-00002.parquet` (rows 4-6), columns as `datasets` stores them: `image` a struct
`{"bytes", "path"}` (tiny JPEG, RGB / RGBA / palette PNGs), `Question` and `Answer` lists of
strings, `Question Type`, `Year` a list of "YES"/"NO", `Paragraph` a string or null. Every
question type is here: a conversation of three turns (row 2), two rows without a paragraph
(null: rows 1 and 6; empty: row 3), a Year-flagged answer (row 5) and a list answer (row 6).
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

HERE = Path(__file__).resolve().parent
W, H = 6, 4
RED, BLUE, WHITE = (200, 30, 30), (30, 30, 200), (255, 255, 255)

# (image kind, Question, Answer, Question Type, Year, Paragraph)
ROWS = [
    (
        "jpeg",
        ["What was the share of online sales in 2021?"],
        ["34.5"],
        "Factoid",
        ["NO"],
        "Online sales grew steadily after 2019.",
    ),
    (
        "rgb",
        ["Which region had the highest value? A) North B) South C) East"],
        ["B"],
        "Multi Choice",
        ["NO"],
        None,
    ),
    (
        "jpeg",
        ["What is the highest value?", "Which country has it?", "Which country ranked second?"],
        ["80", "Japan", "South Korea"],
        "Conversational",
        ["NO"],
        "The survey covered five countries.",
    ),
    (
        "palette",
        ["The value in 2019 is higher than in 2018. True or False?"],
        ["True"],
        "Fact Checking",
        ["NO"],
        "",
    ),
    (
        "rgba",
        ["If sales doubled in 2022, what would they be?"],
        ["69"],
        "Hypothetical",
        ["NO"],
        "Sales in 2022 were 34.5 million.",
    ),
    ("jpeg", ["In which year did the share peak?"], ["2019"], "Factoid", ["YES"], "Shares."),
    (
        "rgb",
        ["Which two years had the lowest values?"],
        ["[2015, 2016]"],
        "Factoid",
        ["YES", "YES"],
        None,
    ),
]
SHARDS = ((0, 4), (4, 7))


def image_bytes(kind: str) -> bytes:
    """A tiny chart-like image: red left half, blue right half (white where transparent)."""
    img = Image.new("RGB", (W, H), RED)
    img.paste(BLUE, (W // 2, 0, W, H))
    buf = io.BytesIO()
    if kind == "jpeg":
        img.save(buf, format="JPEG", quality=95)
    elif kind == "rgb":
        img.save(buf, format="PNG")
    elif kind == "palette":
        img.convert("P", palette=Image.Palette.ADAPTIVE, colors=4).save(buf, format="PNG")
    elif kind == "rgba":
        rgba = img.convert("RGBA")
        rgba.putpixel((0, 0), (0, 0, 0, 0))  # transparent: white once flattened
        rgba.save(buf, format="PNG")
    return buf.getvalue()


IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
SCHEMA = pa.schema(
    [
        ("image", IMAGE),
        ("Question", pa.list_(pa.string())),
        ("Answer", pa.list_(pa.string())),
        ("Question Type", pa.string()),
        ("Year", pa.list_(pa.string())),
        ("Paragraph", pa.string()),
    ]
)


def table(rows) -> pa.Table:
    columns = list(zip(*rows))
    data = {
        "image": [
            {"bytes": image_bytes(kind), "path": f"chart.{'jpg' if kind == 'jpeg' else 'png'}"}
            for kind in columns[0]
        ],
        "Question": list(columns[1]),
        "Answer": list(columns[2]),
        "Question Type": list(columns[3]),
        "Year": list(columns[4]),
        "Paragraph": list(columns[5]),
    }
    return pa.Table.from_pydict(data, schema=SCHEMA)


def main() -> None:
    out = HERE / "data"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    for k, (start, stop) in enumerate(SHARDS):
        name = f"test-{k:05d}-of-{len(SHARDS):05d}.parquet"
        pq.write_table(table(ROWS[start:stop]), out / name)


if __name__ == "__main__":
    main()
