"""Optional ChartCheck inputs: chart-type metadata and reasoning-type annotations.

Chart types come from `data/dataset/<type>.json` of the dataset repository (docs/corpora.md §1.6):
a list holding one list of `{"file_name", "type", ...}`, `file_name` percent-encoded once.
Reasoning types come from the code repository's
`data/annotation_reasoning_types/claim_explanation_test_{one,two}_ID_reasoning.json`
(docs/corpora.md §1.7), records like the validation JSON plus `"reasoning_types": [...]`. Their
exact keys are [unverified]: records are joined to claims by (image basename, claim text).
"""

from __future__ import annotations

import json
import os
import urllib.parse
from typing import Any

from tfds_builders.common.bad_input import BadInputError

from .records import image_name_candidates

CHART_TYPES = (
    "barchart_horizontal",
    "barchart_vertical",
    "line_chart",
    "pie_chart",
    "scatter_plot",
)
UNKNOWN = "unknown"
REASONING_FILES = {
    "test_one": "claim_explanation_test_one_ID_reasoning.json",
    "test_two": "claim_explanation_test_two_ID_reasoning.json",
}
# Where a user may have put the code repository's annotation folder inside manual_dir.
REASONING_DIRS = ("", "annotation_reasoning_types")


def _load_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise BadInputError(path, f"cannot parse JSON: {e}") from e


def _flatten_one_level(data: Any, path: str) -> list[dict[str, Any]]:
    if not isinstance(data, list):
        raise BadInputError(path, f"expected a list, got {type(data).__name__}")
    items = []
    for item in data:
        items.extend(item if isinstance(item, list) else [item])
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadInputError(path, f"expected an object, got {item!r:.80}", row=position)
    return items


class ChartTypes:
    """Image name -> chart type, from whichever `<type>.json` files are in manual_dir."""

    def __init__(self, manual_dir: os.PathLike | str):
        self.files: list[str] = []
        self._types: dict[str, set[str]] = {}
        for chart_type in CHART_TYPES:
            path = os.path.join(os.fspath(manual_dir), f"{chart_type}.json")
            if not os.path.isfile(path):
                continue
            self.files.append(path)
            for position, item in enumerate(_flatten_one_level(_load_json(path), path)):
                name = item.get("file_name")
                if not isinstance(name, str) or not name:
                    raise BadInputError(path, "entry without a file_name", row=position)
                found = str(item.get("type") or chart_type)
                # file_name is encoded once, chart_img basenames twice: index both forms.
                for key in dict.fromkeys((name, urllib.parse.unquote(name))):
                    self._types.setdefault(key, set()).add(found)

    def lookup(self, chart_img: str) -> str:
        for name in image_name_candidates(chart_img):
            types = self._types.get(name)
            if types:
                # A few names sit under two types (docs/corpora.md §1.6): the type is then unknown.
                return next(iter(types)) if len(types) == 1 else UNKNOWN
        return UNKNOWN


def _claim_key(chart_img: str, claim: str) -> tuple[str, str]:
    names = image_name_candidates(chart_img)
    return (names[-1] if names else "", " ".join(claim.split()))


class ReasoningTypes:
    """(image, claim) -> reasoning types, for the splits whose annotation file is present."""

    def __init__(self, manual_dir: os.PathLike | str):
        self.files: dict[str, str] = {}
        self._types: dict[str, dict[tuple[str, str], list[str]]] = {}
        for split, file_name in REASONING_FILES.items():
            for folder in REASONING_DIRS:
                path = os.path.join(os.fspath(manual_dir), folder, file_name)
                if os.path.isfile(path):
                    self.files[split] = path
                    self._types[split] = self._read(path)
                    break

    @staticmethod
    def _read(path: str) -> dict[tuple[str, str], list[str]]:
        table = {}
        for position, item in enumerate(_flatten_one_level(_load_json(path), path)):
            types = item.get("reasoning_types")
            if isinstance(types, str):  # tolerate "Filter, Compare" [unverified form]
                types = [t.strip() for t in types.split(",") if t.strip()]
            if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
                raise BadInputError(path, f"reasoning_types is {types!r:.80}", row=position)
            if not isinstance(item.get("chart_img"), str) or not isinstance(item.get("claim"), str):
                raise BadInputError(path, "record without chart_img/claim strings", row=position)
            table[_claim_key(item["chart_img"], item["claim"])] = list(types)
        return table

    def lookup(self, split: str, chart_img: str, claim: str) -> list[str]:
        return list(self._types.get(split, {}).get(_claim_key(chart_img, claim), []))
