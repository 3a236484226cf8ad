"""DePlot task: CHART-Info tables derived from the builder's examples equal the generator's
tables/<stem>.txt; the recipes deplot_chart_info (2 steps + eval) and deplot_statista_zero
(zero-shot, eval only from a tiny T5X checkpoint) on the builders' dummy data."""

from __future__ import annotations

import json
import os
import re
import shutil

import gin
import pytest

from chartjax import config as config_lib
from chartjax.data import sources, tables
from chartjax.metrics import prediction_files, report
from chartjax.metrics import tables as table_metrics
from chartjax.tasks import deplot
from chartjax.tasks.chart_info import tables as chart_info_tables

# The same tiny Pix2Struct for every image recipe (test_chart_info.py too), so the
# session's persistent compilation cache serves later recipes. 8 simulated devices: batch 8.
# 1+1 layers, as tests/tasks/tiny_recipes.py: tracing, which no cache saves, dominates.
TINY_PIX2STRUCT = [
    "Pix2StructConfig.emb_dim = 32",
    "Pix2StructConfig.num_heads = 4",
    "Pix2StructConfig.head_dim = 8",
    "Pix2StructConfig.mlp_dim = 64",
    "Pix2StructConfig.num_encoder_layers = 1",
    "Pix2StructConfig.num_decoder_layers = 1",
    "Pix2StructConfig.vocab_size = 400",
    "Pix2StructConfig.patch_size = 4",
    "Pix2StructConfig.max_position_embeddings = 64",
    "Pix2StructConfig.dtype = 'float32'",
    "Features.max_patches = 64",
    "Features.patch_size = 4",
    "Features.max_input_len = 64",
    "Features.max_target_len = 32",
    "Decoding.max_decode_len = 8",
    "train.global_batch_size = 8",
    "evaluate.eval_batch_size = 8",
    "train.eval_batch_size = 8",
    "train.progress = False",
    "train.num_train_steps = 2",
    "train.log_every = 1",
    "schedule.total_steps = 10000",  # the learning-rate schedule is part of the compiled step
]


def tiny_t5x_checkpoint(path: str, family: str = "pix2struct") -> str:
    """A T5X checkpoint of the tiny model the recipes are overridden to (vocab 400, 1+1
    layers); written once where `path` is shared."""
    from chartjax.interop import t5x
    from chartjax.models import t5, tiny
    from chartjax.models.t5 import pix2struct
    from tests.tasks.tiny_recipes import TINY_LAYERS

    if not os.path.exists(os.path.join(path, "checkpoint")):
        if family == "pix2struct":
            model = pix2struct.build(tiny.tiny_pix2struct(**TINY_LAYERS), 0)
        else:
            model = t5.build(tiny.tiny_t5(**TINY_LAYERS), 0)
        t5x.save(model, path)
    return path


def run_recipe(recipe: str, workdir, bindings: list[str], *, train: bool = True) -> dict:
    from chartjax import evaluate as evaluate_lib
    from chartjax import train as train_lib

    gin.clear_config()
    config_lib.parse_gin([f"tasks/{recipe}.gin"], bindings)
    try:
        return train_lib.train(str(workdir)) if train else evaluate_lib.evaluate(str(workdir))
    finally:
        gin.clear_config()


def read_eval(workdir, split: str, step: int) -> tuple[dict, list[dict]]:
    d = os.path.join(str(workdir), "eval", split, f"step_{step}")
    with open(os.path.join(d, "metrics.json")) as f:
        obj = json.load(f)
    report.validate_metrics(obj)
    return obj, prediction_files.read_jsonl(os.path.join(d, "predictions.jsonl"))


def assert_table_metrics(obj: dict, rows: list[dict]) -> None:
    """RMS/RNSS in metrics.json are what predictions.jsonl implies."""
    preds, targets = [r["prediction"] for r in rows], [r["target"] for r in rows]
    want = table_metrics.rms(preds, targets).metrics
    want["rnss"] = table_metrics.rnss(preds, targets).metrics["rnss"]
    for name, value in want.items():
        assert obj["metrics"][name] == pytest.approx(value, abs=1e-9), name
        assert 0.0 <= obj["metrics"][name] <= 1.0
    for row in rows:
        assert row["rms_f1"] == pytest.approx(
            table_metrics.rms_example([row["target"]], row["prediction"])[2]
        )


