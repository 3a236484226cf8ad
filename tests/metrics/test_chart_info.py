"""CHART-Info metrics: metrics reference §3 hand cases and §7 items 1-3, 10."""

import math

import pytest

from chartjax.metrics import chart_info as CI


def _t(task, output):
    return {task: {"output": output}}


def _t1(label):
    return _t("task1", {"chart_type": label})


def _bb(x0, y0, w, h):
    return {"x0": x0, "y0": y0, "width": w, "height": h}


# ---- task 1 -------------------------------------------------------------------------------


def test_task1_macro_f_reference_case():
    gt = {"1": _t1("a"), "2": _t1("a"), "3": _t1("b")}
    pred = {"1": _t1("a"), "2": _t1("b"), "3": _t1("b")}
    out = CI.task1(gt, pred)
    assert out.metrics["f1"] == pytest.approx(2 / 3)
    assert out.metrics["accuracy"] == pytest.approx(2 / 3)
    assert out.breakdowns["chart_type"]["a"] == pytest.approx(
        {"precision": 1.0, "recall": 0.5, "f1": 2 / 3, "n": 2}
    )


def test_task1_unpredicted_class_scores_zero_and_unannotated_skipped():
    gt = {"1": _t1("Line"), "2": _t1("Pie"), "3": {"task1": None}}
    out = CI.task1(gt, {"1": _t1("line"), "2": _t1("line")})
    assert out.metrics["f1"] == pytest.approx((2 / 3 + 0) / 2)  # pie never predicted: F = 0
    assert out.metrics["num_unannotated"] == 1
    with pytest.raises(ValueError, match="not in the ground truth"):
        CI.task1(gt, {"9": _t1("line")})


def test_task1_single_series_stacked_grouped_interchangeable():
    one = {"data series": [{"name": "a", "data": []}]}
    two = {"data series": [{"name": "a", "data": []}, {"name": "b", "data": []}]}
    gt = {
        "1": {**_t1("Stacked vertical bar"), **_t("task6", one)},
        "2": {**_t1("Stacked vertical bar"), **_t("task6", two)},
    }
    pred = {"1": _t1("Grouped vertical bar"), "2": _t1("Grouped vertical bar")}
    out = CI.task1(gt, pred)
    assert out.metrics["accuracy"] == 0.5  # only the single-series chart is ambiguous
    assert CI.task1(gt, pred, ambiguous_ids=["1", "2"]).metrics["accuracy"] == 1.0
    pmc = CI.task1(
        {"1": _t1("vertical bar")}, {"1": _t1("stacked vertical bar")}, compat="chartinfo2020"
    )
    assert pmc.metrics["f1"] == 1.0


# ---- task 2 -------------------------------------------------------------------------------


def _blocks(*blocks):
    return _t(
        "task2",
        {"text_blocks": [{"id": i, "bb": bb, "text": t} for i, (bb, t) in enumerate(blocks)]},
    )


def test_task2_reference_case_plus_one_iou():
    gt = {"img": _blocks((_bb(10, 10, 100, 20), "sales"))}
    pred = {"img": _blocks((_bb(12, 10, 100, 20), "sale"))}
    iou = 99 * 21 / (101 * 21 * 2 - 99 * 21)
    assert iou == pytest.approx(0.9612, abs=1e-4)
    out = CI.task2(gt, pred, compat="icdar2019").metrics
    assert out["detection"] == pytest.approx(iou)
    assert out["recognition"] == pytest.approx(0.8)
    assert out["hmean"] == pytest.approx(2 * iou * 0.8 / (iou + 0.8))
    assert out["hmean"] == pytest.approx(0.8732, abs=1e-4)
    spec = CI.task2(gt, pred).metrics  # continuous IoU, no +1
    assert spec["detection"] == pytest.approx(98 * 20 / (2000 + 2000 - 98 * 20))


def test_task2_first_match_not_best_and_missing_prediction():
    gt = {"a": _blocks((_bb(10, 10, 100, 20), "sales")), "b": _blocks((_bb(0, 0, 5, 5), "x"))}
    pred = {"a": _blocks((_bb(12, 10, 100, 20), "sales"), (_bb(10, 10, 100, 20), "sales"))}
    first = CI.task2(gt, pred, compat="icdar2019").metrics
    iou_first = 99 * 21 / (101 * 21 * 2 - 99 * 21)
    assert first["detection"] == pytest.approx(iou_first / 2 / 2)  # / max(1, 2) / 2 images
    best = CI.task2(gt, pred).metrics
    assert best["detection"] == pytest.approx(1.0 / 2 / 2)
    assert best["recognition"] == pytest.approx(0.5)


