"""The metric-JSON writer shared by every task (docs/design.md §5 schema, §8 rules).

metrics.json:
  {"task", "split", "step", "num_examples", "metrics", "breakdowns", "unavailable", "provenance"}
Also JSONL reading/writing for predictions and references, run provenance and a breakdown plot.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import re
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chartjax import file_modes

__all__ = [
    "build_metrics",
    "is_bounded",
    "plot_breakdown",
    "provenance",
    "validate_metrics",
    "write_metrics",
]

REQUIRED_KEYS = ("task", "split", "step", "num_examples", "metrics")
OPTIONAL_KEYS = ("breakdowns", "unavailable", "provenance")
SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")
# Metrics in native units (docs/design.md §8) and counts/lengths; every other metric is in [0, 1].
UNBOUNDED_WORDS = ("cider", "bleurt", "perplexity", "ppl", "loss")  # any "_"-separated word
UNBOUNDED_PREFIXES = ("num_", "pred_")
UNBOUNDED_SUFFIXES = ("_count", "_length", "_len", "length_ratio")
UNBOUNDED_NAMES = ("n", "support")


def is_bounded(name: str) -> bool:
    """Whether metric ``name`` must lie in [0, 1] (docs/design.md §8).

    Unbounded: names with a word cider*, bleurt*, perplexity*, ppl* or loss* (``cider_d``,
    ``explanation_bleurt``, ``barlow_twins_loss``), counts (``n``, ``support``, ``num_*``, ``pred_*``, ``*_count``) and
    lengths (``*_length``, ``*_len``, ``*length_ratio``).
    """
    words = name.split("_")
    return not (
        name in UNBOUNDED_NAMES
        or any(w.startswith(UNBOUNDED_WORDS) for w in words)
        or name.startswith(UNBOUNDED_PREFIXES)
        or name.endswith(UNBOUNDED_SUFFIXES)
    )


def _number(value: Any, where: str) -> int | float:
    """Plain int/float from a Python or numpy number; rejects bools, NaN and infinities."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{where}: expected a number, got {type(value).__name__} {value!r}")
    out = int(value) if isinstance(value, numbers.Integral) else float(value)
    if not math.isfinite(out):
        raise ValueError(f"{where}: not a finite number: {out!r}")
    return out


def _check_value(name: str, value: Any, where: str) -> int | float:
    out = _number(value, where)
    if is_bounded(name) and not 0.0 <= out <= 1.0:
        raise ValueError(f"{where}: {out!r} is outside [0, 1] (bounded metrics are fractions)")
    return out


