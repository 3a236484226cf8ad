"""Reading CHART-Info inputs, shared by tasks 1-5 (``chart_info.py``) and 6a/6b
(``chart_info_series.py``): the ``compat`` modes and the official per-image JSON objects.

Inputs are ``{id: parsed json}`` for ground truth and predictions; a task's output is
``obj["task<N>"]["output"]``. Both metric modules import this one, never each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
