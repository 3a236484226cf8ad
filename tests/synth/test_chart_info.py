"""CHART-Info-style generator: official 2019 schema, ticks, tables, determinism, CLI.

The schema checks are written from corpora reference §3.3 (the 2019 synthetic samples), not from
the generator's code. Pixel checks live in test_chart_info_pixels.py.
"""

from __future__ import annotations

import argparse
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from chartjax.data import tables
from chartjax.synth import chart_info as ci
from chartjax.synth import chart_info_tables as tb
from chartjax.synth.chart_info_json import official_json

TYPES = (
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
)
NAMES = {
    "task1": "Chart Classification",
    "task2": "Text Detection and Recognition",
    "task3": "Text Role Classification",
    "task4": "Axes Analysis",
    "task5": "Legend Analysis",
    "task6": "Data Extraction",
}
INPUTS = {
    "task1": [],
    "task2": ["task1"],
    "task3": ["task1", "task2"],
    "task4": ["task1", "task2"],
    "task5": ["task1", "task2"],
    "task6": ["task1", "task2", "task3", "task4", "task5"],
}
BB_KEYS = {"height", "width", "x0", "y0"}
STATS = {"first_quartile", "max", "median", "min", "third_quartile"}
W, H = 1280, 960


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    """Two charts of every type, written by the real writer (random styles)."""
    out = tmp_path_factory.mktemp("chart_info")
    for i, t in enumerate(TYPES * 2):
        ci.generate(str(out), 1, seed=11, types=[t], start=i)
    return out


def _load(corpus: Path):
    for path in sorted(corpus.joinpath("json_gt").glob("*.json"), key=lambda p: int(p.stem)):
        yield path.stem, json.loads(path.read_text())


# ---------------------------------------------------------------- schema (§3.3)


def _check_bb(bb, where: str, allow_flat: bool = False):
    assert set(bb) == BB_KEYS, where
    assert all(isinstance(bb[k], int) for k in BB_KEYS), where
    assert bb["width"] >= 0 and bb["height"] >= 0, where
    if not allow_flat:
        assert bb["width"] > 0 and bb["height"] > 0, where
    assert 0 <= bb["x0"] and bb["x0"] + bb["width"] <= W, where
    assert 0 <= bb["y0"] and bb["y0"] + bb["height"] <= H, where


def _check_pt(pt, where: str):
    assert set(pt) == {"x", "y"} and all(isinstance(pt[k], int) for k in pt), where
    assert 0 <= pt["x"] < W and 0 <= pt["y"] < H, where


@pytest.mark.slow
def test_every_type_generated_with_official_class_names(corpus):
    seen = [doc["task1"]["output"]["chart_type"] for _, doc in _load(corpus)]
    assert sorted(set(seen)) == sorted(TYPES)
    assert tuple(tb.CHART_TYPES) == TYPES


def test_layout_stems_match(corpus):
    pngs = {p.stem for p in corpus.joinpath("png").glob("*.png")}
    jsons = {p.stem for p in corpus.joinpath("json_gt").glob("*.json")}
    txts = {p.stem for p in corpus.joinpath("tables").glob("*.txt")}
    assert pngs == jsons == txts == {str(i) for i in range(20)}
    for stem in pngs:
        img = Image.open(corpus / "png" / f"{stem}.png")
        assert img.size == (W, H) and img.mode == "RGBA"


def test_official_schema(corpus):
    for stem, doc in _load(corpus):
        assert set(doc) == set(NAMES), stem
        for task, body in doc.items():
            assert set(body) == {"input", "name", "output"} and body["name"] == NAMES[task]
        ct = doc["task1"]["output"]["chart_type"]
        assert doc["task1"] == {"input": {}, "name": NAMES["task1"], "output": {"chart_type": ct}}
        if ct in ("Pie", "Donut"):  # tasks 2-6 present but empty, as in the release
            for task in list(NAMES)[1:]:
                assert doc[task]["input"] == {} and doc[task]["output"] == {}, stem
            continue
        for task, deps in INPUTS.items():
            assert doc[task]["input"] == {f"{d}_output": doc[d]["output"] for d in deps}, stem
        _check_annotated(stem, ct, doc)


