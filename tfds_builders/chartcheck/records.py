"""Reading the ChartCheck release files into claim records (pure Python; docs/corpora.md §1).

The CSV release (`chartfc_dataset_wikicommons:data/dataset/*.csv`) is canonical; the JSON variant
(`ChartCheck:data/ChartCheck_final/*.json`) is read only when a split has no CSV. Readers yield a
`ClaimRecord` or a `BadInputError` per row, so the builder decides between failing and skipping;
problems with a whole file (unreadable, wrong header) raise at once.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import urllib.parse
from collections.abc import Iterator
from typing import Any

from tfds_builders.common.bad_input import BadInputError

REQUIRED_COLUMNS = ("chart_img", "caption", "label", "claim", "explanation")
# The index column is a pandas index written without a name; pandas re-reads it as "Unnamed: 0".
INDEX_COLUMN_NAMES = ("", "Unnamed: 0")
SUPPORTS, REFUTES = "supports", "refutes"
_TRUE = ("true", "1")
_FALSE = ("false", "0")


@dataclasses.dataclass(frozen=True)
class ClaimRecord:
    source: str  # the file the record came from
    row: str  # where in that file, for error messages
    index: str  # the index column (CSV) or `id` (JSON) as written
    chart_img: str
    caption: str
    label_raw: str
    label: str  # SUPPORTS or REFUTES
    claim: str
    explanation: str


def normalize_label(value: Any) -> str | None:
    """TRUE/True/true/1/JSON true -> supports; FALSE/.../0/false -> refutes; else None."""
    if isinstance(value, bool):
        return SUPPORTS if value else REFUTES
    text = str(value).strip().lower()
    if text in _TRUE:
        return SUPPORTS
    if text in _FALSE:
        return REFUTES
    return None


def _text(value: Any) -> str:
    # JSON variant: literal NaN (and null) stand for an empty field (docs/corpora.md §1.5).
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def _record(path: str, row: str, index: str, fields: dict[str, Any]) -> ClaimRecord | BadInputError:
    if index == "":
        return BadInputError(path, "empty index/id", row=row)
    chart_img = _text(fields.get("chart_img")).strip()
    if not chart_img:
        return BadInputError(path, "empty chart_img", row=row)
    label = normalize_label(fields.get("label"))
    if label is None:
        return BadInputError(
            path, f"label {fields.get('label')!r} is not TRUE/FALSE/True/False", row=row
        )
    return ClaimRecord(
        source=path,
        row=row,
        index=index,
        chart_img=chart_img,
        caption=_text(fields.get("caption")),
        label_raw=_text(fields.get("label")),
        label=label,
        claim=_text(fields.get("claim")),
        explanation=_text(fields.get("explanation")),
    )


def read_csv(path: os.PathLike | str) -> Iterator[ClaimRecord | BadInputError]:
    """Rows of a release CSV: quoted multi-line fields, unnamed index, extra `Unnamed: 6`."""
    path = os.fspath(path)
    # utf-8-sig: the release has no BOM, but a CSV re-saved by a spreadsheet may.
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, strict=True)
        try:
            header = next(reader)
        except StopIteration:
            raise BadInputError(path, "empty file (no header)") from None
        except (csv.Error, UnicodeDecodeError) as e:
            raise BadInputError(path, f"cannot parse header: {e}", row=0) from e
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing or header[0] not in INDEX_COLUMN_NAMES:
            raise BadInputError(
                path,
                f"header {header!r} lacks {missing or 'the unnamed index first column'}; "
                f"expected ',{','.join(REQUIRED_COLUMNS)}' (test_two.csv adds 'Unnamed: 6')",
                row=0,
            )
        # Columns other than the index and REQUIRED_COLUMNS (test_two's `Unnamed: 6`, a stray
        # second explanation in one row) are ignored.
        positions = {name: header.index(name) for name in REQUIRED_COLUMNS}
        number, line_end = 0, reader.line_num
        while True:
            line_start = line_end + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except (csv.Error, UnicodeDecodeError) as e:
                # The reader's position is unreliable after a quoting error: stop the file.
                where = f"near line {line_start}"
                raise BadInputError(path, f"CSV syntax error: {e}", row=where) from e
            number += 1
            line_end = reader.line_num
            where = f"{number} (line {line_start})"
            if not row:  # a blank line between records
                number -= 1
                continue
            if len(row) != len(header):
                yield BadInputError(
                    path, f"{len(row)} fields where the header has {len(header)}", row=where
                )
                continue
            fields = {name: row[pos] for name, pos in positions.items()}
            yield _record(path, where, row[0], fields)


def read_json(path: os.PathLike | str) -> Iterator[ClaimRecord | BadInputError]:
    """Objects of a ChartCheck_final JSON file (types vary by file; docs/corpora.md §1.5).

    Python's json accepts the literal NaN these files contain. `validation.json` has no `id`
    (only the non-unique `db_id`), so its records are indexed by position; that the position
    equals val.csv's index column is [unverified]. The schema of `train.json` is [unverified].
    """
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise BadInputError(path, f"cannot parse JSON: {e}") from e
    if not isinstance(data, list):
        raise BadInputError(path, f"expected a list of objects, got {type(data).__name__}")
    for position, obj in enumerate(data):
        where = f"{position} (list position)"
        if not isinstance(obj, dict):
            yield BadInputError(path, f"expected an object, got {type(obj).__name__}", row=where)
            continue
        index = obj.get("id", position)
        yield _record(path, where, _text(index), obj)


def image_name_candidates(chart_img: str) -> list[str]:
    """Names an image may have on disk: the URL basename raw, unquoted once, unquoted twice.

    Basenames are double-percent-encoded (`Lock_%2526_dam_10.png` is "Lock_&_dam_10.png") and a
    download tool may have saved either form (docs/corpora.md §1.6).
    """
    base = chart_img.rsplit("/", 1)[-1]
    names = [base, urllib.parse.unquote(base), urllib.parse.unquote(urllib.parse.unquote(base))]
    return list(dict.fromkeys(n for n in names if n and "/" not in n))


class ImageFolder:
    """Finds an image of the flat `images/` folder by its URL, trying every name form."""

    def __init__(self, folder: os.PathLike | str):
        self.folder = os.fspath(folder)
        self._by_lower: dict[str, str] | None = None

    def find(self, chart_img: str) -> str | None:
        names = image_name_candidates(chart_img)
        for name in names:
            path = os.path.join(self.folder, name)
            if os.path.isfile(path):
                return path
        # Last resort: an extension case changed by a download tool (`.PNG` saved as `.png`).
        if self._by_lower is None:
            self._by_lower = {n.lower(): n for n in sorted(os.listdir(self.folder))}
        for name in names:
            found = self._by_lower.get(name.lower())
            if found is not None:
                return os.path.join(self.folder, found)
        return None
