"""MatCha-style pretraining (chartjax/tasks/matcha/__init__.py, docs/pretraining.md): the generated
math answers are right, the pages are drawn deterministically, the mixture draws each component at
its rate and resumes at any step, chart code reads back to the chart's table, every pretraining
recipe loads, and the toy curriculum runs: 2 steps of stage 1 on every objective, then 2 steps of
stage 2 initialised from stage 1's checkpoint."""

from __future__ import annotations

import itertools
import os
from decimal import Decimal

import gin
import numpy as np
import pytest

from chartjax import config as config_lib
from chartjax.data import mixture, tables
from chartjax.synth import chart_info_tables as tb
from chartjax.synth import math_questions, table_pages, text_render
from chartjax.tasks import matcha
from chartjax.tasks.matcha import chart_code
from tests.tasks.test_deplot import read_eval, run_recipe
from tests.tasks.tiny_recipes import P2S_TINY, RUN_TINY

RECIPES = (
    "matcha_pretrain_base",
    "matcha_reading_toy",
    "matcha_chart_table_toy",
    "chart_table_lattice_toy",
)


# ---------------------------------------------------------------- math questions -----------


@pytest.mark.parametrize(
    "index,kind,question,answer",
    [
        (0, "subtract", "What is 35 - 139?", "-104"),  # 35 - 139
        (6, "multiply", "What is 91 x 5?", "455"),
        # -1.4 - (-7.0) with 1988 = -1.4 and 1991 = -7.0 in the table
        (1, "difference", "What is the difference between 1988 and 1991?", "5.6"),
        (3, "count", "How many Month values are above -9.6?", "2"),  # -4.7 and -3.3
        (9, "total", "What is the total of % of population?", "156.4"),  # 61.3 + 13.5 + 81.6
        (11, "argmax", "Which Sector has the highest value?", "Energy"),  # 4245 > 3792, 3717
    ],
)
def test_math_answers_checked_by_hand(index, kind, question, answer):
    q = math_questions.make_question(0, index)
    assert (q.kind, q.question, q.answer) == (kind, question, answer)


def test_math_answers_agree_with_the_table_they_show():
    for i in range(300):
        q = math_questions.make_question(7, i)
        if not q.rows:
            a, op, b = q.question[len("What is ") : -1].split()
            want = {"+": int(a) + int(b), "-": int(a) - int(b), "x": int(a) * int(b)}[op]
            assert q.answer == str(want)
            continue
        cats = [r[0] for r in q.rows]
        vals = [Decimal(r[1]) for r in q.rows]
        if q.kind == "total":
            assert Decimal(q.answer) == sum(vals)
        elif q.kind == "mean":
            assert abs(Decimal(q.answer) - sum(vals) / len(vals)) <= Decimal("0.005")
        elif q.kind == "difference":
            x, y = q.question.removeprefix("What is the difference between ")[:-1].split(" and ")
            assert Decimal(q.answer) == vals[cats.index(x)] - vals[cats.index(y)]
        elif q.kind in ("argmax", "argmin"):
            pick = max if q.kind == "argmax" else min
            assert q.answer == cats[vals.index(pick(vals))]
        else:
            threshold = Decimal(q.question.rsplit(" ", 1)[1][:-1])
            assert q.answer == str(sum(v > threshold for v in vals))
    assert math_questions.format_decimal(Decimal("12.50")) == "12.5"
    assert math_questions.format_decimal(Decimal("-3.00")) == "-3"