def _check_annotated(stem: str, ct: str, doc: dict):
    blocks = doc["task2"]["output"]["text_blocks"]
    assert set(doc["task2"]["output"]) == {"text_blocks"}
    assert [b["id"] for b in blocks] == list(range(len(blocks))), stem
    for b in blocks:
        assert set(b) == {"bb", "id", "text"} and isinstance(b["text"], str) and b["text"], stem
        _check_bb(b["bb"], f"{stem} block {b['id']}")
    roles = {r["id"]: r["role"] for r in doc["task3"]["output"]["text_roles"]}
    assert set(roles) == {b["id"] for b in blocks}, stem
    assert set(roles.values()) <= {"chart_title", "axis_title", "tick_label", "legend_label"}
    t4 = doc["task4"]["output"]
    assert set(t4) == {"_plot_bb", "axes"} and set(t4["axes"]) == {"x-axis", "y-axis"}, stem
    _check_bb(t4["_plot_bb"], f"{stem} plot bb")
    tick_ids = []
    for axis in ("x-axis", "y-axis"):
        assert len(t4["axes"][axis]) >= 2, (stem, axis)
        for e in t4["axes"][axis]:
            assert set(e) == {"id", "tick_pt"} and roles[e["id"]] == "tick_label", stem
            _check_pt(e["tick_pt"], stem)
            tick_ids.append(e["id"])
    assert sorted(tick_ids) == sorted(i for i, r in roles.items() if r == "tick_label"), stem
    pairs = doc["task5"]["output"]["legend_pairs"]
    legend_ids = [i for i, r in roles.items() if r == "legend_label"]
    assert sorted(p["id"] for p in pairs) == legend_ids, stem
    for p in pairs:
        assert set(p) == {"bb", "id"}
        _check_bb(p["bb"], stem, allow_flat=True)  # line legends may be 0 high, as in 2019
    t6 = doc["task6"]["output"]
    assert set(t6) == {"data series", "visual elements"}, stem
    ve = t6["visual elements"]
    assert set(ve) == {"bars", "boxplots", "lines", "scatter points"}, stem
    series = t6["data series"]
    kinds = {k for k in ve if ve[k]}
    if "bar" in ct:
        assert kinds == {"bars"}, stem
        n = sum(len(s["data"]) for s in series)
        assert len(ve["bars"]) == n and len(pairs) == (len(series) if len(series) > 1 else 0)
        for b in ve["bars"]:
            _check_bb(b, stem, allow_flat=True)
    if "bar" in ct or ct == "Line":
        for s in series:
            assert set(s) == {"data", "name"} and isinstance(s["name"], str)
            for p in s["data"]:  # the 2019 files write bar and line values as strings
                assert set(p) == {"x", "y"} and isinstance(p["x"], str) and isinstance(p["y"], str)
                float(p["y"])
    if ct == "Line":
        assert kinds == {"lines"} and len(ve["lines"]) == len(series), stem
        for line, s in zip(ve["lines"], series):
            assert len(line) == len(s["data"])
            for p in line:
                _check_pt(p, stem)
    if ct == "Scatter":
        assert kinds == {"scatter points"} and len(series) == 1, stem
        assert len(ve["scatter points"]) == len(series[0]["data"])  # a flat list, as in 2019
        for p in series[0]["data"]:
            assert isinstance(p["x"], str) and isinstance(p["y"], float)
        for p in ve["scatter points"]:
            _check_pt(p, stem)
    if "box" in ct:
        assert kinds == {"boxplots"} and len(ve["boxplots"]) == len(series), stem
        for s, box in zip(series, ve["boxplots"]):
            assert isinstance(s["data"], dict) and set(s["data"]) == STATS  # a dict per box
            d = s["data"]
            assert d["min"] <= d["first_quartile"] <= d["median"] <= d["third_quartile"]
            assert d["third_quartile"] <= d["max"]
            assert set(box) == STATS
            for e in box.values():
                assert set(e) == {"_bb", "x", "y"}
                _check_bb(e["_bb"], stem, allow_flat=True)
                bb = e["_bb"]
                assert min(bb["width"], bb["height"]) == 0  # strokes: one side 0, as in 2019


def test_json_written_like_the_release(corpus):
    text = corpus.joinpath("json_gt", "4.json").read_text()
    doc = json.loads(text)
    assert text == json.dumps(doc, indent=4, sort_keys=True)


