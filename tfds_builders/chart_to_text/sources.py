"""Reading the Chart-to-Text repository layout (pure Python; docs/corpora.md §2).

Statista file names are the split's numbers (`two_col-21156.txt` -> `dataset/imgs/21156.png`,
`multi_col-K` -> `dataset/multiColumn/`); Pew files were renumbered, so Pew split names (old ids)
go through `metadata.csv` (`old_id` -> `id`). Readers return values or raise `BadInputError`
naming the file (and row); the builder decides between failing and skipping.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import re

from tfds_builders.common.bad_input import BadInputError

# tfds split -> the release's split file (folder `dataset_split`, not the README's `dataset_splits`).
SPLIT_FILES = {
    "train": "train_index_mapping.csv",
    "validation": "val_index_mapping.csv",
    "test": "test_index_mapping.csv",
}
SIMPLE, COMPLEX = "simple", "complex"
UNKNOWN = "unknown"
_NAME = re.compile(r"^(?P<kind>[a-z_]+)-(?P<number>\d+)$")


@dataclasses.dataclass(frozen=True)
class SplitEntry:
    name: str  # File_No without ".txt", e.g. "two_col-18658"
    where: str  # "<split file>, row N" for error messages


def read_split_file(path: str) -> list[SplitEntry | BadInputError]:
    """`File_No` header, then one `two_col-K.txt` / `multi_col-K.txt` per line."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f))
    if not rows or [c.strip() for c in rows[0]][:1] != ["File_No"]:
        raise BadInputError(path, f"expected header 'File_No', got {rows[:1]!r}", row=0)
    entries: list[SplitEntry | BadInputError] = []
    for number, row in enumerate(rows[1:], start=1):
        if not row or not "".join(row).strip():
            continue
        name = row[0].strip()
        name = name[:-4] if name.endswith(".txt") else name
        if len(row) != 1 or not _NAME.match(name):
            entries.append(BadInputError(path, f"malformed File_No {row!r}", row=number))
            continue
        entries.append(SplitEntry(name=name, where=f"{os.path.basename(path)} row {number}"))
    return entries


def read_text(path: str, what: str, where: str) -> str:
    """A one-item text file (title, caption): trailing newlines dropped, the rest as written."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().rstrip("\r\n")
    except FileNotFoundError as e:
        raise BadInputError(path, f"{what} file not found (listed in {where})") from e
    except UnicodeDecodeError as e:
        raise BadInputError(path, f"{what} file is not UTF-8: {e}") from e


def read_table(path: str, where: str) -> tuple[list[str], list[list[str]]]:
    """A Statista `data/<N>.csv`: header row + rows, cells kept as the strings written."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            rows = [row for row in csv.reader(f, strict=True) if row]
    except FileNotFoundError as e:
        raise BadInputError(path, f"data table not found (listed in {where})") from e
    except (csv.Error, UnicodeDecodeError) as e:
        raise BadInputError(path, f"cannot parse CSV: {e}") from e
    if not rows:
        raise BadInputError(path, "empty data table")
    header, body = rows[0], rows[1:]
    for number, row in enumerate(body, start=1):
        if len(row) > len(header):
            raise BadInputError(
                path, f"{len(row)} cells where the header has {len(header)}", row=number
            )
    return header, body


def read_boxes(path: str) -> list[tuple[str, list[float]]]:
    """OCR boxes `[{"sentence", "bounding_box": [x_min, y_min, x_max, y_max]}]` (Pew format).

    A missing file gives no boxes (optional input); a malformed one is bad input.
    """
    if not os.path.isfile(path):
        return []
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise BadInputError(path, f"cannot parse JSON: {e}") from e
    if not isinstance(data, list):
        raise BadInputError(path, f"expected a list, got {type(data).__name__}")
    out = []
    for position, item in enumerate(data):
        box = item.get("bounding_box") if isinstance(item, dict) else None
        text = item.get("sentence") if isinstance(item, dict) else None
        ok_box = isinstance(box, list) and len(box) == 4
        if not isinstance(text, str) or not ok_box or not all(_is_number(v) for v in box):
            raise BadInputError(path, f"malformed OCR entry {item!r:.100}", row=position)
        out.append((text, [float(v) for v in box]))
    return out


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_metadata(path: str, required: tuple[str, ...]) -> list[dict[str, str]]:
    """A `metadata.csv` as dicts (quoted multi-line captions, UTF-8 curly quotes).

    A header without the `required` columns is bad input, even where the file is optional: a
    file written with another delimiter reads as one column, and every chart would silently
    lose what the file says about it.
    """
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f, strict=True)
            header = list(reader.fieldnames or [])
            rows = list(reader)
    except (csv.Error, UnicodeDecodeError) as e:
        raise BadInputError(path, f"cannot parse CSV: {e}") from e
    if not set(required) <= set(header):
        hint = ""
        if len(header) == 1 and any(d in header[0] for d in ";\t|"):
            hint = " (written with another delimiter than ','?)"
        raise BadInputError(
            path, f"needs columns {', '.join(required)}; header is {header!r:.200}{hint}", row=0
        )
    return rows


def statista_chart_types(folder: str) -> dict[str, str]:
    """`id` -> lower-cased `chartType` from a Statista `metadata.csv`, if the folder has one.

    Only `id` and `chartType` are read (the columns third-party loaders use); that `id` is the
    file number <N> is [unverified] against the real file. Without the file every chart type is
    `unknown`; a file without those columns stops the build (`read_metadata`).
    """
    path = os.path.join(folder, "metadata.csv")
    if not os.path.isfile(path):
        return {}
    rows = read_metadata(path, ("id", "chartType"))
    return {(r["id"] or "").strip(): (r["chartType"] or UNKNOWN).strip().lower() for r in rows}


def split_name(name: str) -> tuple[str, str]:
    """`two_col-21156` -> ("two_col", "21156")."""
    match = _NAME.match(name)
    assert match is not None  # read_split_file only lets matching names through
    return match.group("kind"), match.group("number")


@dataclasses.dataclass(frozen=True)
class PewChart:
    folder: str  # dataset/ or dataset/multiColumn/
    row: dict[str, str]  # its metadata.csv row
    where: str  # "<metadata file> row N"


def pew_index(base: str) -> dict[str, PewChart]:
    """`old_id` -> chart, from `metadata.csv` of `dataset/` and (if present) `multiColumn/`.

    The multiColumn metadata file is [unverified]; it is read the same way when it exists.
    """
    index: dict[str, PewChart] = {}
    for folder in (base, os.path.join(base, "multiColumn")):
        path = os.path.join(folder, "metadata.csv")
        if not os.path.isfile(path):
            continue
        rows = read_metadata(path, ("id", "old_id"))
        for number, row in enumerate(rows, start=1):
            old_id = (row.get("old_id") or "").strip()
            if not old_id:
                continue
            if old_id in index:
                raise BadInputError(path, f"old_id {old_id!r} listed twice", row=number)
            index[old_id] = PewChart(folder, row, f"{os.path.basename(path)} row {number}")
    return index


def pew_path(chart: PewChart, column: str, sub: str, ext: str) -> str:
    """A Pew file: the metadata's `<column>` path (e.g. imgs/1.png) or `<sub>/<id>.<ext>`."""
    rel = (chart.row.get(column) or "").strip()
    if not rel:
        rel = f"{sub}/{chart.row['id'].strip()}.{ext}"
    return os.path.join(chart.folder, rel)