def test_task2_sanitize_and_double_underscore_blocks():
    assert CI.sanitize_text("Revenue\n(in $^{2}$)") == "revenue (in $²$)"
    gt = {"a": _blocks((_bb(0, 0, 10, 10), "ok"), (_bb(50, 50, 10, 10), "x__y"))}
    pred = {"a": _blocks((_bb(0, 0, 10, 10), "ok"))}
    assert CI.task2(gt, pred).metrics["hmean"] == 1.0


def test_task2_polygons():
    poly = {"x0": 0, "y0": 0, "x1": 10, "y1": 0, "x2": 10, "y2": 10, "x3": 0, "y3": 10}
    gt = {"a": _t("task2", {"text_blocks": [{"id": 0, "polygon": poly, "text": "t"}]})}
    pred = {"a": _t("task2", {"text_blocks": [{"id": 0, "bb": _bb(0, 0, 10, 5), "text": "t"}]})}
    assert CI.task2(gt, pred, compat="chartinfo2020").metrics["detection"] == pytest.approx(0.5)


# ---- task 3 -------------------------------------------------------------------------------


def _roles(*pairs):
    return _t("task3", {"text_roles": [{"id": i, "role": r} for i, r in pairs]})


def test_task3_roles_and_unknown_id_quirk():
    gt = {"a": _roles((0, "chart_title"), (1, "tick_label"), (2, "tick_label"), (3, "other"))}
    pred = {
        "a": _roles(
            (0, "chart_title"),
            (9, "tick_label"),
            (1, "tick_label"),
            (2, "tick_label"),
            (3, "tick_label"),
        )
    }
    spec = CI.task3(gt, pred, roles=["chart_title", "tick_label"])
    # tick_label: 2 hits of 3 predictions (id 9 is a false positive), recall 1.
    assert spec.breakdowns["text_role"]["tick_label"]["precision"] == pytest.approx(2 / 3)
    assert spec.metrics["f1"] == pytest.approx((1 + 0.8) / 2)
    compat = CI.task3(gt, pred, compat="icdar2019")
    # Unknown id 9 counts as a false positive, then the rest of the file is dropped.
    tick = compat.breakdowns["text_role"]["tick_label"]
    assert tick["precision"] == 0.0 and tick["recall"] == 0.0
    assert compat.metrics["f1"] == pytest.approx(0.5)


# ---- task 4 -------------------------------------------------------------------------------


def _axes(x, y):
    def ticks(pts):
        return [{"id": i, "tick_pt": {"x": px, "y": py}} for i, (px, py) in pts.items()]

    return _t("task4", {"axes": {"x-axis": ticks(x), "y-axis": ticks(y)}})


@pytest.mark.parametrize("d, expected", [(8, 1.0), (12, 0.5), (16, 0.0), (4, 1.0), (20, 0.0)])
def test_task4_tick_scores_diag_800(d, expected):
    gt = {"a": _axes({1: (100, 100)}, {})}
    pred = {"a": _axes({1: (100 + d, 100)}, {})}
    out = CI.task4(gt, pred, {"a": (640, 480)}).metrics
    assert out["recall"] == pytest.approx((expected + 1) / 2)  # empty y-axis: recall 1
    assert out["precision"] == pytest.approx((expected + 1) / 2)


def test_task4_precision_typo_and_missing_prediction():
    gt = {"a": _axes({}, {1: (0, 0)}), "b": _axes({1: (0, 0)}, {})}
    pred = {"a": _axes({}, {1: (0, 0)})}
    sizes = {"a": (640, 480), "b": (640, 480)}
    spec = CI.task4(gt, pred, sizes).metrics
    assert spec["precision"] == pytest.approx(1.0 / 2) and spec["recall"] == pytest.approx(0.5)
    compat = CI.task4(gt, pred, sizes, compat="icdar2019").metrics
    assert compat["precision"] == pytest.approx(0.5 / 2)  # precision_x forced to 0
    with pytest.raises(ValueError, match="no image size"):
        CI.task4(gt, pred, {})


# ---- task 5 -------------------------------------------------------------------------------


def _legend(*pairs):
    return _t("task5", {"legend_pairs": [{"id": i, "bb": bb} for i, bb in pairs]})


