"""CHART-Info tasks 6a (plot-element detection) and 6b (data extraction), docs/metrics.md §3.6.

Hand-written. ``compat`` as in ``chart_info.py``:
- 6b ``spec``: the 2020+ definition (continuous / point-set / discrete / box series, weighted
  name and data cost, Hungarian matching) with CLI defaults alpha = 1, beta1 = beta2 = 0.75,
  gamma = 1, and its bugs fixed (box beta2/gamma swap, singular-covariance fallback).
  ``chartinfo2020`` keeps those bugs; ``icdar2019`` is the 2019 script (epsilon = range/100,
  ddof-1 statistics, cost = min(1 - ds/beta, 1 - name * ds) with beta = 2).
- 6a ``spec``: the documented task: element score max(0, 1 - D/T), T = 5 % of the smaller image
  side, Euclidean D (bars: mean over the 4 corners; boxes: mean over the 5 statistic points
  [inferred: the task text says point-to-segment for whiskers]), lines scored as continuous
  series in pixels; Hungarian matching; sum / max(#gt, #pred) per image. ``chartinfo2020``
  reproduces the 2020 script (its inverted bar/box scores, 1280x960 default image size);
  ``icdar2019`` is not implemented for 6a (error).
The scripts average over prediction files (compat modes); the spec over ground-truth files, a
missing prediction scoring 0. Scores are broken down by chart type.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import editdistance
import numpy as np
from scipy import optimize
from scipy.spatial import distance as spd

from chartjax.metrics.chart_info_inputs import (
    annotated,
    check_compat,
    check_ids,
    refuse_non_finite,
    task_output,
)
from chartjax.metrics.scores import Scores

__all__ = ["task6a", "task6b"]

BOX_STATS = ("first_quartile", "max", "min", "median", "third_quartile")


def _num(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _value(value: Any) -> float | None:
    """A series value: None for no number (the point is left out), NaN for a NaN or infinite
    one, which every comparison scores as wrong (the ground truth has none: task6b refuses
    them)."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else math.nan


def ned(pred: str, gt: str, unnamed_rule: str | None = None) -> float:
    """Normalized edit distance; 0 for an unnamed ground truth matched by an empty/unnamed pred."""
    pred, gt = str(pred), str(gt)
    if unnamed_rule and gt.startswith(unnamed_rule) and (not pred or pred.startswith("[unnamed")):
        return 0.0
    return editdistance.eval(pred, gt) / max(len(pred), len(gt), 1)


def hungarian_score(cost: np.ndarray) -> float:
    """Pad to square with cost 1, min-cost assignment, 1 - cost / K (both empty -> 1)."""
    h, w = cost.shape
    k = max(h, w)
    if k == 0:
        return 1.0
    padded = np.ones((k, k))
    padded[:h, :w] = np.nan_to_num(cost, nan=1.0)
    rows, cols = optimize.linear_sum_assignment(padded)
    return 1.0 - padded[rows, cols].sum() / k


# --------------------------------------------------------------------------------------------
# 6b: series comparisons
# --------------------------------------------------------------------------------------------


def _cont_recall(p_xs, p_ys, g_xs, g_ys, eps):
    n = len(g_xs)
    if n == 1:
        intervals = np.ones(1)
    else:
        intervals = np.empty(n)
        intervals[0] = (g_xs[1] - g_xs[0]) / 2
        intervals[-1] = (g_xs[-1] - g_xs[-2]) / 2
        intervals[1:-1] = (g_xs[2:] - g_xs[:-2]) / 2
    y_interp = np.interp(g_xs, p_xs, p_ys)  # clamped at the ends, as the scripts
    denom = np.abs(g_ys) + eps
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.where(denom > 0, np.abs(g_ys - y_interp) / denom, (g_ys != y_interp) * 1.0)
    err = np.fmin(1.0, err)  # a NaN error (a NaN predicted value) is the worst one
    total = intervals.sum()
    if total <= 0:  # all points at one x: plain mean
        return float((1 - err).mean())
    return float(((1 - err) * intervals).sum() / total)


