"""Prediction files and their ids: the one JSONL reader and writer, id-keyed rows, id checks.

Used by evaluation and inference (writing predictions.jsonl), by `chartjax-score` (reading
predictions, references and folders of per-image JSON) and by the tasks that read another run's
predictions (DePlot tables, predicted labels). Errors name the file and the line or the ids.
Plain Python: no jax or TensorFlow.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from chartjax.metrics.report import atomic_write_text


class PredictionFileError(ValueError):
    """A prediction or reference file that cannot be used; the message names file and line."""


class IdRows(dict):
    """`{id: row}` read from `path`, remembering where each id came from: `where(id)` is
    `<path>:<line>` for a JSONL file, `<path>/<id>.json` for a folder of per-image JSON."""

    def __init__(self, rows=(), *, path, lines: Mapping[str, int] | None = None):
        super().__init__(rows)
        self.path = str(path)
        self.lines = dict(lines) if lines is not None else None

    def where(self, key: str) -> str:
        if self.lines is None:
            return os.path.join(self.path, f"{key}.json")
        return f"{self.path}:{self.lines[key]}" if key in self.lines else self.path


def write_jsonl(path: str | os.PathLike, rows: Iterable[Mapping[str, Any]]) -> None:
    """Writes one JSON object per line (UTF-8, atomically); errors name the row."""
    lines = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ValueError(f"{path}: row {i}: expected a JSON object, got {type(row).__name__}")
        try:
            lines.append(json.dumps(dict(row), ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path}: row {i}: not JSON-serializable: {err}") from err
    atomic_write_text(path, "".join(line + "\n" for line in lines))


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """Yields (line number, object) per non-blank line; errors name file and line."""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise PredictionFileError(
                    f"{path}:{lineno}: invalid UTF-8 ({err.reason})"
                ) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise PredictionFileError(f"{path}:{lineno}: invalid JSON: {err.msg}") from None
            if not isinstance(row, dict):
                raise PredictionFileError(
                    f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}"
                )
            yield lineno, row


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Reads one JSON object per line; blank lines are skipped; errors name file and line."""
    return [row for _, row in iter_jsonl(path)]


def read_id_rows(
    path: str | os.PathLike, what: str, *, required: Sequence[str] = ("id",)
) -> IdRows:
    """`{id: row}` of a JSONL file (an IdRows: each id's line number is kept); a row without a
    `required` field or a duplicate id is an error naming the file and line."""
    rows: dict[str, dict] = {}
    lines: dict[str, int] = {}
    try:
        loaded = list(iter_jsonl(path))
    except OSError as err:
        raise PredictionFileError(f"{what}: cannot read {path}: {err}") from None
    for lineno, row in loaded:
        missing = [k for k in required if k not in row]
        if missing:
            raise PredictionFileError(
                f"{what} {path}:{lineno}: no {' / '.join(map(repr, missing))} field"
            )
        key = str(row["id"])
        if key in rows:
            raise PredictionFileError(
                f"{what} {path}:{lineno}: duplicate id {key!r} (first on line {lines[key]})"
            )
        rows[key], lines[key] = row, lineno
    return IdRows(rows, path=path, lines=lines)


def read_json_dir(path: str | os.PathLike, what: str) -> IdRows:
    """`{id: parsed JSON}` of a folder of `<id>.json` files (nested folders: the relative path);
    an IdRows whose `where(id)` is the file."""
    root = Path(path)
    if not root.is_dir():
        raise PredictionFileError(f"{what}: {path} is not a folder of <id>.json files")
    out = {}
    for file in sorted(root.rglob("*.json")):
        try:
            out[file.relative_to(root).with_suffix("").as_posix()] = json.loads(
                file.read_text("utf-8")
            )
        except (OSError, ValueError) as err:
            raise PredictionFileError(f"{file}: invalid JSON: {err}") from None
    if not out:
        raise PredictionFileError(f"{what}: no .json file under {path}")
    return IdRows(out, path=path)


def sample_ids(ids) -> str:
    ids = sorted(ids)
    return ", ".join(map(repr, ids[:5])) + (f" (and {len(ids) - 5} more)" if len(ids) > 5 else "")


def align_ids(ref_ids, pred_ids, *, allow_missing: bool, what: str = "prediction") -> frozenset:
    """Checks the id sets; returns the missing ids (allowed only with allow_missing)."""
    extra = set(pred_ids) - set(ref_ids)
    if extra:
        raise PredictionFileError(
            f"{len(extra)} {what} id(s) not in the references: {sample_ids(extra)}"
        )
    missing = set(ref_ids) - set(pred_ids)
    if missing and not allow_missing:
        raise PredictionFileError(
            f"{len(missing)} reference id(s) have no prediction: {sample_ids(missing)} "
            "(--allow_missing scores them as wrong)"
        )
    return frozenset(missing)


def require_ids(rows: Mapping[str, Any], ids: Iterable[str], path, what: str, split: str) -> None:
    """Fails when `rows` (read from `path`) lacks one of `ids`, naming the file and the id."""
    missing = [i for i in ids if i not in rows]
    if missing:
        raise KeyError(
            f"{what} {path} has no row for id {missing[0]!r} (split {split!r}; "
            f"{len(missing)} ids of that split missing)"
        )


def lookup(rows: Mapping[str, dict], example_id: str, path, what: str) -> dict:
    if example_id not in rows:
        raise KeyError(f"{what} {path} has no row for id {example_id!r}")
    return rows[example_id]


def field_of(rows: Sequence[Mapping], name: str) -> list | None:
    """Every row's `name`, or None unless all rows have it (optional breakdown fields)."""
    return [r[name] for r in rows] if rows and all(name in r for r in rows) else None


def located(rows: Mapping[str, Any], key: str) -> str:
    """`<file>:<line> (id 'x')` for rows read from a file (an IdRows), else `reference id 'x'`
    (a TFDS split's rows)."""
    if isinstance(rows, IdRows):
        return f"{rows.where(key)} (id {key!r})"
    return f"reference id {key!r}"


def as_written(value) -> str:
    """A JSON value as a file writes it (12, null, NaN, "Filter"), cut to 40 characters."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_text(value) -> bool:
    return isinstance(value, str)


def _is_text_list(value) -> bool:
    return isinstance(value, list) and all(map(_is_text, value))


def _is_texts(value) -> bool:
    return _is_text(value) or (_is_text_list(value) and bool(value))


# Field types for check_fields: (what the field must be, the test).
FieldType = tuple[str, Callable[[Any], bool]]
TEXT: FieldType = ("a string", _is_text)
TEXT_LIST: FieldType = ("a list of strings", _is_text_list)
TEXTS: FieldType = ("a string or a non-empty list of strings", _is_texts)  # alternatives


def check_fields(rows: Mapping[str, Mapping], types: Mapping[str, FieldType]) -> None:
    """Refuses the first row (in file order) with a field of the wrong type, naming the file,
    line, id and field: a wrong type crashes a metric, or worse scores silently (the string
    "Filter" as a list of reasoning types is six one-letter types)."""
    for key, row in rows.items():
        for name, (expected, ok) in types.items():
            if name in row and not ok(row[name]):
                raise PredictionFileError(
                    f"{located(rows, key)}: field {name!r} is {as_written(row[name])}; "
                    f"expected {expected}"
                )
