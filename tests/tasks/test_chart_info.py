"""CHART-Info tasks 1, 3 and 6b: the class postprocessing rule, task-3 regrouping, the 6b
table -> series conversion, and the three recipes end to end on the builder's dummy data."""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import pytest

from chartjax.data import sources
from chartjax.tasks import chart_info
from chartjax.tasks.chart_info import tables as chart_info_tables
from tests.tasks.test_deplot import (
    TINY_PIX2STRUCT,
    assert_table_metrics,
    read_eval,
    run_recipe,
)

ROOT = str(Path(__file__).resolve().parents[2])
DUMMY = os.path.join(ROOT, "tfds_builders", "chart_info", "dummy_data")
TINY_T5 = [
    "T5Config.emb_dim = 32",
    "T5Config.num_heads = 4",
    "T5Config.head_dim = 8",
    "T5Config.mlp_dim = 64",
    "T5Config.num_encoder_layers = 1",
    "T5Config.num_decoder_layers = 1",
    "T5Config.vocab_size = 400",
    "T5Config.dtype = 'float32'",
    "Features.max_input_len = 64",
    "Features.max_target_len = 32",
    "Decoding.max_decode_len = 8",
    "train.global_batch_size = 8",
    "evaluate.eval_batch_size = 8",
    "train.eval_batch_size = 8",
    "train.progress = False",
    "train.num_train_steps = 2",
    "train.log_every = 1",
]
SPLITS = ["chart_info_task.train_split = 'train'", "chart_info_task.eval_splits = ('train',)"]


# ---------------------------------------------------------------- task 1 -------------------


def test_classes_are_the_normalized_official_names():
    from tfds_builders.chart_info.annotations import normalize_chart_type

    synth = [
        "Pie",
        "Donut",
        "Vertical box",
        "Horizontal box",
        "Grouped vertical bar",
        "Grouped horizontal bar",
        "Stacked vertical bar",
        "Stacked horizontal bar",
        "Line",
        "Scatter",
    ]
    pmc = [
        "horizontal bar",
        "vertical bar",
        "vertical box",
        "horizontal box",
        "horizontal interval",
        "vertical interval",
        "manhattan",
        "map",
        "surface",
        "venn",
        "scatter",
        "pie",
        "line",
        "scatter-line",
        "area",
        "heatmap",
    ]
    assert [normalize_chart_type(s) for s in synth] == list(chart_info.CLASSES["synthetic_2019"])
    assert [normalize_chart_type(s) for s in pmc] == list(chart_info.CLASSES["pmc_2020"])


def test_nearest_class_rule():
    classes = chart_info.CLASSES["synthetic_2019"]
    assert chart_info.nearest_class("grouped_vertical_bar", classes) == (
        "grouped_vertical_bar",
        True,
    )
    assert chart_info.nearest_class(" Grouped - vertical  bar", classes) == (
        "grouped_vertical_bar",
        True,
    )
    assert chart_info.nearest_class("groupd_vertcal_bar", classes) == (
        "grouped_vertical_bar",
        False,
    )
    assert chart_info.nearest_class("lines", classes) == ("line", False)
    assert chart_info.nearest_class("", classes) == ("", False)
    assert chart_info.nearest_class("a", ("ab", "ac")) == ("ab", False)  # tie: first listed
    assert chart_info.nearest_class("a", ("ac", "ab")) == ("ac", False)


def test_task1_scores_hand_case():
    # metrics reference §3.1: GT {line: [a, b], scatter: [c]}, pred {a: line, b: scatter,
    # c: scatter} -> F_line = F_scatter = 2/3, accuracy 2/3.
    records = [
        {"id": k, "target": t, "meta": {"num_series": 1}}
        for k, t in (("a", "line"), ("b", "line"), ("c", "scatter"))
    ]
    scores, extra = chart_info.task1_scores(
        ["line", "Scatter", "scater"], records, chart_info.CLASSES["synthetic_2019"], "spec"
    )
    assert scores.metrics["f1"] == pytest.approx(2 / 3)
    assert scores.metrics["accuracy"] == pytest.approx(2 / 3)
    assert scores.metrics["num_inexact"] == 1
    assert [e["label"] for e in extra] == ["line", "scatter", "scatter"]
    # Single-series grouped/stacked bars are interchangeable (2019 single_bars rule).
    bars = [
        {"id": "x", "target": "stacked_vertical_bar", "meta": {"num_series": 1}},
        {"id": "y", "target": "stacked_vertical_bar", "meta": {"num_series": 2}},
    ]
    scores, _ = chart_info.task1_scores(
        ["grouped_vertical_bar"] * 2, bars, chart_info.CLASSES["synthetic_2019"], "spec"
    )
    assert scores.metrics["accuracy"] == pytest.approx(0.5)


# ---------------------------------------------------------------- task 3 -------------------