def continuous_f(pred: list[tuple[float, float]], gt: list[tuple[float, float]], version: str):
    """F of interpolated recall and precision between two x-sorted point series."""
    if not pred and not gt:
        return 1.0
    if not pred or not gt:
        return 0.0
    p, g = np.array(sorted(pred)), np.array(sorted(gt))
    rng = g[:, 1].max() - g[:, 1].min()
    eps = rng / 100 if version == "icdar2019" else max(rng / 100, np.abs(g[:, 1]).mean() / 100)
    recall = _cont_recall(p[:, 0], p[:, 1], g[:, 0], g[:, 1], eps)
    precision = _cont_recall(g[:, 0], g[:, 1], p[:, 0], p[:, 1], eps)
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _scatter(pred, gt, version: str, gamma: float) -> float:
    p, g = np.array(pred, float).reshape(-1, 2), np.array(gt, float).reshape(-1, 2)
    if len(g) == 0 or len(p) == 0:
        return float(len(g) == len(p))
    means = g.mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cap = 400 / means**2
        try:
            vi = np.linalg.inv(np.atleast_2d(np.cov(g.T)))
            if not np.isfinite(vi).all():
                raise np.linalg.LinAlgError("non-finite covariance")
            if version != "icdar2019":
                vi = vi.T.copy()
                for i in range(2):
                    vi[i, i] = min(vi[i, i], cap[i])
        except np.linalg.LinAlgError:
            if version == "chartinfo2020":  # the script's fallback: exponent 0, no square
                vi = np.array([[400 / means[0] ** 0, 0], [0, 400 / means[1]]])
            else:
                vi = np.diag(cap)
        d = spd.cdist(p, g, metric="mahalanobis", VI=vi)
    return hungarian_score(np.fmin(1.0, d / gamma))


def _discrete(pred, gt, version: str, alpha: float, beta2: float, gamma: float) -> float:
    if not gt or not pred:
        return float(len(gt) == len(pred))
    g_y = np.array([y for _, y in gt])
    p_y = np.array([y for _, y in pred])
    diff = np.abs(p_y[:, None] - g_y[None, :])
    if version == "icdar2019":
        sigma = np.std(g_y, ddof=1) if len(g_y) > 1 else 0.0
    else:
        sigma = max(np.abs(g_y).mean() / 20, np.std(g_y))
    with np.errstate(divide="ignore", invalid="ignore"):
        # fmin and != : a NaN predicted value costs 1.
        value_cost = np.fmin(1.0, diff / (sigma * gamma)) if sigma > 0 else (diff != 0) * 1.0
    rule = None if version == "icdar2019" else "[unnamed category #"
    names = np.array([[ned(px, gx, rule) ** alpha for gx, _ in gt] for px, _ in pred])
    if version == "icdar2019":
        cost = 1 - (1 - names) * (1 - value_cost)
    else:
        cost = (1 - beta2) * names + beta2 * value_cost
    return hungarian_score(cost)


def _points(series: Mapping[str, Any]) -> list[tuple[Any, float]]:
    """A series' (x, y) points with numeric y; box series become one point per statistic."""
    data = series.get("data", [])
    boxes = [data] if isinstance(data, Mapping) else data
    out = []
    for point in boxes:
        if not isinstance(point, Mapping):
            continue
        if any(stat in point for stat in BOX_STATS):
            prefix = f"{point['x']} " if "x" in point else ""
            out.extend(
                (f"{prefix}{s}", _value(point[s]))
                for s in BOX_STATS
                if _value(point.get(s)) is not None
            )
            continue
        y = _value(point.get("y", point.get("y2")))
        if y is not None:
            out.append((point.get("x"), y))
    return out


def _series_values(series_list: Any):
    """(field, value) of each ground-truth series value and numeric x, for
    ``refuse_non_finite``."""
    for i, series in enumerate(series_list if isinstance(series_list, list) else []):
        data = series.get("data", []) if isinstance(series, Mapping) else []
        at = f"task6.output.data series[{i}].data"
        if isinstance(data, Mapping):  # one box
            points = {at: data}
        else:
            points = {f"{at}[{j}]": p for j, p in enumerate(data if isinstance(data, list) else [])}
        for where, point in points.items():
            if not isinstance(point, Mapping):
                continue
            yield from ((f"{where}.{k}", point[k]) for k in (*BOX_STATS, "y", "y2") if k in point)
            if isinstance(point.get("x"), float):  # a text x is a category name
                yield f"{where}.x", point["x"]