def _normalized(obj: Mapping[str, Any]) -> dict:
    """Validated copy with numpy numbers turned into Python numbers."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"metrics object: expected a mapping, got {type(obj).__name__}")
    unknown = sorted(set(obj) - set(REQUIRED_KEYS) - set(OPTIONAL_KEYS))
    if unknown:
        raise ValueError(f"metrics object: unknown top-level field(s) {unknown}")
    missing = [k for k in REQUIRED_KEYS if k not in obj]
    if missing:
        raise ValueError(f"metrics object: missing field(s) {missing}")
    for key in ("task", "split"):
        if not isinstance(obj[key], str) or not obj[key]:
            raise ValueError(f"{key}: expected a non-empty string, got {obj[key]!r}")
    step = obj["step"]
    if step is not None and (isinstance(step, bool) or not isinstance(step, numbers.Integral)):
        raise ValueError(f"step: expected an integer or null, got {step!r}")
    if step is not None and step < 0:
        raise ValueError(f"step: must be >= 0, got {step}")
    num = obj["num_examples"]
    if isinstance(num, bool) or not isinstance(num, numbers.Integral) or num < 0:
        raise ValueError(f"num_examples: expected an integer >= 0, got {num!r}")

    metrics = obj["metrics"]
    if not isinstance(metrics, Mapping):
        raise ValueError("metrics: expected a mapping of name -> number")
    out_metrics = {}
    for name, value in metrics.items():
        if not isinstance(name, str) or not SNAKE_CASE.match(name):
            raise ValueError(f"metrics.{name}: metric names must be snake_case")
        out_metrics[name] = _check_value(name, value, f"metrics.{name}")

    unavailable = obj.get("unavailable") or {}
    if not isinstance(unavailable, Mapping):
        raise ValueError("unavailable: expected a mapping of name -> reason")
    for name, reason in unavailable.items():
        if not isinstance(name, str) or not SNAKE_CASE.match(name):
            raise ValueError(f"unavailable.{name}: metric names must be snake_case")
        if not isinstance(reason, str) or not reason:
            raise ValueError(f"unavailable.{name}: the reason must be a non-empty string")
        if name in out_metrics:
            raise ValueError(f"unavailable.{name}: also present in metrics")

    breakdowns = obj.get("breakdowns") or {}
    if not isinstance(breakdowns, Mapping):
        raise ValueError("breakdowns: expected {breakdown: {group: {metric: number}}}")
    out_breakdowns: dict[str, dict] = {}
    for bname, groups in breakdowns.items():
        if not isinstance(bname, str) or not SNAKE_CASE.match(bname):
            raise ValueError(f"breakdowns.{bname}: breakdown names must be snake_case")
        if not isinstance(groups, Mapping):
            raise ValueError(f"breakdowns.{bname}: expected a mapping of group -> metrics")
        out_groups = {}
        for group, entry in groups.items():
            where = f"breakdowns.{bname}.{group}"
            if not isinstance(group, str):
                raise ValueError(f"{where}: group names must be strings")
            if not isinstance(entry, Mapping):
                raise ValueError(f"{where}: expected a mapping of metric -> number")
            out_groups[group] = {
                str(m): _check_value(str(m), v, f"{where}.{m}") for m, v in entry.items()
            }
        out_breakdowns[bname] = out_groups

    prov = obj.get("provenance") or {}
    if not isinstance(prov, Mapping):
        raise ValueError("provenance: expected a mapping")
    try:
        json.dumps(prov, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"provenance: not JSON-serializable: {err}") from err

    return {
        "task": obj["task"],
        "split": obj["split"],
        "step": None if step is None else int(step),
        "num_examples": int(num),
        "metrics": out_metrics,
        "breakdowns": out_breakdowns,
        "unavailable": dict(unavailable),
        "provenance": dict(prov),
    }


def validate_metrics(obj: Mapping[str, Any]) -> None:
    """Raises ValueError naming the offending field if ``obj`` is not a valid metrics.json."""
    _normalized(obj)


def build_metrics(
    *,
    task: str,
    split: str,
    step: int | None,
    num_examples: int,
    metrics: Mapping[str, Any],
    breakdowns: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    unavailable: Mapping[str, str] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> dict:
    """A validated metrics.json object (all eight keys of docs/design.md §5; absent parts are
    empty mappings)."""
    return _normalized(
        {
            "task": task,
            "split": split,
            "step": step,
            "num_examples": num_examples,
            "metrics": dict(metrics),
            "breakdowns": dict(breakdowns or {}),
            "unavailable": dict(unavailable or {}),
            "provenance": dict(provenance or {}),
        }
    )


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        file_modes.as_new_file(fd)  # mkstemp's 0600 would hide results from teammates
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_metrics(path: str | os.PathLike, obj: Mapping[str, Any]) -> None:
    """Validates ``obj`` and writes it as indented JSON, atomically (temp file + rename)."""
    normalized = _normalized(obj)
    atomic_write_text(path, json.dumps(normalized, indent=2, allow_nan=False) + "\n")


def _git_short_sha() -> str:
    try:
        result = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    sha = result.stdout.strip()
    return sha if result.returncode == 0 and sha else "unknown"


def _chartjax_version() -> str:
    from chartjax.version import __version__

    return __version__


def provenance(
    config_text: str | None = None,
    checkpoint: str | os.PathLike | None = None,
    libraries: Mapping[str, str] | None = None,
) -> dict:
    """Where a metrics.json came from.

    Returns ``{"chartjax": version, "git": short sha or "unknown", "config_sha256": hex or None,
    "checkpoint": str or None, "libraries": {name: version or metric signature}}``.
    """
    return {
        "chartjax": _chartjax_version(),
        "git": _git_short_sha(),
        "config_sha256": (
            hashlib.sha256(config_text.encode("utf-8")).hexdigest()
            if config_text is not None
            else None
        ),
        "checkpoint": None if checkpoint is None else str(checkpoint),
        "libraries": dict(libraries or {}),
    }


def plot_breakdown(
    breakdowns: Mapping[str, Mapping[str, Mapping[str, Any]]],
    path: str | os.PathLike,
    metric: str = "accuracy",
    title: str | None = None,
) -> None:
    """PNG bar chart: one subplot per breakdown that reports ``metric``, one bar per group.

    Groups with ``<metric>_ci95_low``/``_high`` get error bars. Raises ValueError if no
    breakdown reports ``metric``.
    """
    # Figure + Agg canvas directly: no pyplot global state, no display needed.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    panels = []
    for name, groups in breakdowns.items():
        rows = [(g, e) for g, e in groups.items() if metric in e]
        if rows:
            panels.append((name, rows))
    if not panels:
        raise ValueError(f"plot_breakdown: no breakdown reports {metric!r}")
    width = max(6.0, max(0.45 * len(rows) for _, rows in panels) + 2.0)
    fig = Figure(figsize=(min(width, 24.0), 3.2 * len(panels)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (name, rows) in zip(axes, panels):
        labels = [g for g, _ in rows]
        values = [float(e[metric]) for _, e in rows]
        low_key, high_key = f"{metric}_ci95_low", f"{metric}_ci95_high"
        yerr = None
        if all(low_key in e and high_key in e for _, e in rows):
            yerr = [
                [max(0.0, v - float(e[low_key])) for v, (_, e) in zip(values, rows)],
                [max(0.0, float(e[high_key]) - v) for v, (_, e) in zip(values, rows)],
            ]
        ax.bar(range(len(values)), values, yerr=yerr, capsize=3, color="tab:blue")
        ax.set_xticks(
            range(len(values)),
            labels,
            rotation=45 if len(labels) > 6 else 0,
            ha="right" if len(labels) > 6 else "center",
        )
        ax.set_ylabel(metric)
        ax.set_title(name)
        if is_bounded(metric):
            ax.set_ylim(0.0, 1.0)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title or f"{metric} by group")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