# ---------------------------------------------------------------- derivation ---------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """One generated chart of each of the ten 2019 types, built with the chart_info builder."""
    import tensorflow_datasets as tfds

    from chartjax.synth import chart_info as synth
    from chartjax.synth import chart_info_tables as tb
    from tfds_builders.chart_info import chart_info as builder_mod

    root = tmp_path_factory.mktemp("gen")
    raw, data_dir = str(root / "raw"), str(root / "tfds")
    for i, chart_type in enumerate(tb.CHART_TYPES):
        synth.generate(raw, 1, seed=11, types=[chart_type], start=i)
    builder = builder_mod.Builder(data_dir=data_dir, config="synthetic_2019")
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=raw))
    return raw, sources.tfds_builder_dir("chart_info/synthetic_2019", data_dir)


def _expected_table(raw: str, index: int, chart_type: str) -> str:
    """tables/<index>.txt with the title / axis titles blanked that the chart does not draw."""
    from chartjax.synth import chart_info as synth

    with open(os.path.join(raw, "tables", f"{index}.txt"), encoding="utf-8") as f:
        table = tables.parse(f.read())
    _, drawn = synth.draw_chart(11, index, [chart_type])
    style, header = drawn.style, list(table.header)
    if not style.show_x_title:
        header[0] = ""
    if chart_type == "Scatter" and not style.show_y_title:
        header[1] = ""
    title = table.title if style.show_title else ""
    return tables.linearize(header, table.rows, title=title)


@pytest.mark.slow
def test_derived_tables_equal_generator_tables(generated):
    from chartjax.synth import chart_info_tables as tb

    raw, builder_dir = generated

    def expand(example):
        record = chart_info_tables.chart_info_record(example)
        return [] if record is None else [record]

    records = {
        r["id"]: r
        for r in sources.TfdsSource(
            "chart_info/synthetic_2019",
            directory=builder_dir,
            expand=expand,
            field_keys=chart_info_tables.CHART_INFO_KEYS,
            image_key=None,
        ).records("train")
    }
    types = dict(enumerate(tb.CHART_TYPES))
    assert sorted(records, key=int) == [
        str(i) for i, t in types.items() if t not in (tb.PIE, tb.DONUT)
    ]
    exact = 0
    for key, record in records.items():
        assert record["prompt"] == deplot.PROMPT
        assert record["target"] == _expected_table(raw, int(key), types[int(key)]), key
        with open(os.path.join(raw, "tables", f"{key}.txt"), encoding="utf-8") as f:
            exact += record["target"] == f.read()
    assert exact >= 4  # most charts draw every title: those match the file byte for byte
    assert (
        chart_info_tables.count_unannotated(builder_dir, "train", 6) == 2
    )  # the pie and the donut


def test_box_header_matches_generator():
    from chartjax.synth import chart_info_tables as tb

    assert chart_info_tables.BOX_HEADER == tb.BOX_HEADER and set(
        chart_info_tables.BOX_STATS
    ) == set(tb.BOX_STATS)


def test_number_formatting_and_axis_titles():
    # One column group shares the decimals that write every value exactly; "-0" never appears.
    series = [
        {"name": "", "data": [{"x": "a", "y": 12.5}, {"x": "b", "y": 3.25}, {"x": "c", "y": -0.0}]}
    ]
    blocks = [
        {"id": 0, "text": "Rate\nof growth", "bbox": [10, 400, 20, 100]},  # left, rotated
        {"id": 1, "text": "Year", "bbox": [300, 700, 40, 10]},  # below the x ticks
        {"id": 2, "text": "a", "bbox": [200, 680, 10, 10]},
        {"id": 3, "text": "0", "bbox": [40, 600, 10, 10]},
    ]
    roles = [
        {"id": 0, "role": "axis_title"},
        {"id": 1, "role": "axis_title"},
        {"id": 2, "role": "tick_label"},
        {"id": 3, "role": "tick_label"},
    ]
    ticks = [{"axis": "x-axis", "id": 2}, {"axis": "y-axis", "id": 3}]
    table = chart_info_tables.chart_table("scatter", series, blocks, roles, ticks)
    assert table == "TITLE | \nYear | Rate of growth\na | 12.50\nb | 3.25\nc | 0.00"
    # Without ticks the first axis title is the x-axis one; bars share rows by x value.
    bars = [
        {"name": "s1", "data": [{"x": "a", "y": "1"}, {"x": "b", "y": "2"}]},
        {"name": "s2", "data": [{"x": "b", "y": "3"}, {"x": "c", "y": "4"}]},
    ]
    assert chart_info_tables.chart_table("grouped_vertical_bar", bars, blocks, roles, []) == (
        "TITLE | \nRate of growth | s1 | s2\na | 1 | \nb | 2 | 3\nc |  | 4"
    )
    assert chart_info_tables.chart_table("line", [], blocks, roles, ticks) is None