def _kind(chart_type: str, gt_series: list) -> str:
    t = chart_type.lower()
    if "box" in t:
        return "box"
    numeric_x = all(_num(x) is not None for s in gt_series for x, _ in _points(s))
    if "bar" in t or not numeric_x:
        return "discrete"
    return "scatter" if "scatter" in t and "line" not in t else "continuous"


def _image_6b(pred_series, gt_series, chart_type, version, alpha, beta1, beta2, gamma):
    kind = _kind(chart_type, gt_series)
    gp = [_points(s) for s in gt_series]
    pp = [_points(s) for s in pred_series]
    if kind == "continuous":
        ds = [
            [
                continuous_f(
                    [(float(x), y) for x, y in p if _num(x) is not None],
                    [(float(x), y) for x, y in g],
                    version,
                )
                for g in gp
            ]
            for p in pp
        ]
    elif kind == "scatter":
        ds = [
            [
                _scatter(
                    [(_num(x), y) for x, y in p if _num(x) is not None],
                    [(float(x), y) for x, y in g],
                    version,
                    gamma,
                )
                for g in gp
            ]
            for p in pp
        ]
    else:
        b2, gm = (
            (gamma, beta2) if (kind == "box" and version == "chartinfo2020") else (beta2, gamma)
        )
        ds = [[_discrete(p, g, version, alpha, b2, gm) for g in gp] for p in pp]
    ds = np.array(ds, float).reshape(len(pp), len(gp))
    rule = None if version == "icdar2019" else "[unnamed"
    names = np.array(
        [
            [ned(p.get("name", ""), g.get("name", ""), rule) ** alpha for g in gt_series]
            for p in pred_series
        ]
    ).reshape(len(pp), len(gp))
    if version == "icdar2019":
        cost = np.minimum(1 - ds / 2.0, 1 - (1 - names) * ds)
        return hungarian_score(cost), None, None
    cost = (1 - beta1) * names + beta1 * (1 - ds)
    k = max(cost.shape)
    if k == 0:
        return 1.0, 1.0, 1.0
    rows, cols = optimize.linear_sum_assignment(
        np.pad(cost, ((0, k - cost.shape[0]), (0, k - cost.shape[1])), constant_values=1.0)
    )
    matched = [(r, c) for r, c in zip(rows, cols) if r < cost.shape[0] and c < cost.shape[1]]
    unmatched = k - len(matched)
    total = 1 - (sum(cost[r, c] for r, c in matched) + unmatched) / k
    name_score = 1 - (sum(names[r, c] for r, c in matched) + unmatched) / k
    ds_score = 1 - (sum(1 - ds[r, c] for r, c in matched) + unmatched) / k
    return total, name_score, ds_score


def _aggregate(per_image: dict[str, tuple], types: dict[str, str], names: tuple[str, ...]):
    arr = {n: [v[i] for v in per_image.values() if v[i] is not None] for i, n in enumerate(names)}
    metrics = {n: float(np.mean(v)) for n, v in arr.items() if v}
    by_type: dict[str, dict[str, float]] = {}
    for t in sorted(set(types.values())):
        ids = [k for k in per_image if types[k] == t]
        by_type[t] = {"score": float(np.mean([per_image[k][0] for k in ids])), "n": len(ids)}
    return metrics, by_type