def test_task5_iou_zero_height_and_missing():
    gt = {
        "a": _legend((1, _bb(0, 0, 10, 10)), (2, _bb(0, 20, 10, 0))),
        "b": _legend(),
        "c": _legend((1, _bb(0, 0, 4, 4))),
    }
    pred = {"a": _legend((1, _bb(0, 0, 10, 5)), (2, _bb(0, 20, 10, 0))), "b": _legend()}
    spec = CI.task5(gt, pred).metrics
    assert spec["score"] == pytest.approx(((0.5 + 1.0) / 2 + 1.0 + 0.0) / 3)
    compat = CI.task5(gt, pred, compat="icdar2019").metrics
    assert compat["score"] == pytest.approx(((0.5 + 0.0) / 2 + 1.0) / 2)  # over prediction files
    assert compat["recall_score"] == pytest.approx(((0.5 + 0.0) / 2 + 1.0) / 2)


# ---- task 6b ------------------------------------------------------------------------------


def _series(chart_type, *series):
    return {
        **_t1(chart_type),
        **_t(
            "task6",
            {
                "data series": [
                    {"name": n, "data": [{"x": x, "y": y} for x, y in pts]} for n, pts in series
                ]
            },
        ),
    }


def test_task6b_bar_and_line_reference_cases():
    bar = _series("vertical bar", ("s", [("A", 10), ("B", 20), ("C", 30)]))
    bar_pred = _series("vertical bar", ("s", [("A", 11), ("B", 20), ("C", 30)]))
    for compat in ("spec", "chartinfo2020"):
        out = CI.task6b({"a": bar}, {"a": bar_pred}, compat=compat).metrics
        assert out["score"] == pytest.approx(0.977036, abs=1e-6)
        assert out["ds_score"] == pytest.approx(0.969381, abs=1e-6)
    line = _series("line", ("s", [(0, 10), (10, 20), (20, 15)]))
    line_pred = _series("line", ("s", [(0, 10), (10, 22), (20, 15)]))
    out = CI.task6b({"a": line}, {"a": line_pred}).metrics
    assert out["score"] == pytest.approx(0.964456, abs=1e-6)
    assert out["ds_score"] == pytest.approx(0.952607, abs=1e-6)
    old = CI.task6b({"a": line}, {"a": line_pred}, compat="icdar2019").metrics
    assert old["score"] == pytest.approx(0.952495, abs=1e-6)
    exact = CI.task6b({"a": bar, "b": line}, {"a": bar, "b": line})
    assert exact.metrics == pytest.approx(
        {"score": 1.0, "name_score": 1.0, "ds_score": 1.0, "num_unannotated": 0}
    )
    assert set(exact.breakdowns["chart_type"]) == {"line", "vertical bar"}


def test_task6b_scatter_box_and_missing():
    scatter = _series("scatter", ("s", [(1, 2), (3, 5), (6, 4), (8, 9)]))
    assert CI.task6b({"a": scatter}, {"a": scatter}).metrics["score"] == pytest.approx(1.0)
    box = {
        **_t1("vertical box"),
        **_t(
            "task6",
            {
                "data series": [
                    {
                        "name": "b",
                        "data": {
                            "first_quartile": 2,
                            "max": 5,
                            "min": 1,
                            "median": 3,
                            "third_quartile": 4,
                        },
                    }
                ]
            },
        ),
    }
    for compat in ("spec", "chartinfo2020", "icdar2019"):
        assert CI.task6b({"a": box}, {"a": box}, compat=compat).metrics["score"] == pytest.approx(
            1.0
        )
    out = CI.task6b({"a": scatter, "b": box}, {"a": scatter}).metrics
    assert out["score"] == pytest.approx(0.5)  # the missing prediction scores 0 (spec)


# ---- non-finite values: a bad reference is refused, a prediction scores as wrong -----------


@pytest.mark.parametrize("bad", ["NaN", "-inf", math.inf])
def test_task6b_refuses_a_non_finite_reference_value(bad):
    gt = {"a": _series("line", ("s", [(0, 1), (1, bad)]))}
    with pytest.raises(ValueError, match=r"ground truth 'a': task6\.output\.data series\[0\]"):
        CI.task6b(gt, {"a": _series("line", ("s", []))})
    box = {**_t1("vertical box"), **_t("task6", {"data series": [{"data": {"median": bad}}]})}
    with pytest.raises(ValueError, match=r"data series\[0\]\.data\.median is .*finite number"):
        CI.task6b({"a": box}, {})
    # A text x is a category name ("NaN" can be one); a JSON NaN is no name.
    with pytest.raises(ValueError, match=r"data\[1\]\.x is NaN"):
        CI.task6b({"a": _series("line", ("s", [(0, 1), (math.nan, 2)]))}, {})