@pytest.fixture(scope="module")
def task3_records(tfds_dir):
    data_dir = tfds_dir("chart_info", "synthetic_2019")
    builder_dir = sources.tfds_builder_dir("chart_info/synthetic_2019", data_dir)
    records = list(
        sources.TfdsSource(
            "chart_info/synthetic_2019",
            data_dir,
            expand=chart_info.task3_records,
            field_keys=chart_info.TASK3_KEYS,
            image_key=None,
            encoded_keys=("image",),
        ).records("train")
    )
    return builder_dir, records


def test_task3_records_and_gold_regrouping(task3_records):
    builder_dir, records = task3_records
    assert sorted(r["id"] for r in records) == [
        "21987/0",
        "344/0",
        "344/14",
        "344/3",
        "344/7",
        "7/0",
    ]
    title = next(r for r in records if r["id"] == "344/0")
    # bb x0=431 y0=19 w=480 h=19 over the dummy image's 16 x 12 pixels.
    assert title["prompt"] == (
        "chart: grouped_vertical_bar | text: Sales by year | box: x=26.94 y=1.58 w=30.00 h=1.58"
    )
    assert title["target"] == "chart_title" and title["meta"]["chart"] == "344"
    for compat in ("spec", "icdar2019"):
        scores, _ = chart_info.task3_scores([r["target"] for r in records], records, compat)
        assert scores.metrics["f1"] == 1.0 and scores.metrics["accuracy"] == 1.0
    assert scores.metrics["num_charts"] == 3
    assert chart_info.count_skipped(builder_dir, "train", "task3") == {
        "num_unannotated": 1,
        "num_blocks_without_role": 0,
    }  # the pie


def test_task3_one_wrong_role(task3_records):
    # GT: chart_title {344/0}, tick_label {21987/0, 344/3, 344/7}, legend_label {344/14},
    # axis_title {7/0}; 344/3 predicted axis_title: tick F = 0.8, axis F = 2/3, others 1.
    _, records = task3_records
    texts = ["axis title" if r["id"] == "344/3" else r["target"] for r in records]
    scores, extra = chart_info.task3_scores(texts, records, "spec")
    assert scores.metrics["f1"] == pytest.approx((1 + 0.8 + 1 + 2 / 3) / 4)
    assert scores.metrics["accuracy"] == pytest.approx(5 / 6)
    assert scores.breakdowns["text_role"]["tick_label"]["recall"] == pytest.approx(2 / 3)
    assert [e["label"] for e in extra] == [
        r["target"] if r["id"] != "344/3" else "axis_title" for r in records
    ]


# ---------------------------------------------------------------- task 6b ------------------


def _example(stem: str, doc: dict) -> dict:
    """An annotation file as the dotted TFDS columns chart_info_tables.chart_info_record reads."""
    from tfds_builders.chart_info import annotations

    p = annotations.parse(doc)
    cols = {
        f"{seq}.{k}": [item[k] for item in p[seq]]
        for seq, keys in (
            ("text_blocks", ("id", "text", "bbox")),
            ("text_roles", ("id", "role")),
            ("axis_ticks", ("axis", "id")),
        )
        for k in keys
    }
    return {
        "id": stem,
        **{k: p[k] for k in ("chart_type", "chart_type_raw", "has_task6", "data_series_json")},
        **cols,
    }


def test_task6b_gold_tables_score_one(tmp_path):
    from chartjax.synth import chart_info as synth
    from chartjax.synth import chart_info_tables as tb

    for i, chart_type in enumerate(tb.CHART_TYPES):
        synth.generate(str(tmp_path), 1, seed=4, types=[chart_type], start=i)
    files = sorted(glob.glob(str(tmp_path / "json_gt" / "*.json")))
    files += sorted(glob.glob(os.path.join(DUMMY, "*", "**", "*.json"), recursive=True))
    records = []
    for path in files:
        with open(path) as f:
            record = chart_info_tables.chart_info_record(_example(path, json.load(f)))
        if record is not None:
            records.append(record)
    # 8 generated types (pie and donut annotate no task 6) + 4 synthetic and 2 PMC dummies.
    assert len(records) == 14
    layouts = {
        chart_info._box_layout(r["meta"]["data_series"])
        for r in records
        if "box" in r["meta"]["chart_type"]
    }
    assert layouts == {"dict", "list"}
    scores, _ = chart_info.task6b_scores([r["target"] for r in records], records, "spec")
    assert scores.metrics["task6b_score"] == 1.0
    assert scores.metrics["task6b_name_score"] == 1.0
    assert scores.metrics["task6b_ds_score"] == 1.0
    assert scores.metrics["rms_f1"] == 1.0 and scores.metrics["rnss"] == 1.0
    # A wrong value lowers the score: bar A:10 B:20 C:30 with A predicted 11 -> 0.977036
    # (metrics reference §7, official 2020 script with CLI defaults).
    bar = {
        "id": "b",
        "target": "",
        "meta": {
            "chart_type": "vertical_bar",
            "chart_type_raw": "vertical bar",
            "data_series": [
                {
                    "name": "s",
                    "data": [{"x": k, "y": v} for k, v in (("A", 10.0), ("B", 20.0), ("C", 30.0))],
                }
            ],
        },
    }
    scores, _ = chart_info.task6b_scores(
        ["TITLE | \n | s\nA | 11\nB | 20\nC | 30"], [bar], "chartinfo2020"
    )
    assert scores.metrics["task6b_score"] == pytest.approx(0.977036, abs=1e-6)