def task6b(
    gt: Mapping[str, Any],
    pred: Mapping[str, Any],
    *,
    compat: str = "spec",
    alpha: float = 1.0,
    beta1: float = 0.75,
    beta2: float = 0.75,
    gamma: float = 1.0,
) -> Scores:
    """Data-series extraction score (plus name and data scores outside ``icdar2019``)."""
    check_compat(compat)
    check_ids(gt, pred)
    truths, skipped = annotated(gt, "task6")
    ids = [k for k in truths if k in pred] if compat != "spec" else list(truths)
    if not ids:
        raise ValueError("task6b: nothing to score")
    for image_id, output in truths.items():
        refuse_non_finite(gt, image_id, _series_values(output.get("data series", [])))
    per_image, types = {}, {}
    for image_id in ids:
        chart_type = str((task_output(gt[image_id], "task1") or {}).get("chart_type", "unknown"))
        types[image_id] = chart_type.lower()
        res = task_output(pred.get(image_id), "task6")
        if res is None:
            per_image[image_id] = (0.0, 0.0, 0.0)
            continue
        per_image[image_id] = _image_6b(
            res.get("data series", []),
            truths[image_id].get("data series", []),
            chart_type,
            compat,
            alpha,
            beta1,
            beta2,
            gamma,
        )
    metrics, by_type = _aggregate(per_image, types, ("score", "name_score", "ds_score"))
    return Scores(
        metrics={**metrics, "num_unannotated": skipped}, breakdowns={"chart_type": by_type}
    )


# --------------------------------------------------------------------------------------------
# 6a: visual elements
# --------------------------------------------------------------------------------------------


def _bar_corners(b) -> np.ndarray:
    x0, y0 = float(b["x0"]), float(b["y0"])
    x1, y1 = x0 + float(b["width"]), y0 + float(b["height"])
    return np.array([[x0, y0], [x1, y0], [x0, y1], [x1, y1]])


def _box_points(b) -> np.ndarray:
    return np.array([[float(b[s]["x"]), float(b[s]["y"])] for s in BOX_STATS])


def _line(points) -> list[tuple[float, float]]:
    return [(float(p["x"]), float(p["y"])) for p in points]


def _element_score(pred, gt, to_points, threshold) -> float:
    if not pred and not gt:
        return 1.0
    if not pred or not gt:
        return 0.0
    sim = np.array(
        [
            [
                max(
                    0.0, 1 - np.linalg.norm(to_points(p) - to_points(g), axis=-1).mean() / threshold
                )
                for g in gt
            ]
            for p in pred
        ]
    )
    rows, cols = optimize.linear_sum_assignment(-sim)
    return float(sim[rows, cols].sum() / max(len(pred), len(gt)))


def _flat_points(points) -> list:
    if points and isinstance(points[0], list):
        return [p for group in points for p in group]
    return list(points or [])


def _image_6a_spec(pred, gt, kind, threshold) -> float:
    if kind == "bars":
        return _element_score(pred.get("bars", []), gt.get("bars", []), _bar_corners, threshold)
    if kind == "boxplots":
        return _element_score(
            pred.get("boxplots", []), gt.get("boxplots", []), _box_points, threshold
        )
    if kind == "scatter points":
        to_pt = lambda p: np.array([float(p["x"]), float(p["y"])])  # noqa: E731
        return _element_score(
            _flat_points(pred.get(kind)), _flat_points(gt.get(kind)), to_pt, threshold
        )
    p_lines, g_lines = pred.get("lines", []) or [], gt.get("lines", []) or []
    if not p_lines and not g_lines:
        return 1.0
    if not p_lines or not g_lines:
        return 0.0
    sim = np.array([[continuous_f(_line(p), _line(g), "spec") for g in g_lines] for p in p_lines])
    rows, cols = optimize.linear_sum_assignment(-sim)
    return float(sim[rows, cols].sum() / max(len(p_lines), len(g_lines)))


def _box_vector_2020(b) -> np.ndarray:
    # The script writes y then x into columns cnt, cnt + 1 but steps cnt by one, so each x is
    # overwritten by the next y: [y_1..y_5, x_5, 0, 0] in the JSON's key order.
    v = np.zeros(8)
    for i, key in enumerate(b):
        v[i], v[i + 1] = float(b[key]["y"]), float(b[key]["x"])
    return v