# ---------------------------------------------------------------- ticks and values


def _axis_map(doc, axis: str, roles_text: dict):
    """(coordinate name, [(label, pixel)]) for an axis, pixel along the axis direction."""
    entries = doc["task4"]["output"]["axes"][axis]
    xs = {e["tick_pt"]["x"] for e in entries}
    coord = "y" if len(xs) == 1 else "x"
    return coord, [(roles_text[e["id"]], e["tick_pt"][coord], e) for e in entries]


def _fit(pairs):
    v = np.array([float(t.replace(",", "")) for t, _, _ in pairs])
    p = np.array([px for _, px, _ in pairs], dtype=float)
    a, b = np.polyfit(v, p, 1)
    assert np.max(np.abs(a * v + b - p)) < 1.01  # tick points sit on an affine value scale
    return lambda x: a * x + b


def test_ticks_map_to_their_labels(corpus):
    for stem, doc in _load(corpus):
        ct = doc["task1"]["output"]["chart_type"]
        if ct in ("Pie", "Donut"):
            continue
        blocks = {b["id"]: b for b in doc["task2"]["output"]["text_blocks"]}
        plot = doc["task4"]["output"]["_plot_bb"]
        for axis in ("x-axis", "y-axis"):
            entries = doc["task4"]["output"]["axes"][axis]
            on_bottom = len({e["tick_pt"]["y"] for e in entries}) == 1
            for e in entries:
                pt, bb = e["tick_pt"], blocks[e["id"]]["bb"]
                if on_bottom:  # label hangs below its tick and covers its x (or ends at it)
                    assert abs(pt["y"] - (plot["y0"] + plot["height"])) <= 1, stem
                    assert bb["y0"] >= pt["y"], stem
                    assert bb["x0"] - 2 <= pt["x"] <= bb["x0"] + bb["width"] + 2, stem
                else:  # label left or right of the plot, centred on the tick
                    assert pt["x"] in (
                        plot["x0"],
                        plot["x0"] + plot["width"] - 1,
                        plot["x0"] + plot["width"],
                    ), stem
                    assert bb["y0"] - 2 <= pt["y"] <= bb["y0"] + bb["height"] + 2, stem
                    assert bb["x0"] + bb["width"] <= pt["x"] or bb["x0"] >= pt["x"], stem