# ---------------------------------------------------------------- recipes ------------------


@pytest.mark.slow
def test_deplot_chart_info_recipe(tmp_path, vocab_file, tfds_dir, tiny_t5x):
    data_dir = tfds_dir("chart_info", "synthetic_2019")
    init = tiny_t5x("pix2struct")
    out = run_recipe(
        "deplot_chart_info",
        tmp_path / "run",
        TINY_PIX2STRUCT
        + [
            f"VOCAB = '{vocab_file}'",
            f"INIT_PATH = '{init}'",
            f"DATA_DIR = '{data_dir}'",
            "deplot_task.train_split = 'train'",
            "deplot_task.eval_splits = ('train',)",
        ],
    )
    assert out["step"] == 2 and out["stop_reason"] == "done"
    obj, rows = read_eval(tmp_path / "run", "train", 2)
    assert obj["task"] == "deplot" and obj["step"] == 2
    assert obj["num_examples"] == 4  # 5 dummy charts; the pie annotates no task 6
    assert obj["metrics"]["num_unannotated"] == 1
    assert_table_metrics(obj, rows)
    assert set(obj["breakdowns"]["chart_type"]) == {
        "grouped_vertical_bar",
        "line",
        "scatter",
        "vertical_box",
    }
    targets = {r["id"]: r["target"] for r in rows}
    assert targets["344"] == "TITLE | Sales by year\n | 2011\n2005.0 | 21.4268493652"
    assert targets["8"] == "TITLE | \n | \n0.5 | 1.25\n1.5 | 2.00"
    assert all(r["input"] == deplot.PROMPT for r in rows)
    # each row's chart, inline (issue 44 item 19: a DePlot report showed none)
    html = (tmp_path / "run" / "eval" / "train" / "step_2" / "report.html").read_text()
    assert html.count('<td class="thumb"><img src="data:image/png;base64,') == len(rows) == 4


@pytest.mark.slow
def test_deplot_statista_zero_recipe(tmp_path, vocab_file, tfds_dir, tiny_t5x):
    data_dir = tfds_dir("chart_to_text", "statista")
    init = tiny_t5x("pix2struct")
    out = run_recipe(
        "deplot_statista_zero",
        tmp_path / "run",
        TINY_PIX2STRUCT
        + [f"VOCAB = '{vocab_file}'", f"INIT_PATH = '{init}'", f"DATA_DIR = '{data_dir}'"],
        train=False,
    )
    assert set(out) == {"test"}
    obj, rows = read_eval(tmp_path / "run", "test", 0)
    assert obj["task"] == "deplot" and obj["split"] == "test" and obj["step"] == 0
    assert obj["num_examples"] == len(rows) == 1  # the dummy test split: two_col-3
    assert "num_unannotated" not in obj["metrics"]
    assert_table_metrics(obj, rows)
    assert rows[0]["id"] == "statista/two_col-3"
    assert rows[0]["target"].startswith("TITLE | ") and "\n" in rows[0]["target"]
    _assert_whole_report_shows_the_chart(tmp_path / "run" / "eval" / "test" / "step_0", tmp_path)


def _assert_whole_report_shows_the_chart(split_dir, tmp_path):
    """A DePlot report showed no chart image (issue 44 item 19): a copy in another folder,
    opened in headless Chromium, paints the example's chart, inline."""
    from tests.metrics.test_html_report import _run_chromium, _with_probe

    copy = tmp_path / "elsewhere" / "report.html"
    copy.parent.mkdir()
    shutil.copyfile(split_dir / "report.html", copy)
    text = copy.read_text()
    assert text.count('<td class="thumb"><img src="data:image/png;base64,') == 1
    assert not re.search(r'src="(?!data:)', text)
    js = (
        "window.addEventListener('load',function(){var im=Array.from(document.images);"
        "document.body.setAttribute('data-painted',im.filter(function(i){"
        "return i.complete&&i.naturalWidth>0;}).length+'/'+im.length);});"
    )
    dom = _run_chromium(tmp_path, _with_probe(copy, js), "--dump-dom")
    assert re.search(r'data-painted="(\d+)/(\d+)"', dom).groups() == ("1", "1")