def test_pages_are_drawn_deterministically_and_hold_the_text():
    q = math_questions.make_question(0, 9)
    rng = lambda: np.random.default_rng([0, 9, 1])  # noqa: E731
    page = text_render.draw_page(rng(), q.lines(), (480, 360))
    assert page.shape == (360, 480, 4) and page.dtype == np.uint8
    assert np.array_equal(page, text_render.draw_page(rng(), q.lines(), (480, 360)))
    ink = np.argwhere(page[..., 0] < 128)  # dark pixels: the text
    assert len(ink) > 500
    # Every line is drawn: the ink spans the lines' height at the chosen font size.
    assert np.ptp(ink[:, 0]) > 0.6 * len(q.lines()) * 14
    other = math_questions.make_question(0, 10)
    assert not np.array_equal(page, text_render.draw_page(rng(), other.lines(), (480, 360)))
    a, target, _ = table_pages.make_page(3, 4)
    b, again, _ = table_pages.make_page(3, 4)
    assert np.array_equal(a, b) and target == again
    assert table_pages.make_page(3, 4, draw=False)[1] == target
    snip, lines, _ = table_pages.make_snippet(3, 4)
    assert np.array_equal(snip, table_pages.make_snippet(3, 4)[0])
    assert 1 <= len(lines.split("\n")) <= 4 and (snip[..., 0] < 128).sum() > 100
    assert target.startswith("TITLE | ") and (a[..., 0] < 128).sum() > 500


def test_snippets_and_table_pages_are_drawn_in_the_charts_fonts(monkeypatch):
    # Stage 1 teaches the glyphs stage 2 reads: the chart generator draws in four fonts.
    from chartjax.synth import chart_info_style

    lines = [("Retail", "34.8"), ("Energy", "-2.07")]
    rng = lambda: np.random.default_rng(5)  # noqa: E731
    pages = [
        text_render.draw_page(rng(), lines, (240, 180), (20, 20), (f,))
        for f in chart_info_style.FONTS
    ]
    assert len({p.tobytes() for p in pages}) == 4  # four distinct fonts found and drawn
    # One font given: no draw for it, so the offset draws (and the page) are the default's.
    assert np.array_equal(pages[0], text_render.draw_page(rng(), lines, (240, 180), (20, 20)))
    used = []
    render = text_render.render_lines
    monkeypatch.setattr(
        text_render, "render_lines", lambda *a, **k: used.append(a[4]) or render(*a, **k)
    )
    for i in range(16):
        table_pages.make_snippet(1, i, size=(240, 180))
        table_pages.make_page(1, i, size=(240, 180))
    assert set(used) == set(chart_info_style.FONTS)


# ---------------------------------------------------------------- the mixture -------------


def _counter_source(name):
    return mixture.GeneratedSource(
        lambda seed, i: {"id": f"{name}/{seed}/{i}", "prompt": "", "target": name}
    )


def _stream(source, start_step, n, batch=4, process_index=0, process_count=1):
    it = source.train_examples(
        seed=5,
        start_step=start_step,
        local_batch_size=batch,
        process_index=process_index,
        process_count=process_count,
    )
    return [r["id"] for r in itertools.islice(it, n)]


def test_mixture_draws_each_component_at_its_rate():
    weights = {"a": 0.5, "b": 0.3, "c": 0.2}
    source = mixture.MixtureSource({k: _counter_source(k) for k in weights}, weights)
    n = 6000
    ids = _stream(source, 0, n)
    for name, w in weights.items():
        count = sum(i.startswith(name + "/") for i in ids)
        assert abs(count - n * w) < 4 * np.sqrt(n * w * (1 - w)), (name, count)
    assert ids == _stream(source, 0, n)  # deterministic


def test_mixture_resumes_at_any_step_and_shards_the_global_stream():
    weights = {"a": 1.0, "b": 2.0}
    source = mixture.MixtureSource({k: _counter_source(k) for k in weights}, weights)
    whole = _stream(source, 0, 4 * 30)
    assert _stream(source, 17, 4 * 13) == whole[4 * 17 :]
    # Two processes of 2 rows each read the one-process batches of 4.
    p0, p1 = (_stream(source, 0, 2 * 30, 2, p, 2) for p in (0, 1))
    merged = [x for s in range(30) for x in p0[2 * s : 2 * s + 2] + p1[2 * s : 2 * s + 2]]
    assert merged == whole
    with pytest.raises(ValueError, match="positive"):
        mixture.MixtureSource({"a": _counter_source("a")}, {"a": 0.0})


# ---------------------------------------------------------------- chart code --------------