def test_tables_parse_back_to_plotted_values(corpus):
    for stem, doc in _load(corpus):
        ct = doc["task1"]["output"]["chart_type"]
        table = tables.parse(corpus.joinpath("tables", f"{stem}.txt").read_text())
        assert table.title and all(len(r) == len(table.header) for r in table.rows)
        if ct in ("Pie", "Donut"):
            assert len(table.header) == 2 and all(float(r[1]) > 0 for r in table.rows)
            continue
        texts = {b["id"]: b["text"] for b in doc["task2"]["output"]["text_blocks"]}
        title = [
            texts[r["id"]]
            for r in doc["task3"]["output"]["text_roles"]
            if r["role"] == "chart_title"
        ]
        assert title in ([], [table.title.replace("\n", " ")]) or (
            title[0].replace("\n", " ") == table.title
        ), stem
        series = doc["task6"]["output"]["data series"]
        ve = doc["task6"]["output"]["visual elements"]
        _, ycoords = _axis_map(doc, "y-axis", texts)
        vmap = _fit(ycoords)
        xcoord, xticks = _axis_map(doc, "x-axis", texts)
        if ct == "Scatter":
            assert [(p["x"], p["y"]) for p in series[0]["data"]] == [
                (r[0], float(r[1])) for r in table.rows
            ]
            xmap = _fit(xticks)
            for p, pt in zip(series[0]["data"], ve["scatter points"]):
                assert abs(xmap(float(p["x"])) - pt["x"]) <= 1.5, stem
                assert abs(vmap(p["y"]) - pt["y"]) <= 1.5, stem
            continue
        # Category axis: labels (unwrapped) in axis order are the table's first column.
        cats = [r[0] for r in table.rows]
        ordered = sorted(xticks, key=lambda t: t[1])
        assert [t.replace("\n", " ") for t, _, _ in ordered] == cats, stem
        cat_px = [px for _, px, _ in ordered]
        horizontal = xcoord == "y"
        if "box" in ct:
            assert table.header[1:] == ("Min", "Q1", "Median", "Q3", "Max")
            for row, s, box, cpx in zip(table.rows, series, ve["boxplots"], cat_px):
                assert s["name"] == row[0]
                stats = ["min", "first_quartile", "median", "third_quartile", "max"]
                assert [s["data"][k] for k in stats] == [float(v) for v in row[1:]], stem
                for k in stats:
                    e = box[k]
                    along, across = ("x", "y") if horizontal else ("y", "x")
                    assert abs(vmap(s["data"][k]) - e[along]) <= 1.5, (stem, k)
                    assert abs(e[across] - cpx) <= 1.5, (stem, k)
            continue
        assert list(table.header[1:]) == [s["name"] for s in series], stem
        for k, s in enumerate(series):
            assert [(p["x"], p["y"]) for p in s["data"]] == [(r[0], r[1 + k]) for r in table.rows]
        vals = np.array([[float(v) for v in r[1:]] for r in table.rows])
        if ct == "Line":
            for k, line in enumerate(ve["lines"]):
                for c, pt in enumerate(line):
                    assert abs(vmap(vals[c, k]) - pt["y"]) <= 1.5, stem
                    assert abs(cat_px[c] - pt["x"]) <= 1.5, stem
            continue
        n_ser = vals.shape[1]
        for idx, bar in enumerate(ve["bars"]):  # category-major, as in the 2019 files
            c, k = divmod(idx, n_ser)
            v0 = vals[c, :k].sum() if ct.startswith("Stacked") else 0.0
            v1 = v0 + vals[c, k]
            if horizontal:
                lo_px, hi_px = bar["x0"], bar["x0"] + bar["width"]
                centre = bar["y0"] + bar["height"] / 2
            else:
                lo_px, hi_px = bar["y0"] + bar["height"], bar["y0"]
                centre = bar["x0"] + bar["width"] / 2
            ends = sorted([vmap(v0), vmap(v1)])
            # floored tick points vs outward-rounded box edges: up to 2 px apart
            assert abs(min(lo_px, hi_px) - ends[0]) <= 2.0, (stem, idx)
            assert abs(max(lo_px, hi_px) - ends[1]) <= 2.0, (stem, idx)
            if ct.startswith("Stacked") or n_ser == 1:
                assert abs(centre - cat_px[c]) <= 1.5, stem


# ---------------------------------------------------------------- determinism, CLI, encoder


