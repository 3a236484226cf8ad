"""Reading CHART-Info inputs, shared by tasks 1-5 (``chart_info.py``) and 6a/6b
(``chart_info_series.py``): the ``compat`` modes and the official per-image JSON objects.

Inputs are ``{id: parsed json}`` for ground truth and predictions; a task's output is
``obj["task<N>"]["output"]``. Both metric modules import this one, never each other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from chartjax.metrics.prediction_files import IdRows, as_written

COMPAT_MODES = ("spec", "icdar2019", "chartinfo2020")


def check_compat(compat: str) -> None:
    if compat not in COMPAT_MODES:
        raise ValueError(f"compat must be one of {COMPAT_MODES}, got {compat!r}")


def task_output(obj: Mapping[str, Any] | None, task: str) -> Any:
    """``obj[task]["output"]``, or None when the task is absent, null or empty."""
    if not isinstance(obj, Mapping):
        return None
    entry = obj.get(task)
    if entry is None and task == "task4":
        entry = obj.get("task1.4")  # the 2022 PMC key for axis analysis
    if not isinstance(entry, Mapping):
        return None
    out = entry.get("output")
    return out if out else None


def annotated(gt: Mapping[str, Any], task: str) -> tuple[dict[str, Any], int]:
    """Ground-truth outputs of the images that annotate ``task``, and how many do not."""
    outputs = {k: task_output(v, task) for k, v in gt.items()}
    kept = {k: v for k, v in outputs.items() if v is not None}
    return kept, len(outputs) - len(kept)


def check_ids(gt: Mapping[str, Any], pred: Mapping[str, Any]) -> None:
    extra = sorted(set(pred) - set(gt))
    if extra:
        raise ValueError(f"{len(extra)} prediction id(s) not in the ground truth, e.g. {extra[:5]}")


def non_finite(value: Any) -> bool:
    """Whether a JSON value is a number, or a number's text, that is NaN or infinite (NaN,
    Infinity, "NaN", "inf", ...)."""
    if isinstance(value, bool):
        return False
    try:
        return not math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def refuse_non_finite(gt: Mapping[str, Any], image_id: str, values: Iterable[tuple[str, Any]]):
    """Refuses a ground-truth number that is NaN or infinite, naming the file (chartjax-score
    reads folders into an IdRows) and the field: no score means anything against it (a dropped
    "NaN" series scored an empty prediction 1.0)."""
    for field, value in values:
        if non_finite(value):
            where = gt.where(image_id) if isinstance(gt, IdRows) else f"ground truth {image_id!r}"
            raise ValueError(
                f"{where}: {field} is {as_written(value)}; a reference value must be a finite "
                "number"
            )


def entry_key(obj: Mapping[str, Any], task: str) -> str:
    """The key ``task_output`` reads ``task`` from (``task1.4`` for task 4 in the 2022 files)."""
    return "task1.4" if task == "task4" and obj.get("task4") is None else task
