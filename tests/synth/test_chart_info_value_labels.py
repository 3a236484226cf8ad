"""CHART-Info generator options for the Pix2Struct learning check (issue 15, item 5):
--value-labels (each bar's cell printed on it) and --max-series; without them the release-layout
output is identical (pixels, JSON, tables) to what the generator wrote before they existed."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from chartjax.data import tables
from chartjax.synth import chart_info as ci
from chartjax.synth import chart_info_tables as tb

# sha256 over every file `_default_corpus` writes (its relative path, then its bytes, or for a
# PNG its mode, size and decoded pixels: the PNG encoder's bytes are not the generator's
# output), taken with the generator of commit a940a28 (before these options) on this project's
# pinned matplotlib; a different matplotlib/FreeType may rasterize text differently and then
# this needs retaking.
BEFORE_OPTIONS_SHA256 = "83df4fadbfe98e42b954d1b0f7dcde8b4abfb8ed2edb21dbb198f8aaf54f0172"
BARS = ("Grouped vertical bar", "Grouped horizontal bar", "Stacked vertical bar")


def _default_corpus(out: Path, **options) -> str:
    ci.generate(str(out), 10, seed=7, **options)  # all ten types at the release size
    ci.generate(
        str(out), 4, seed=7, start=10, size=(640, 480), max_categories=3, max_topics=4, **options
    )
    h = hashlib.sha256()
    for p in sorted(out.rglob("*")):
        if not p.is_file():
            continue
        h.update(str(p.relative_to(out)).encode())
        if p.suffix == ".png":
            with Image.open(p) as im:
                h.update(f"{im.mode} {im.size}".encode())
                h.update(im.tobytes())
        else:
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.mark.slow
def test_default_output_is_identical_to_before_the_options(tmp_path):
    assert _default_corpus(tmp_path / "default") == BEFORE_OPTIONS_SHA256
    # A series cap above every type's range and no labels: the same stream, the same bytes.
    assert _default_corpus(tmp_path / "loose", max_series=5, value_labels=None) == (
        BEFORE_OPTIONS_SHA256
    )


def _doc_blocks(doc: dict) -> list[tuple[str, str, dict]]:
    roles = {r["id"]: r["role"] for r in doc["task3"]["output"]["text_roles"]}
    return [(b["text"], roles[b["id"]], b["bb"]) for b in doc["task2"]["output"]["text_blocks"]]


@pytest.mark.parametrize("chart_type", BARS)
def test_value_labels_print_every_cell_where_its_bar_is(chart_type):
    plain = ci.make_chart(3, 1, (chart_type,), size=(640, 480), max_categories=3)
    labelled = ci.make_chart(
        3, 1, (chart_type,), size=(640, 480), max_categories=3, value_labels=14
    )
    # Same table and series (no random draws added); the image differs by the printed labels.
    assert labelled.table == plain.table
    series = labelled.doc["task6"]["output"]["data series"]
    assert series == plain.doc["task6"]["output"]["data series"]
    assert labelled.png != plain.png
    cells = [row[1:] for row in tables.parse(labelled.table).rows]
    want = [c for row in cells for c in row]  # bars are listed category by category
    blocks = _doc_blocks(labelled.doc)
    got = [(text, bb) for text, role, bb in blocks if role == "value_label"]
    assert [t for t, _ in got] == want
    # Labels come after every other block, so those keep their ids. (The style may differ from
    # the plain chart's: a layout that the labels make fail draws the next style.)
    assert [b[1] for b in blocks][-len(want) :] == ["value_label"] * len(want)
    bars = labelled.doc["task6"]["output"]["visual elements"]["bars"]
    assert len(bars) == len(want)
    rgb = np.asarray(Image.open(io.BytesIO(labelled.png)).convert("L"))
    for (text, bb), bar in zip(got, bars):
        cx, cy = bb["x0"] + bb["width"] / 2, bb["y0"] + bb["height"] / 2
        bx0, by0 = bar["x0"], bar["y0"]
        bx1, by1 = bx0 + bar["width"], by0 + bar["height"]
        if chart_type.startswith("Stacked"):  # centred on its segment
            assert abs(cx - (bx0 + bx1) / 2) <= 2 and abs(cy - (by0 + by1) / 2) <= 2, text
        elif "horizontal" in chart_type:  # just past the bar's end, level with it
            assert abs(cy - (by0 + by1) / 2) <= 2, text
            assert bb["x0"] >= bx1 - 2 or bb["x0"] + bb["width"] <= bx0 + 2, text
        else:  # just above (or below, negative values) the bar, centred on it
            assert abs(cx - (bx0 + bx1) / 2) <= 2, text
            assert bb["y0"] + bb["height"] <= by0 + 2 or bb["y0"] >= by1 - 2, text
        box = rgb[bb["y0"] : bb["y0"] + bb["height"], bb["x0"] : bb["x0"] + bb["width"]]
        assert box.min() < 128 and box.max() > 200, text  # dark glyphs on the white backing


def test_max_series_caps_bars_and_lines_and_one_series_has_no_legend():
    for t in (*BARS, "Line"):
        counts = set()
        for i in range(10):
            data = tb.synthesize(ci.chart_rng(5, i), t, max_series=2)
            counts.add(len(data.series))
            assert all(len(row) == len(data.series) for row in data.cells)
        assert counts <= {1, 2} and (2 in counts if t != "Line" else True), (t, counts)
        single = tb.synthesize(ci.chart_rng(5, 0), t, max_series=1)
        assert single.series == (single.y_label,), t  # one series: named by the value axis
    chart = ci.make_chart(5, 0, ("Grouped vertical bar",), max_series=1)
    assert chart.doc["task5"]["output"] == {"legend_pairs": []}
    header = tables.parse(chart.table).header
    assert len(header) == 2


def test_bad_options_are_named_before_any_folder(tmp_path):
    with pytest.raises(ValueError, match="max_series"):
        ci.generate(str(tmp_path / "a"), 1, max_series=0)
    with pytest.raises(ValueError, match="value_labels"):
        ci.generate(str(tmp_path / "b"), 1, value_labels=-3)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_cli_flags(tmp_path):
    from chartjax.tools.synth import main

    out = tmp_path / "cli"
    argv = ["chart_info", "--out", str(out), "--num", "2", "--seed", "1"]
    argv += ["--types", "Stacked_vertical_bar", "--size", "480x360", "--max-series", "1"]
    argv += ["--value-labels", "12"]
    assert main(argv) == 0
    for stem in ("0", "1"):
        doc = json.loads((out / "json_gt" / f"{stem}.json").read_text())
        table = tables.parse((out / "tables" / f"{stem}.txt").read_text())
        labels = [t for t, role, _ in _doc_blocks(doc) if role == "value_label"]
        assert labels == [row[1] for row in table.rows] and len(table.header) == 2