def _read_all(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_deterministic_whatever_the_worker_count(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    ci.generate(str(a), 5, seed=5, workers=1)
    ci.generate(str(b), 5, seed=5, workers=2)
    ci.generate(str(c), 2, seed=5, workers=1, start=3)  # charts 3-4 alone equal those of a run
    files_a, files_b = _read_all(a), _read_all(b)
    assert len(files_a) == 15 and files_a == files_b
    for name, blob in _read_all(c).items():
        assert files_a[name] == blob, name
    other = ci.make_chart(6, 0)
    assert other.png != files_a["png/0.png"]


def test_cli_subcommand(tmp_path):
    from chartjax.tools.synth import main

    out = tmp_path / "cli"
    rc = main(
        [
            "chart_info",
            "--out",
            str(out),
            "--num",
            "2",
            "--seed",
            "3",
            "--types",
            "scatter",
            "Grouped_vertical_bar",
        ]
    )
    assert rc == 0
    docs = [json.loads(p.read_text()) for p in out.joinpath("json_gt").glob("*.json")]
    assert len(docs) == 2
    assert {d["task1"]["output"]["chart_type"] for d in docs} <= {"Scatter", "Grouped vertical bar"}


def test_unknown_type_is_named():
    with pytest.raises(ValueError, match="'Radar'"):
        ci.parse_types(["Radar"])
    assert ci.parse_types(["stacked-horizontal_bar", "PIE"]) == ("Stacked horizontal bar", "Pie")


def test_png_encoder_round_trips():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, size=(7, 5, 4), dtype=np.uint8)
    img[3:] = img[2]  # flat rows, as on a chart
    back = np.array(Image.open(io.BytesIO(ci.encode_png(img))))
    assert back.shape == (7, 5, 4) and (back == img).all()
    with pytest.raises(ValueError, match="RGBA"):
        ci.encode_png(img[..., :3])


def test_pie_json_is_task1_only():
    doc = official_json("Donut", None)
    assert doc["task1"]["output"] == {"chart_type": "Donut"}
    assert all(doc[t] == {"input": {}, "name": NAMES[t], "output": {}} for t in list(NAMES)[1:])


# ---------------------------------------------------------------- --size, --max-categories, --max-topics


def test_max_categories_caps_rows_and_a_loose_cap_changes_nothing():
    for t in TYPES:
        for i in range(8):
            capped = tb.synthesize(ci.chart_rng(4, i), t, max_categories=3)
            assert 1 <= len(capped.categories) <= 3, (t, i)
            assert len(capped.cells) == len(capped.categories), (t, i)
            # A cap above every type's range draws the very same table as no cap (same stream).
            assert tb.synthesize(ci.chart_rng(4, i), t, max_categories=100) == tb.synthesize(
                ci.chart_rng(4, i), t
            ), (t, i)
    with pytest.raises(ValueError, match="max_categories"):
        tb.synthesize(ci.chart_rng(0, 0), "Line", max_categories=0)


def test_max_topics_draws_from_the_first_topics_only():
    first = {t.title for t in tb.TOPICS[:2]}
    units = {t.unit for t in tb.TOPICS[:2]}
    seen = set()
    for t in TYPES:
        for i in range(6):
            data = tb.synthesize(ci.chart_rng(9, i), t, max_topics=2)
            assert data.y_label in units, (t, i)  # every type labels its value axis by topic
            if t != "Scatter":  # scatter titles join two topics ("A vs. B")
                seen |= {title for title in first if data.title.startswith(title)}
            assert tb.synthesize(ci.chart_rng(9, i), t, max_topics=len(tb.TOPICS)) == (
                tb.synthesize(ci.chart_rng(9, i), t)
            ), (t, i)
    assert seen == first
    with pytest.raises(ValueError, match="max_topics"):
        tb.synthesize(ci.chart_rng(0, 0), "Pie", max_topics=0)


def test_size_and_max_categories_through_the_cli(tmp_path):
    from chartjax.tools.synth import main

    out = tmp_path / "small"
    argv = [
        "chart_info",
        "--out",
        str(out),
        "--num",
        "3",
        "--seed",
        "2",
        "--types",
        "Grouped_vertical_bar",
        "Line",
        "--size",
        "640x480",
        "--max-categories",
        "2",
        "--max-topics",
        "1",
    ]
    assert main(argv) == 0
    for stem in ("0", "1", "2"):
        with Image.open(out / "png" / f"{stem}.png") as img:
            assert img.size == (640, 480), stem
        doc = json.loads((out / "json_gt" / f"{stem}.json").read_text())
        for block in doc["task2"]["output"]["text_blocks"]:
            bb = block["bb"]
            assert bb["x0"] + bb["width"] <= 640 and bb["y0"] + bb["height"] <= 480, stem
        table = tables.parse((out / "tables" / f"{stem}.txt").read_text())
        assert 1 <= len(table.rows) <= 2, stem
        assert table.title.startswith(tb.TOPICS[0].title), stem
    default = ci.make_chart(2, 0, ci.parse_types(["Grouped_vertical_bar", "Line"]))
    with Image.open(io.BytesIO(default.png)) as img:
        assert img.size == (W, H)


def test_bad_size_is_named():
    with pytest.raises(argparse.ArgumentTypeError, match="--size"):
        ci.parse_size("640")
    with pytest.raises(argparse.ArgumentTypeError, match="too small"):
        ci.parse_size("32x32")


def test_stacked_series_of_a_floored_topic_vary_and_total_inside_its_range():
    # Stacked series used to be capped at hi / n_series, below the floor of topics such as
    # life expectancy (45-85 years): every cell came out at the floor.
    topic = next(t for t in tb.TOPICS if t.title.startswith("Life expectancy"))
    for n_series in (2, 3, 4):
        vals = tb._series_values(np.random.default_rng(n_series), topic, 8, n_series, stacked=True)
        assert len(np.unique(np.round(vals, 1))) > n_series, vals
        totals = vals.sum(axis=1)
        assert (totals >= topic.lo - 1e-9).all() and (totals <= topic.hi + 1e-9).all(), totals


# ---------------------------------------------------------------- small sizes, interrupted runs


@pytest.mark.slow
def test_charts_no_style_fits_are_skipped_and_counted(tmp_path, capsys):
    """At 320x240 charts 6 and 7 of seed 0 fit no style: the run used to abort at chart 3
    (`no style fits in 6 tries`), leaving 3 of 30 charts. Now it writes the rest and says so."""
    from chartjax.tools.synth import main

    out = tmp_path / "small"
    assert main(["chart_info", "--out", str(out), "--num", "9", "--size", "320x240"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["skipped"] == 2 and summary["skipped_indices"] == [6, 7]
    assert sum(summary["charts"].values()) == 7
    written = {p.stem for p in out.joinpath("png").glob("*.png")}
    assert written == {p.stem for p in out.joinpath("json_gt").glob("*.json")}
    assert written == {"0", "1", "2", "3", "4", "5", "8"}
    with pytest.raises(
        ci.NoStyleFits, match=r"chart 6 \(seed 0, \w[\w ]*\): no style fits 320x240"
    ):
        ci.make_chart(0, 6, size=(320, 240))


def test_a_size_no_chart_fits_is_an_error_and_writes_nothing(tmp_path, capsys):
    from chartjax.tools.synth import main

    argv = ["chart_info", "--out", str(tmp_path / "tiny"), "--num", "2", "--size", "64x64"]
    assert main(argv) == 2
    assert "no chart fits 64x64: all 2 skipped" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_size_help_says_what_is_supported(capsys):
    from chartjax.tools.synth import main

    with pytest.raises(SystemExit):
        main(["chart_info", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "15% at 320x240" in text and "summary ('skipped')" in text


SUBS = (("png", "png"), ("json_gt", "json"), ("tables", "txt"))


def _dies_at(index: int, error: BaseException):
    real = ci.make_chart

    def make_chart(seed, i, *args, **kwargs):
        if i == index:
            raise error
        return real(seed, i, *args, **kwargs)

    return make_chart


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_run_that_dies_leaves_no_partial_corpus(tmp_path, monkeypatch, error):
    monkeypatch.setattr(ci, "make_chart", _dies_at(2, error))
    with pytest.raises(type(error)):
        ci.generate(str(tmp_path / "corpus"), 4, seed=1, size=(320, 240), types=["Pie"])
    assert list(tmp_path.iterdir()) == []  # neither corpus/ nor corpus.incomplete-*


def test_charts_added_to_a_corpus_arrive_only_when_all_are_done(tmp_path, monkeypatch):
    out = tmp_path / "corpus"
    options = dict(seed=1, size=(320, 240), types=["Pie"])
    ci.generate(str(out), 2, **options)
    before = _read_all(out)
    monkeypatch.setattr(ci, "make_chart", _dies_at(3, OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        ci.generate(str(out), 2, start=2, **options)
    assert _read_all(out) == before and list(tmp_path.iterdir()) == [out]
    monkeypatch.undo()
    ci.generate(str(out), 2, start=2, **options)
    assert sorted(_read_all(out)) == sorted(
        f"{sub}/{i}.{ext}" for i in range(4) for sub, ext in SUBS
    )


def test_the_cli_refuses_to_replace_charts_unless_told(tmp_path, capsys):
    """chartjax-synth chart_info replaced an existing --out silently, where figureqa refuses
    (issue 44 item 24): charts already there are refused; --start past them adds, --overwrite
    replaces."""
    from chartjax.tools.synth import main

    out = tmp_path / "ci"
    argv = ["chart_info", "--out", str(out), "--num", "2", "--size", "320x240"]
    assert main(argv) == 0
    before = (out / "png" / "0.png").read_bytes()
    capsys.readouterr()
    assert main([*argv, "--seed", "5"]) == 2
    assert f"{out} already holds 2 of charts 0..1 (e.g. png/0.png)" in capsys.readouterr().err
    assert (out / "png" / "0.png").read_bytes() == before
    assert main([*argv, "--start", "2"]) == 0
    assert sorted(os.listdir(out / "png")) == ["0.png", "1.png", "2.png", "3.png"]
    assert main([*argv, "--seed", "5", "--overwrite"]) == 0
    assert (out / "png" / "0.png").read_bytes() != before
