"""ICDAR 2019 CHART-Infographics / CHART-Info 2020+ metrics, tasks 1-5 (docs/metrics.md §3).

Hand-written: the official scripts are not packages and crash on several inputs. Inputs are the
official per-image JSON objects, ``{id: parsed json}`` for ground truth and predictions (a
prediction needs only ``{"task<N>": {"output": ...}}``). Tasks 6a/6b are in
``chart_info_series.py`` and re-exported here; the input helpers both share (``compat`` modes,
``task_output``, ...) are in ``chart_info_inputs.py`` and re-exported too.

``compat``:
- ``"spec"`` (default): the documented definitions; cases the scripts crash on are scored by
  the definition (a ground-truth class without predictions has F = 0, and so on).
- ``"icdar2019"``: the 2019 scripts' behaviours (first IoU >= 0.5 match in task 2 with the +1
  pixel convention, the axis precision typo of task 4, averaging over prediction files in task
  5, the task 3 rule that an unknown id drops the rest of that file, ...).
- ``"chartinfo2020"``: the 2020+ scripts where they differ (polygon IoU without +1 in task 2,
  stacked/grouped ignored in task 1, ...).
Images whose ground truth does not annotate the task (``null`` or ``{}``) are skipped and counted
in ``num_unannotated``. A prediction id absent from the ground truth is an error.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import editdistance
import numpy as np

from chartjax.metrics.chart_info_inputs import (
    COMPAT_MODES,
    annotated,
    check_compat,
    check_ids,
    entry_key,
    refuse_non_finite,
    task_output,
)
from chartjax.metrics.chart_info_series import task6a, task6b
from chartjax.metrics.scores import Scores

__all__ = [
    "COMPAT_MODES",
    "annotated",
    "check_compat",
    "check_ids",
    "task1",
    "task2",
    "task3",
    "task4",
    "task5",
    "task6a",
    "task6b",
    "task_output",
]

SYNTH_ROLES = ("legend_label", "chart_title", "tick_label", "axis_title")


def _f(p: float, r: float) -> float:
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def _per_class_f(gt_sets: Mapping[str, set], pred_sets: Mapping[str, set]) -> tuple[dict, dict]:
    """Mean over ground-truth classes of per-class P/R/F (a class never predicted has P = 0)."""
    per_class = {}
    for label in sorted(gt_sets):
        g, r = gt_sets[label], pred_sets.get(label, set())
        hit = len(g & r)
        recall = hit / len(g)
        precision = hit / len(r) if r else 0.0
        per_class[label] = {
            "precision": precision,
            "recall": recall,
            "f1": _f(precision, recall),
            "n": len(g),
        }
    k = len(per_class)
    means = {m: sum(c[m] for c in per_class.values()) / k for m in ("f1", "precision", "recall")}
    return means, per_class


# --------------------------------------------------------------------------------------------
# Task 1: chart classification
# --------------------------------------------------------------------------------------------


def _single_series_bar(gt_obj: Mapping[str, Any]) -> bool:
    series = (task_output(gt_obj, "task6") or {}).get("data series")
    return isinstance(series, list) and len(series) == 1


def _to_grouped(label: str) -> str:
    return " ".join(["grouped", *label.split(" ")[1:]])


def task1(
    gt: Mapping[str, Any],
    pred: Mapping[str, Any],
    *,
    compat: str = "spec",
    ambiguous_ids: Iterable[str] | None = None,
) -> Scores:
    """Average per-class F over the ground-truth classes (+ mean P, R and overall accuracy).

    Single-series stacked/grouped bars are interchangeable: ``ambiguous_ids`` lists them (the
    2019 ``single_bars.txt``); by default they are the stacked/grouped bar charts whose ground
    truth has exactly one data series [inferred: single_bars.txt lists such charts]. For those,
    "stacked X" and "grouped X" both become "grouped X" in the truth and in any prediction that
    contains "stacked" or "grouped". ``chartinfo2020`` drops the first word of any prediction
    containing "stacked"/"grouped" (only the orientation counts).
    """
    check_compat(compat)
    check_ids(gt, pred)
    truths, skipped = annotated(gt, "task1")
    if ambiguous_ids is None:
        ambiguous = {k for k in truths if _single_series_bar(gt[k])}
    else:
        ambiguous = set(ambiguous_ids)
    gt_sets: dict[str, set] = {}
    pred_sets: dict[str, set] = {}
    correct = 0
    for image_id, output in truths.items():
        truth = str(output["chart_type"]).lower().strip()
        is_ambiguous = image_id in ambiguous and ("stacked" in truth or "grouped" in truth)
        if is_ambiguous:
            truth = _to_grouped(truth)
        gt_sets.setdefault(truth, set()).add(image_id)
        out = task_output(pred.get(image_id), "task1")
        if out is None:
            continue  # missing prediction: lowers recall
        label = out["chart_type"] if isinstance(out, Mapping) else out
        label = str(label).lower().strip()
        if is_ambiguous and ("grouped" in label or "stacked" in label):
            label = _to_grouped(label)
        if compat == "chartinfo2020" and ("stacked" in label or "grouped" in label):
            label = " ".join(label.split(" ")[1:])
        pred_sets.setdefault(label, set()).add(image_id)
        correct += label == truth
    if not gt_sets:
        raise ValueError("task1: no ground-truth image annotates task 1")
    means, per_class = _per_class_f(gt_sets, pred_sets)
    n = sum(len(s) for s in gt_sets.values())
    return Scores(
        metrics={**means, "accuracy": correct / n, "num_unannotated": skipped},
        breakdowns={"chart_type": per_class},
    )


# --------------------------------------------------------------------------------------------
# Task 2: text detection and recognition
# --------------------------------------------------------------------------------------------


def sanitize_text(text: str) -> str:
    """Newlines to spaces, lower-case, strip; LaTeX-like text through unicodeit."""
    text = text.replace("\n", " ").replace("\r", " ").lower().strip()
    if "\\" in text or "_{" in text or "^{" in text:
        import unicodeit

        text = unicodeit.replace(text)
    return text


def _block_geometry(block: Mapping[str, Any]):
    if "polygon" in block:
        p = block["polygon"]
        return "poly", [(float(p[f"x{i}"]), float(p[f"y{i}"])) for i in range(4)]
    bb = block["bb"]
    x0, y0 = float(bb["x0"]), float(bb["y0"])
    return "box", (x0, y0, x0 + float(bb["width"]), y0 + float(bb["height"]))


def _iou(a, b, plus_one: bool) -> float:
    (kind_a, ga), (kind_b, gb) = a, b
    if kind_a == "box" and kind_b == "box":
        one = 1.0 if plus_one else 0.0
        iw = min(ga[2], gb[2]) - max(ga[0], gb[0]) + one
        ih = min(ga[3], gb[3]) - max(ga[1], gb[1]) + one
        inter = max(iw, 0.0) * max(ih, 0.0)
        area_a = (ga[2] - ga[0] + one) * (ga[3] - ga[1] + one)
        area_b = (gb[2] - gb[0] + one) * (gb[3] - gb[1] + one)
        union = area_a + area_b - inter
        return inter / union if union > 0 else 0.0
    from shapely.geometry import Polygon, box

    def shape(kind, g):
        return Polygon(g).buffer(0) if kind == "poly" else box(*g)

    sa, sb = shape(kind_a, ga), shape(kind_b, gb)
    union = sa.union(sb).area
    return sa.intersection(sb).area / union if union > 0 else 0.0


def _text_blocks(output: Mapping[str, Any] | None) -> list[tuple[Any, str]]:
    blocks = []
    for block in (output or {}).get("text_blocks", []) or []:
        text = sanitize_text(str(block.get("text", "")))
        if "__" in text:  # the official scripts drop these blocks from both sides
            continue
        blocks.append((_block_geometry(block), text))
    return blocks


def _image_task2(gt_blocks, pred_blocks, compat: str) -> tuple[float, float]:
    if not gt_blocks:
        return (1.0, 1.0) if not pred_blocks else (0.0, 1.0)
    if not pred_blocks:
        return 0.0, 0.0
    plus_one = compat == "icdar2019"
    det = rec = 0.0
    for geometry, text in gt_blocks:
        ious = [_iou(geometry, p[0], plus_one) for p in pred_blocks]
        ok = [i for i, v in enumerate(ious) if v >= 0.5]
        if not ok:
            continue
        # The scripts take the first prediction over the threshold; the spec the best one.
        r = ok[0] if compat != "spec" else max(ok, key=lambda i: ious[i])
        det += ious[r]
        if text:
            rec += max(0.0, 1.0 - editdistance.eval(text, pred_blocks[r][1]) / len(text))
        else:  # an empty ground-truth text divides by zero in the scripts
            rec += float(pred_blocks[r][1] == "")
    return det / max(len(gt_blocks), len(pred_blocks)), rec / len(gt_blocks)


def task2(gt: Mapping[str, Any], pred: Mapping[str, Any], *, compat: str = "spec") -> Scores:
    """Detection (IoU) and recognition (1 - NCER) scores per image, averaged over all
    ground-truth images (a missing prediction scores 0), and their harmonic mean."""
    check_compat(compat)
    check_ids(gt, pred)
    truths, skipped = annotated(gt, "task2")
    if not truths:
        raise ValueError("task2: no ground-truth image annotates task 2")
    det_sum = rec_sum = 0.0
    for image_id, output in truths.items():
        if image_id not in pred:
            continue
        det, rec = _image_task2(
            _text_blocks(output), _text_blocks(task_output(pred[image_id], "task2")), compat
        )
        det_sum += det
        rec_sum += rec
    det, rec = det_sum / len(truths), rec_sum / len(truths)
    return Scores(
        metrics={
            "detection": det,
            "recognition": rec,
            "hmean": _f(det, rec),
            "num_unannotated": skipped,
        }
    )


# --------------------------------------------------------------------------------------------
# Task 3: text role classification
# --------------------------------------------------------------------------------------------


def task3(
    gt: Mapping[str, Any],
    pred: Mapping[str, Any],
    *,
    compat: str = "spec",
    roles: Sequence[str] | None = None,
) -> Scores:
    """Average per-role F over text blocks (keys ``<image>__sep__<block id>``).

    Scored roles: ``roles`` if given, else the four synthetic roles for ``icdar2019`` and every
    role in the ground truth otherwise. Ground-truth blocks with other roles are ignored, and so
    are predictions on them.
    """
    check_compat(compat)
    check_ids(gt, pred)
    truths, skipped = annotated(gt, "task3")
    if roles is None and compat == "icdar2019":
        roles = SYNTH_ROLES
    scored = None if roles is None else {r.lower() for r in roles}
    gt_sets: dict[str, set] = {}
    known, ignored = set(), set()
    for image_id, output in truths.items():
        for item in output.get("text_roles", []):
            key = f"{image_id}__sep__{item['id']}"
            role = str(item["role"]).lower().strip()
            if scored is not None and role not in scored:
                ignored.add(key)
                continue
            gt_sets.setdefault(role, set()).add(key)
            known.add(key)
    pred_sets: dict[str, set] = {}
    for image_id in truths:
        out = task_output(pred.get(image_id), "task3") or {}
        items = out.get("text_roles", out.get("text_blocks", []))
        latest: dict[str, str] = {}
        for item in items:
            key = f"{image_id}__sep__{item['id']}"
            role = str(item["role"]).lower().strip()
            if key in ignored:
                continue
            if compat == "spec":
                latest[key] = role  # one role per block: the last one given
                continue
            pred_sets.setdefault(role, set()).add(key)  # a duplicate id counts in both roles
            if key not in known:
                break  # the scripts' KeyError drops the rest of this file's predictions
        for key, role in latest.items():
            pred_sets.setdefault(role, set()).add(key)
    if not gt_sets:
        raise ValueError("task3: no scored ground-truth text role")
    means, per_role = _per_class_f(gt_sets, pred_sets)
    return Scores(metrics={**means, "num_unannotated": skipped}, breakdowns={"text_role": per_role})


# --------------------------------------------------------------------------------------------
# Task 4: axis analysis
# --------------------------------------------------------------------------------------------


def _ticks(output: Mapping[str, Any] | None, axis: str) -> dict[Any, tuple[float, float]]:
    ticks = {}
    for item in ((output or {}).get("axes") or {}).get(axis, []) or []:
        tick_id = item.get("id")
        if tick_id is None or tick_id == "null":
            continue
        point = item["tick_pt"]
        ticks[tick_id] = (float(point["x"]), float(point["y"]))  # duplicate ids: last wins
    return ticks


def tick_score(distance: float, low: float, high: float) -> float:
    """1 within ``low``, 0 beyond ``high``, linear in between; 0 for a NaN distance (a tick
    predicted at NaN or infinity is wrong)."""
    if distance <= low:
        return 1.0
    if not distance < high:
        return 0.0
    return 1.0 - (distance - low) / (high - low)


def _tick_values(gt_obj: Mapping[str, Any], output: Mapping[str, Any]):
    """(field, value) of each ground-truth tick coordinate, for ``refuse_non_finite``."""
    key = entry_key(gt_obj, "task4")
    for axis in ("x-axis", "y-axis"):
        for i, item in enumerate((output.get("axes") or {}).get(axis, []) or []):
            point = item.get("tick_pt") if isinstance(item, Mapping) else None
            for c in ("x", "y") if isinstance(point, Mapping) else ():
                yield f"{key}.output.axes.{axis}[{i}].tick_pt.{c}", point.get(c)


def task4(
    gt: Mapping[str, Any],
    pred: Mapping[str, Any],
    image_sizes: Mapping[str, tuple[int, int]],
    *,
    compat: str = "spec",
) -> Scores:
    """Tick-point precision/recall per axis (x = independent variable) and image, averaged
    over ground-truth images; F is the harmonic mean of the dataset P and R.

    ``image_sizes``: ``{id: (width, height)}``; thresholds are 1 % and 2 % of the diagonal.
    """
    check_compat(compat)
    check_ids(gt, pred)
    truths, skipped = annotated(gt, "task4")
    if not truths:
        raise ValueError("task4: no ground-truth image annotates task 4")
    for image_id, output in truths.items():
        refuse_non_finite(gt, image_id, _tick_values(gt[image_id], output))
    p_sum = r_sum = 0.0
    for image_id, output in truths.items():
        if image_id not in pred:
            continue
        if image_id not in image_sizes:
            raise ValueError(f"task4: no image size for {image_id!r} (--images)")
        w, h = image_sizes[image_id]
        diag = math.hypot(w, h)
        low, high = 0.01 * diag, 0.02 * diag
        res = task_output(pred[image_id], "task4")
        per_axis = {}
        for axis in ("x-axis", "y-axis"):
            g, r = _ticks(output, axis), _ticks(res, axis)
            if not g and not r:
                score = 1.0
            else:
                score = sum(
                    tick_score(math.dist(c, r[i]), low, high) for i, c in g.items() if i in r
                )
            per_axis[axis] = (score / len(g) if g else 1.0, score / len(r) if r else 1.0, g, r)
        recall = (per_axis["x-axis"][0] + per_axis["y-axis"][0]) / 2
        px, py = per_axis["x-axis"][1], per_axis["y-axis"][1]
        if compat != "spec":
            # The scripts' typo: precision_x tests pred_y instead of pred_x.
            if not per_axis["x-axis"][2] and per_axis["y-axis"][3]:
                px = 0.0
            if not per_axis["y-axis"][2] and per_axis["y-axis"][3]:
                py = 0.0
        r_sum += recall
        p_sum += (px + py) / 2
    precision, recall = p_sum / len(truths), r_sum / len(truths)
    return Scores(
        metrics={
            "precision": precision,
            "recall": recall,
            "f1": _f(precision, recall),
            "num_unannotated": skipped,
        }
    )


# --------------------------------------------------------------------------------------------
# Task 5: legend analysis
# --------------------------------------------------------------------------------------------


def _legend_iou(a: Mapping[str, Any], b: Mapping[str, Any], compat: str) -> tuple[float, float]:
    """IoU and ground-truth cover of ground-truth box ``a`` and predicted box ``b``."""
    ax0, ay0 = float(a["x0"]), float(a["y0"])
    ax1, ay1 = ax0 + float(a["width"]), ay0 + float(a["height"])
    bx0, by0 = float(b["x0"]), float(b["y0"])
    bx1, by1 = bx0 + float(b["width"]), by0 + float(b["height"])
    if not all(map(math.isfinite, (bx0, by0, bx1, by1))):
        return 0.0, 0.0  # a box predicted at NaN or infinity is wrong
    inter = max(0.0, min(ax1, bx1) - max(ax0, bx0)) * max(0.0, min(ay1, by1) - max(ay0, by0))
    area_a = (ax1 - ax0) * (ay1 - ay0)
    union = area_a + (bx1 - bx0) * (by1 - by0) - inter
    if compat == "spec" and (ax0, ay0, ax1, ay1) == (bx0, by0, bx1, by1):
        # Line-chart legend markers have zero height: the scripts score even an exact
        # prediction 0; the spec counts an exact box as a perfect match.
        return 1.0, 1.0
    return (inter / union if union else 0.0), (inter / area_a if area_a else 0.0)


def _legend_values(output: Mapping[str, Any]):
    """(field, value) of each ground-truth legend box coordinate, for ``refuse_non_finite``."""
    for i, pair in enumerate(output.get("legend_pairs", []) or []):
        bb = pair.get("bb") if isinstance(pair, Mapping) else None
        for c in ("x0", "y0", "width", "height") if isinstance(bb, Mapping) else ():
            yield f"task5.output.legend_pairs[{i}].bb.{c}", bb.get(c)


def _image_task5(gt_pairs, pred_pairs, compat: str) -> tuple[float, float]:
    if not gt_pairs:
        return (1.0, 1.0) if not pred_pairs else (0.0, 0.0)
    used = [False] * len(pred_pairs)
    iou_sum = cover_sum = 0.0
    for g in gt_pairs:
        for j, p in enumerate(pred_pairs):
            if not used[j] and p["id"] == g["id"]:
                used[j] = True
                iou, cover = _legend_iou(g["bb"], p["bb"], compat)
                iou_sum += iou
                cover_sum += cover
                break
    denom = max(len(gt_pairs), len(pred_pairs))
    return iou_sum / denom, cover_sum / denom


def task5(gt: Mapping[str, Any], pred: Mapping[str, Any], *, compat: str = "spec") -> Scores:
    """Legend marker boxes matched by text-block id: per image sum of IoU / max(#gt, #pred),
    mean over ground-truth images (``icdar2019``: over prediction files, missing ones not
    penalised). ``recall_score`` is the 2020 variant with intersection / ground-truth area."""
    check_compat(compat)
    check_ids(gt, pred)
    truths, skipped = annotated(gt, "task5")
    for image_id, output in truths.items():
        refuse_non_finite(gt, image_id, _legend_values(output))
    ids = [k for k in truths if k in pred] if compat == "icdar2019" else list(truths)
    if not ids:
        raise ValueError("task5: nothing to score")
    scores = []
    for image_id in ids:
        res = task_output(pred.get(image_id), "task5") or {}
        scores.append(
            _image_task5(
                truths[image_id].get("legend_pairs", []), res.get("legend_pairs", []), compat
            )
            if image_id in pred
            else (0.0, 0.0)
        )
    arr = np.asarray(scores)
    return Scores(
        metrics={
            "score": float(arr[:, 0].mean()),
            "recall_score": float(arr[:, 1].mean()),
            "num_unannotated": skipped,
        }
    )
