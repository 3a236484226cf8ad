"""CHART-Info builder (synthetic_2019, pmc_2020) on dummy_data/ and on generator output."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow_datasets as tfds
from PIL import Image

from chartjax.data import tfds_records
from tfds_builders.chart_info import annotations
from tfds_builders.chart_info.chart_info import Builder
from tfds_builders.common.bad_input import BadInputError, read_skip_report

DUMMY = Path(__file__).resolve().parent / "dummy_data"


def _build(manual_dir, data_dir, config, **kwargs) -> tfds.core.DatasetBuilder:
    builder = Builder(data_dir=os.fspath(data_dir), config=config, **kwargs)
    download = tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir))
    builder.download_and_prepare(download_config=download)
    return builder


def _examples(builder) -> dict[str, dict]:
    return {
        ex["id"].decode(): ex
        for ex in tfds_records.split_examples(str(builder.data_path), "train", skip_decoding=())
    }


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    path = tmp_path_factory.mktemp("ci")
    return _examples(_build(DUMMY / "synthetic_2019", path, "synthetic_2019"))


@pytest.fixture(scope="module")
def pmc(tmp_path_factory):
    return _examples(_build(DUMMY / "pmc_2020", tmp_path_factory.mktemp("ci"), "pmc_2020"))


def _has(ex) -> list[bool]:
    return [bool(ex[f"has_task{k}"]) for k in range(1, 7)]


def test_synthetic_ids_and_image(synth):
    assert sorted(synth) == ["21987", "344", "686", "7", "8"]
    with Image.open(DUMMY / "synthetic_2019" / "png" / "344.png") as img:
        np.testing.assert_array_equal(synth["344"]["image"], np.asarray(img.convert("RGB")))
    assert synth["344"]["image_file"] == b"png/344.png"


def test_synthetic_grouped_bar_all_tasks(synth):
    ex = synth["344"]
    assert _has(ex) == [True] * 6
    assert (ex["chart_type"], ex["chart_type_raw"]) == (
        b"grouped_vertical_bar",
        b"Grouped vertical bar",
    )
    blocks = ex["text_blocks"]
    assert blocks["id"].tolist() == [0, 3, 7, 14]
    assert blocks["text"][0] == b"Sales by year"
    np.testing.assert_array_equal(blocks["bbox"][0], [431, 19, 480, 19])
    np.testing.assert_array_equal(blocks["polygon"][0], [431, 19, 911, 19, 911, 38, 431, 38])
    assert ex["text_roles"]["role"].tolist() == [
        b"chart_title",
        b"tick_label",
        b"tick_label",
        b"legend_label",
    ]
    assert ex["has_plot_bb"] and ex["plot_bb"].tolist() == [83, 47, 1175, 790]
    assert ex["axis_ticks"]["axis"].tolist() == [b"x-axis", b"y-axis"]
    assert ex["axis_ticks"]["id"].tolist() == [3, 7]
    np.testing.assert_array_equal(ex["axis_ticks"]["tick_pt"], [[201, 837], [83, 832]])
    assert ex["legend_pairs"]["id"].tolist() == [14]
    np.testing.assert_array_equal(ex["legend_pairs"]["bb"], [[843, 101, 33, 12]])
    points = ex["data_points"]
    assert points["x"].tolist() == [b"2005.0"] and points["y_text"].tolist() == [b"21.4268493652"]
    assert points["y"][0] == pytest.approx(21.4268493652)
    assert ex["series_names"].tolist() == [b"2011"]
    np.testing.assert_array_equal(ex["bars"], [[140, 125, 62, 708]])
    original = json.loads((DUMMY / "synthetic_2019" / "json_gt" / "344.json").read_text())
    assert json.loads(ex["data_series_json"]) == original["task6"]["output"]["data series"]
    assert json.loads(ex["visual_elements_json"]) == original["task6"]["output"]["visual elements"]


def test_synthetic_pie_tasks_absent(synth):
    ex = synth["686"]
    assert _has(ex) == [True, False, False, False, False, False]
    assert ex["chart_type"] == b"pie"
    assert ex["text_blocks"]["id"].shape == (0,) and ex["text_blocks"]["bbox"].shape == (0, 4)
    assert not ex["has_plot_bb"] and ex["plot_bb"].tolist() == [0, 0, 0, 0]
    assert ex["data_series_json"] == b"" and ex["data_points"]["y"].shape == (0,)


def test_synthetic_box_line_scatter(synth):
    box = synth["21987"]
    assert box["chart_type"] == b"vertical_box"
    stats = box["box_stats"]
    assert stats["series"].tolist() == [0] and stats["x"].tolist() == [b""]  # dict-style data
    got = [float(stats[s][0]) for s in annotations.BOX_STATS]
    assert got == [1.0, 3.5, 5.25, 7.0, 9.0]
    assert box["boxplots"]["stat"].tolist() == [
        b"first_quartile",
        b"max",
        b"median",
        b"min",
        b"third_quartile",
    ]
    np.testing.assert_array_equal(box["boxplots"]["bb"][0], [100, 50, 40, 0])
    line = synth["7"]
    assert line["lines"]["line"].tolist() == [0, 0]
    assert line["lines"]["x"].tolist() == [40, 240] and line["lines"]["y"].tolist() == [100, 60]
    assert line["data_points"]["y"].tolist() == [2.5, 3.0]
    scatter = synth["8"]
    assert scatter["series_names"].tolist() == [b""]
    assert scatter["data_points"]["y_text"].tolist() == [b"1.25", b"2.0"]  # float y in JSON
    assert scatter["scatter_points"]["series"].tolist() == [-1, -1]  # flat 2019 list
    assert scatter["scatter_points"]["x"].tolist() == [50, 150]


def test_pmc_layout(pmc):
    assert sorted(pmc) == [
        "area/PMC2___b-2_panel_1",
        "line/PMC5___e-5",
        "vertical_bar/PMC3___c-3",
        "vertical_box/PMC1087844___1471-2350-6-15-1",
    ]
    box = pmc["vertical_box/PMC1087844___1471-2350-6-15-1"]
    assert _has(box) == [True] * 6
    assert box["chart_type"] == b"vertical_box" and box["chart_type_raw"] == b"vertical box"
    blocks = box["text_blocks"]
    np.testing.assert_array_equal(blocks["bbox"][0], [10, 5, 80, 15])
    np.testing.assert_array_equal(blocks["bbox"][1], [40, 30, 20, 10])  # inverted quad
    np.testing.assert_array_equal(blocks["polygon"][1], [60, 40, 40, 40, 40, 30, 60, 30])
    assert blocks["text"][2] == b""  # empty blocks are kept
    assert box["text_roles"]["role"].tolist() == [b"chart_title", b"tick_label", b"other"]
    assert box["axis_tick_types"]["axis"].tolist() == [b"x-tick-type"]
    assert box["axis_tick_types"]["type"].tolist() == [b"markers"]
    assert box["box_stats"]["x"].tolist() == [b"WT"]  # list-style data with x
    assert box["box_stats"]["median"].tolist() == [3.0]
    assert box["series_names"].tolist() == [b"[unnamed data series #0]"]
    area = pmc["area/PMC2___b-2_panel_1"]
    assert _has(area) == [True, False, False, False, False, False]  # tasks 2-6 null
    bar = pmc["vertical_bar/PMC3___c-3"]
    assert bar["data_points"]["y_text"].tolist() == [b"12.5", b"n/a", b"7.0"]
    y = bar["data_points"]["y"].tolist()
    assert y[0] == 12.5 and math.isnan(y[1]) and y[2] == 7.0
    test_mode = pmc["line/PMC5___e-5"]
    assert _has(test_mode) == [True, True, True, True, True, False]
    assert test_mode["image"].shape == (12, 16, 3)


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("Grouped vertical bar", "grouped_vertical_bar"),
        ("Horizontal Grouped Bar", "grouped_horizontal_bar"),
        ("Stacked horizontal bar", "stacked_horizontal_bar"),
        ("Vertical box", "vertical_box"),
        ("vertical box", "vertical_box"),
        ("scatter-line", "scatter_line"),
        ("Donut", "donut"),
        ("non-chart", "non_chart"),
    ],
)
def test_normalize_chart_type(raw, normalized):
    assert annotations.normalize_chart_type(raw) == normalized


def test_bad_inputs(tmp_path):
    root = tmp_path / "m"
    shutil.copytree(DUMMY / "synthetic_2019", root)
    (root / "json_gt" / "7.json").write_text('{"task1": ')  # truncated JSON
    with pytest.raises(BadInputError, match=r"json_gt/7\.json: cannot parse JSON"):
        _build(root, tmp_path / "d1", "synthetic_2019")
    doc = json.loads((DUMMY / "synthetic_2019" / "json_gt" / "344.json").read_text())
    del doc["task2"]["output"]["text_blocks"][1]["id"]
    (root / "json_gt" / "7.json").write_text(json.dumps(doc))
    with pytest.raises(
        BadInputError, match=r"7\.json: task2\.text_blocks\[1\]: needs an integer id"
    ):
        _build(root, tmp_path / "d2", "synthetic_2019")
    (root / "png" / "8.png").unlink()
    builder = _build(root, tmp_path / "d3", "synthetic_2019", skip_bad=True)
    assert sorted(_examples(builder)) == ["21987", "344", "686"]
    report = read_skip_report(builder)
    assert report["skipped_per_split"] == {"train": 2}
    assert any("8.json: no image with this stem" in m for m in report["messages"])


def test_reads_the_chart_info_generator_output(tmp_path):
    """The generator writes the 2019 layout; every file must parse with all its tasks."""
    from chartjax.synth import chart_info as synth_chart_info

    synth_chart_info.generate(os.fspath(tmp_path / "raw"), 10, seed=0)
    examples = _examples(_build(tmp_path / "raw", tmp_path / "data", "synthetic_2019"))
    assert len(examples) == 10
    expected = {annotations.normalize_chart_type(t) for t in synth_chart_info.tb.CHART_TYPES}
    for ex in examples.values():
        assert ex["chart_type"].decode() in expected
        pie_like = ex["chart_type"] in (b"pie", b"donut")
        assert _has(ex) == [True] + [not pie_like] * 5
        if not pie_like:
            assert ex["text_blocks"]["id"].size > 0 and ex["has_plot_bb"]


def test_parse_unknown_point_shape_and_null_tasks():
    doc = {
        "task1": {"input": {}, "name": "Chart Classification", "output": {"chart_type": "line"}},
        "task2": None,
        "task6": {"output": {"data series": [{"name": "s", "data": [{"x": "a", "lo": 1}]}]}},
    }
    parsed = annotations.parse(doc)
    assert [parsed[f"has_task{k}"] for k in range(1, 7)] == [True, False, False, False, False, True]
    assert parsed["data_points"] == [] and parsed["box_stats"] == []  # not guessed
    assert json.loads(parsed["data_series_json"])[0]["data"] == [{"x": "a", "lo": 1}]
    with pytest.raises(annotations.AnnotationError, match=r"task4\.output is list"):
        annotations.parse({"task4": {"output": []}})


def _nothing_built(data_dir: Path, config: str) -> bool:
    """No prepared or half-written version folder of `config` under `data_dir`."""
    folder = data_dir / "chart_info" / config
    return not folder.exists() or not any(folder.iterdir())


def _set_x0(path: Path, value) -> None:
    doc = json.loads(path.read_text())
    doc["task2"]["output"]["text_blocks"][0]["bb"]["x0"] = value
    path.write_text(json.dumps(doc))  # writes NaN / Infinity as Python's json reads them back


@pytest.mark.parametrize(
    ("value", "shown"), [(float("nan"), "nan"), ("nan", "'nan'"), (float("inf"), "inf")]
)
def test_non_finite_box_coordinate_fails_naming_file_and_field(tmp_path, value, shown):
    root = tmp_path / "m"
    shutil.copytree(DUMMY / "synthetic_2019", root)
    _set_x0(root / "json_gt" / "344.json", value)
    with pytest.raises(BadInputError) as err:
        _build(root, tmp_path / "d", "synthetic_2019")
    assert str(err.value) == (
        f"{root / 'json_gt' / '344.json'}: task2.text_blocks[0].bb.x0: "
        f"{shown} is not a finite number"
    )
    assert _nothing_built(tmp_path / "d", "synthetic_2019")


def test_non_finite_box_coordinate_is_a_counted_skip(tmp_path):
    root = tmp_path / "m"
    shutil.copytree(DUMMY / "synthetic_2019", root)
    _set_x0(root / "json_gt" / "344.json", float("nan"))
    builder = _build(root, tmp_path / "d", "synthetic_2019", skip_bad=True)
    examples = _examples(builder)
    assert sorted(examples) == ["21987", "686", "7", "8"]
    assert all(np.isfinite(ex["text_blocks"]["bbox"]).all() for ex in examples.values())
    report = read_skip_report(builder)
    assert report["skipped_per_split"] == {"train": 1}
    message = report["messages"][0]
    assert "344.json: task2.text_blocks[0].bb.x0: nan is not a finite number" in message


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d["task4"]["output"]["_plot_bb"].update(width=math.inf), "task4._plot_bb.width"),
        (
            lambda d: d["task6"]["output"]["visual elements"]["bars"][0].update(y0=-math.inf),
            "bars[0].y0",
        ),
        (
            lambda d: d["task6"]["output"]["data series"][0]["data"][0].update(y=math.nan),
            "task6['data series'][0].data[0].y",
        ),
    ],
)
def test_parse_refuses_non_finite_numbers(edit, field):
    doc = json.loads((DUMMY / "synthetic_2019" / "json_gt" / "344.json").read_text())
    edit(doc)
    doc = json.loads(json.dumps(doc))  # as read from a file
    with pytest.raises(annotations.AnnotationError, match=re.escape(field) + r": -?\w+ is not a"):
        annotations.parse(doc)


def test_parse_keeps_a_non_numeric_value_string_as_text():
    doc = json.loads((DUMMY / "synthetic_2019" / "json_gt" / "344.json").read_text())
    doc["task6"]["output"]["data series"][0]["data"][0]["y"] = "inf"  # a label, not a number
    points = annotations.parse(doc)["data_points"]
    assert math.isnan(points[0]["y"]) and points[0]["y_text"] == "inf"


def _png16_grey(path: Path, values: np.ndarray) -> None:
    Image.fromarray(values.astype(np.uint16)).save(path)  # PIL writes mode I;16 as 16-bit grey


def test_16_bit_grey_png_scaled_by_its_bit_depth(tmp_path):
    """Grey level 200 of 65535 is 1 of 255, whether or not the image also holds white."""
    root = tmp_path / "m"
    shutil.copytree(DUMMY / "synthetic_2019", root)
    dark = np.full((12, 16), 200)
    _png16_grey(root / "png" / "7.png", dark)
    with_white = dark.copy()
    with_white[0, 0] = 65535
    _png16_grey(root / "png" / "8.png", with_white)
    examples = _examples(_build(root, tmp_path / "d", "synthetic_2019"))
    assert examples["7"]["image"][5, 5].tolist() == [1, 1, 1]
    assert examples["8"]["image"][5, 5].tolist() == [1, 1, 1]
    assert examples["8"]["image"][0, 0].tolist() == [255, 255, 255]


def test_a_generator_run_that_dies_leaves_nothing_to_build(tmp_path, monkeypatch):
    """The corpus appears only when complete: a run dying at chart 3 of 6 leaves no folder
    that `tfds build` could take for the whole corpus (it built 3 charts with status 0)."""
    from chartjax.synth import chart_info as synth_chart_info

    real = synth_chart_info.make_chart

    def dies_at_3(seed, index, *args, **kwargs):
        if index == 3:
            raise OSError(28, "No space left on device")
        return real(seed, index, *args, **kwargs)

    monkeypatch.setattr(synth_chart_info, "make_chart", dies_at_3)
    with pytest.raises(OSError, match="No space left"):
        synth_chart_info.generate(os.fspath(tmp_path / "raw"), 6, seed=0, size=(320, 240))
    assert os.listdir(tmp_path) == []  # neither raw/ nor the temporary raw.incomplete-*
    with pytest.raises(AssertionError, match=r"Manual directory \S+/raw does not exist"):
        _build(tmp_path / "raw", tmp_path / "data", "synthetic_2019")  # tfds's own check
    assert _nothing_built(tmp_path / "data", "synthetic_2019")