@pytest.mark.parametrize("chart_type", ["line", "vertical bar", "scatter"])
@pytest.mark.parametrize("compat", ["spec", "chartinfo2020", "icdar2019"])
@pytest.mark.parametrize("bad", ["NaN", math.inf, -math.inf])
def test_task6b_a_non_finite_predicted_value_scores_as_a_wrong_one(chart_type, compat, bad):
    # A constant series: the bar cost's sigma is 0 there, where (diff > 0) passed NaN as right.
    gt = {"a": _series(chart_type, ("s", [(1, 5), (2, 5), (3, 5)]))}

    def score(y):
        pred = {"a": _series(chart_type, ("s", [(1, 5), (2, 5), (3, y)]))}
        return CI.task6b(gt, pred, compat=compat).metrics["score"]

    assert score(bad) == pytest.approx(score(1e12)) and score(1e12) < score(5) == 1.0


def test_task4_and_5_refuse_a_nan_reference_and_score_a_nan_prediction_as_wrong():
    sizes = {"a": (640, 480)}
    with pytest.raises(ValueError, match=r"'a': task4\.output\.axes\.x-axis\[0\]\.tick_pt\.y"):
        CI.task4({"a": _axes({1: (100, "NaN")}, {})}, {}, sizes)
    gt = {"a": _axes({1: (100, 100)}, {})}
    far = CI.task4(gt, {"a": _axes({1: (900, 100)}, {})}, sizes).metrics
    assert CI.task4(gt, {"a": _axes({1: (math.nan, 100)}, {})}, sizes).metrics == far
    with pytest.raises(ValueError, match=r"'a': task5\.output\.legend_pairs\[0\]\.bb\.x0 is"):
        CI.task5({"a": _legend((1, _bb(math.inf, 0, 4, 4)))}, {})
    gt = {"a": _legend((1, _bb(0, 0, 4, 4)))}
    far = CI.task5(gt, {"a": _legend((1, _bb(90, 90, 4, 4)))}).metrics
    assert CI.task5(gt, {"a": _legend((1, _bb(0, 0, "NaN", 4)))}).metrics == far


# ---- task 6a ------------------------------------------------------------------------------


def _bars(chart_type, *boxes):
    return {**_t1(chart_type), **_t("task6", {"visual elements": {"bars": list(boxes)}})}


def test_task6a_spec_and_2020_inversion():
    one = _bars("vertical bar", _bb(100, 100, 20, 200))
    sizes = {"a": (640, 480)}
    assert CI.task6a({"a": one}, {"a": one}, sizes).metrics["score"] == 1.0
    # Shift by 12 px: every corner 12 px away, T = 0.05 * 480 = 24 -> 0.5.
    moved = _bars("vertical bar", _bb(112, 100, 20, 200))
    assert CI.task6a({"a": one}, {"a": moved}, sizes).metrics["score"] == pytest.approx(0.5)
    assert CI.task6a({"a": one}, {"a": one}, compat="chartinfo2020").metrics["score"] == 0.0
    three = _bars("vertical bar", _bb(0, 0, 10, 10), _bb(400, 0, 10, 10), _bb(800, 0, 10, 10))
    assert CI.task6a({"a": three}, {"a": three}, compat="chartinfo2020").metrics["score"] == 1.0
    with pytest.raises(ValueError, match="not implemented"):
        CI.task6a({"a": one}, {"a": one}, compat="icdar2019")


def test_task6a_lines_and_scatter_spec():
    line = {
        **_t1("line"),
        **_t("task6", {"visual elements": {"lines": [[{"x": 0, "y": 10}, {"x": 10, "y": 20}]]}}),
    }
    assert CI.task6a({"a": line}, {"a": line}, {"a": (100, 100)}).metrics["score"] == 1.0
    pts = [{"x": 10, "y": 10}, {"x": 50, "y": 50}]
    sc = {**_t1("scatter"), **_t("task6", {"visual elements": {"scatter points": pts}})}
    off = {
        **_t1("scatter"),
        **_t(
            "task6",
            {"visual elements": {"scatter points": [{"x": 10, "y": 13}, {"x": 50, "y": 50}]}},
        ),
    }
    # T = 0.05 * 100 = 5; one point 3 px away scores 0.4.
    out = CI.task6a({"a": sc}, {"a": off}, {"a": (100, 100)}).metrics["score"]
    assert out == pytest.approx((1 + 0.4) / 2)
    assert math.isclose(CI.tick_score(12, 8, 16), 0.5)