def _image_6a_2020(pred, gt, kind, min_dim, beta=1.0, gamma=1.0) -> float:
    if kind in ("bars", "boxplots"):
        vec = (
            (lambda b: _bar_corners(b)[[0, 3]][:, ::-1].ravel())
            if kind == "bars"
            else _box_vector_2020
        )
        g, p = gt.get(kind, []) or [], pred.get(kind, []) or []
        if not g and not p:
            return 1.0
        cost = np.array(
            [[min(1.0, np.abs(vec(gi) - vec(pj)).sum() / (0.05 * min_dim)) for pj in p] for gi in g]
        ).reshape(len(g), len(p))
        # The script hands a similarity (1 - cost / beta) to a min-cost matcher: inverted.
        return max(0.0, hungarian_score(1 - cost / beta))
    if kind == "scatter points":  # [unverified] reconstructed from the reference's description
        g, p = gt.get(kind, []) or [], pred.get(kind, []) or []
        g_groups = g if g and isinstance(g[0], list) else [g]
        p_groups = p if p and isinstance(p[0], list) else [p]
        score = np.array(
            [
                [
                    hungarian_score(
                        np.fmin(
                            1,
                            spd.cdist(
                                np.array([[float(q["x"]), float(q["y"])] for q in pg]).reshape(
                                    -1, 2
                                ),
                                np.array([[float(q["x"]), float(q["y"])] for q in gg]).reshape(
                                    -1, 2
                                ),
                            )
                            / (min_dim * gamma),
                        )
                    )
                    for pg in p_groups
                ]
                for gg in g_groups
            ]
        )
        rows, cols = optimize.linear_sum_assignment(-score)
        return float(score[rows, cols].sum() / (len(g_groups) * beta))
    g, p = gt.get("lines", []) or [], pred.get("lines", []) or []
    if not g and not p:
        return 1.0
    if not g or not p:
        return 0.0
    # compare_continuous(gt_i, pred_j) with swapped arguments: epsilon comes from the prediction.
    score = np.array([[continuous_f(_line(gi), _line(pj), "icdar2019") for pj in p] for gi in g])
    rows, cols = optimize.linear_sum_assignment(-score)
    return float(score[rows, cols].sum() / len(g))


_ELEMENTS = (("box", "boxplots"), ("bar", "bars"), ("scatter", "scatter points"), ("line", "lines"))


def task6a(
    gt: Mapping[str, Any],
    pred: Mapping[str, Any],
    image_sizes: Mapping[str, tuple[int, int]] | None = None,
    *,
    compat: str = "spec",
) -> Scores:
    """Plot-element detection score; ``image_sizes`` ``{id: (w, h)}`` is needed by the spec."""
    check_compat(compat)
    if compat == "icdar2019":
        raise ValueError(
            "task6a: compat='icdar2019' is not implemented; use 'spec' or 'chartinfo2020'"
        )
    check_ids(gt, pred)
    truths, skipped = annotated(gt, "task6")
    per_image, types, other = {}, {}, 0
    for image_id, output in truths.items():
        if compat != "spec" and image_id not in pred:
            continue
        chart_type = str(
            (task_output(gt[image_id], "task1") or {}).get("chart_type", "unknown")
        ).lower()
        kind = next((k for key, k in _ELEMENTS if key in chart_type), None)
        if kind is None:
            other += 1  # pies, areas, ...: no plot elements defined
            continue
        types[image_id] = chart_type
        res = (task_output(pred.get(image_id), "task6") or {}).get("visual elements")
        if res is None:
            per_image[image_id] = (0.0,)
            continue
        gt_el = output.get("visual elements", {}) or {}
        if compat == "spec":
            if image_sizes is None or image_id not in image_sizes:
                raise ValueError(f"task6a: no image size for {image_id!r} (--images)")
            threshold = 0.05 * min(image_sizes[image_id])
            per_image[image_id] = (_image_6a_spec(res, gt_el, kind, threshold),)
        else:
            dims = (image_sizes or {}).get(image_id, (1280.0, 960.0))
            per_image[image_id] = (_image_6a_2020(res, gt_el, kind, min(dims)),)
    if not per_image:
        raise ValueError("task6a: nothing to score")
    metrics, by_type = _aggregate(per_image, types, ("score",))
    return Scores(
        metrics={**metrics, "num_unannotated": skipped, "num_other_chart_types": other},
        breakdowns={"chart_type": by_type},
    )