def test_table_series_tolerates_ragged_tables():
    series = chart_info.table_series("TITLE | t\nx | a | b\n1 | 2\n3 |  | 4\n\n", "line")
    assert series == [
        {"name": "a", "data": [{"x": "1", "y": "2"}]},
        {"name": "b", "data": [{"x": "3", "y": "4"}]},
    ]
    assert chart_info.table_series("", "vertical_box") == []
    assert chart_info.table_series("x | Min | Q1\nA | 1 | 2", "vertical_box") == []


# ---------------------------------------------------------------- recipes ------------------


def _check_common(obj, rows, mode, n):
    assert obj["task"] == f"chart_info_{mode}" and obj["split"] == "train" and obj["step"] == 2
    assert obj["num_examples"] == len(rows) == n
    assert obj["metrics"]["num_unannotated"] == (0 if mode == "task1" else 1)


@pytest.mark.slow
def test_task1_recipe(tmp_path, vocab_file, tfds_dir, tiny_t5x):
    data_dir = tfds_dir("chart_info", "synthetic_2019")
    init = tiny_t5x("pix2struct")
    run_recipe(
        "chart_info_task1_pix2struct",
        tmp_path / "run",
        TINY_PIX2STRUCT
        + SPLITS
        + [f"VOCAB = '{vocab_file}'", f"INIT_PATH = '{init}'", f"DATA_DIR = '{data_dir}'"],
    )
    obj, rows = read_eval(tmp_path / "run", "train", 2)
    _check_common(obj, rows, "task1", 5)
    classes = chart_info.CLASSES["synthetic_2019"]
    assert all(r["label"] in classes or r["label"] == "" for r in rows)
    assert all(r["input"] == "" for r in rows)  # image only, no header
    acc = sum(r["label"] == r["target"] for r in rows) / len(rows)
    assert obj["metrics"]["accuracy"] == pytest.approx(acc)
    assert {"f1", "precision", "recall", "num_inexact"} <= set(obj["metrics"])
    assert {r["target"] for r in rows} == {
        "vertical_box",
        "grouped_vertical_bar",
        "pie",
        "line",
        "scatter",
    }


@pytest.mark.slow
def test_task3_recipe(tmp_path, vocab_file, tfds_dir, tiny_t5x):
    data_dir = tfds_dir("chart_info", "synthetic_2019")
    init = tiny_t5x("t5")
    run_recipe(
        "chart_info_task3_t5",
        tmp_path / "run",
        TINY_T5
        + SPLITS
        + [f"VOCAB = '{vocab_file}'", f"INIT_PATH = '{init}'", f"DATA_DIR = '{data_dir}'"],
    )
    obj, rows = read_eval(tmp_path / "run", "train", 2)
    _check_common(obj, rows, "task3", 6)
    assert obj["metrics"]["num_blocks_without_role"] == 0
    acc = sum(r["label"] == r["target"] for r in rows) / len(rows)
    assert obj["metrics"]["accuracy"] == pytest.approx(acc)
    assert set(obj["breakdowns"]["text_role"]) == {
        "chart_title",
        "tick_label",
        "legend_label",
        "axis_title",
    }
    assert all(r["label"] in chart_info.ROLES or r["label"] == "" for r in rows)


@pytest.mark.slow
def test_task6b_recipe(tmp_path, vocab_file, tfds_dir, tiny_t5x):
    data_dir = tfds_dir("chart_info", "synthetic_2019")
    init = tiny_t5x("pix2struct")
    run_recipe(
        "chart_info_task6b_deplot",
        tmp_path / "run",
        TINY_PIX2STRUCT
        + SPLITS
        + [f"VOCAB = '{vocab_file}'", f"INIT_PATH = '{init}'", f"DATA_DIR = '{data_dir}'"],
    )
    obj, rows = read_eval(tmp_path / "run", "train", 2)
    _check_common(obj, rows, "task6b", 4)
    assert_table_metrics(obj, rows)
    for name in ("task6b_score", "task6b_name_score", "task6b_ds_score"):
        assert 0.0 <= obj["metrics"][name] <= 1.0
    assert set(obj["breakdowns"]["task6b_chart_type"]) == {
        "grouped vertical bar",
        "line",
        "scatter",
        "vertical box",
    }
