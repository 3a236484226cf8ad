"""The items of a JSON array read one at a time (ijson), so a release's multi-GB split files
(FigureQA's train1 `qa_pairs.json` and `annotations.json`: about 4.6 GB together) never sit in
memory whole. Errors name the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import ijson
from etils import epath


def array_items(path: epath.Path, prefix: str, shape: str) -> Iterator[Any]:
    """Yields the items of the array at ijson `prefix` ("item": the top-level array;
    "qa_pairs.item": the array under key qa_pairs).

    Raises:
        FileNotFoundError: naming the file.
        ValueError: "<path>: malformed JSON: ..." or, when the array is not there,
            "<path>: expected <shape>".
    """
    path = epath.Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: file not found")
    count = 0
    try:
        with path.open("rb") as f:
            for item in ijson.items(f, prefix, use_float=True):
                count += 1
                yield item
    except ijson.JSONError as e:
        raise ValueError(f"{path}: malformed JSON: {e}") from e
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: malformed JSON: not UTF-8 ({e})") from e
    if count == 0 and not _is_empty_array(path, prefix):
        raise ValueError(f"{path}: expected {shape}")


def _is_empty_array(path: epath.Path, prefix: str) -> bool:
    """Whether the file really holds an empty array at `prefix` (only read when none was
    found: telling an empty split from a file of another shape)."""
    value = json.loads(path.read_text(encoding="utf-8"))
    for key in prefix.split(".")[:-1]:
        if not isinstance(value, dict) or key not in value:
            return False
        value = value[key]
    return isinstance(value, list)