@pytest.mark.parametrize("chart_type", tb.CHART_TYPES)
def test_chart_code_reads_back_to_the_charts_table(chart_type):
    kind = chart_type.lower().replace(" ", "_")
    for seed in range(4):
        data = tb.synthesize(np.random.default_rng(seed), chart_type)
        table = tables.parse(data.linearized())
        code = chart_code.table_code(kind, table)
        assert chart_code.parse_code(code) == table, code
        back = chart_code.parse_code(code)
        values = np.array([[float(c) for c in r[1:]] for r in back.rows])
        assert np.array_equal(values, data.values())
    # A truncated prediction keeps the series it completed.
    partial = chart_code.code_table_text(code.rsplit("\n", 1)[0] + "\nax.bar([1, 2")
    assert partial.startswith("TITLE | ")


# ---------------------------------------------------------------- recipes -----------------


@pytest.mark.parametrize("recipe", RECIPES)
def test_pretraining_recipes_load(recipe):
    gin.clear_config()
    try:
        config_lib.parse_gin([f"tasks/{recipe}.gin"], ["VOCAB = 'spm.model'"])
        weights = gin.query_parameter("matcha_task.weights")
        assert set(weights) <= set(matcha.COMPONENTS)
        assert (
            gin.query_parameter("train.init_format")
            == {
                "matcha_pretrain_base": "t5x",
                "matcha_reading_toy": "random",
                "matcha_chart_table_toy": "chartjax",
                "chart_table_lattice_toy": "random",  # from scratch: no INIT_PATH needed
            }[recipe]
        )
    finally:
        gin.clear_config()
    if recipe == "matcha_pretrain_base":
        assert sum(weights.values()) == pytest.approx(1.0) and len(weights) == 4


@pytest.mark.slow
def test_toy_curriculum_two_steps_each(tmp_path, vocab_file, tfds_dir):
    """Stage 1 on all five objectives (the mixture, each objective's evaluation), then stage 2
    from stage 1's step-2 checkpoint."""
    data_dir = tfds_dir("chart_info", "synthetic_2019")
    # 1 + 1 layers: tracing, which no compilation cache saves, is most of these runs.
    tiny = P2S_TINY + RUN_TINY + [f"VOCAB = '{vocab_file}'", f"DATA_DIR = '{data_dir}'"]
    stage1 = tmp_path / "reading"
    out = run_recipe(
        "matcha_reading_toy",
        stage1,
        tiny
        + [
            'matcha_task.weights = {"text_snippets": 1, "table_pages": 1, "math": 1, '
            '"chart_table": 1, "chart_code": 1}',
            "matcha_task.chart_train_split = 'train'",
            "matcha_task.chart_eval_split = 'train'",
            "matcha_task.eval_examples = 2",
        ],
    )
    assert out["step"] == 2 and out["stop_reason"] == "done"
    for split in matcha.COMPONENTS:
        obj, rows = read_eval(stage1, split, 2)
        assert obj["task"] == "matcha" and rows
        key = {"math": "relaxed_accuracy", "text_snippets": "anls"}.get(split, "rms_f1")
        assert 0.0 <= obj["metrics"][key] <= 1.0 and "exact_match" in obj["metrics"]
    _, code_rows = read_eval(stage1, "chart_code", 2)
    assert all(r["target"].startswith("# ") for r in code_rows)
    assert all(r["input"] == chart_code.CODE_PROMPT for r in code_rows)
    init = stage1 / "checkpoints" / "2"
    assert init.is_dir()
    stage2 = tmp_path / "chart_table"
    out = run_recipe(
        "matcha_chart_table_toy",
        stage2,
        tiny
        + [
            f"INIT_PATH = '{init}'",
            "deplot_task.train_split = 'train'",
            "deplot_task.eval_splits = ('train',)",
        ],
    )
    assert out["step"] == 2 and out["stop_reason"] == "done"
    obj, rows = read_eval(stage2, "train", 2)
    assert obj["task"] == "deplot" and all(r["input"] == "" for r in rows)
    with open(os.path.join(stage2, "config.gin")) as f:
        assert str(init) in f.read()
