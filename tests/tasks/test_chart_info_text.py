"""CHART-Info tasks 2, 4, 5, 6a as text: the grid, the line grammar (round trips, malformed
lines counted), records from the builder's dummy data, and the four recipes end to end."""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path

import pytest

from chartjax.data import sources
from chartjax.metrics import chart_info as ci
from chartjax.tasks import catalog
from chartjax.tasks.chart_info import lines as cl
from chartjax.tasks.chart_info import text as ct
from chartjax.tasks.core.task import ScoreInputs
from tests.tasks.test_chart_info import SPLITS
from tests.tasks.test_deplot import TINY_PIX2STRUCT, read_eval, run_recipe

ROOT = str(Path(__file__).resolve().parents[2])
DUMMY = os.path.join(ROOT, "tfds_builders", "chart_info", "dummy_data", "synthetic_2019")
SIZE = (1280, 960)


def test_grid_hand_values():
    # q = round(v * 999 / size): 516 * 999 / 1280 = 402.73 -> 403; back 403 * 1280 / 999.
    assert cl.quantize(516, 1280) == 403 and cl.quantize(47, 960) == 49
    assert cl.dequantize(403, 1280) == pytest.approx(516.3564, abs=1e-4)
    assert (cl.quantize(0, 1280), cl.quantize(1280, 1280)) == (0, 999)  # exact ends
    assert cl.dequantize(999, 1280) == 1280.0
    assert (cl.quantize(-3, 100), cl.quantize(2000, 100)) == (0, 999)  # outside: clamped


def _round_trip(mode, output, size=SIZE, ids=()):
    text = cl.serialize(mode, output, size)
    parsed = cl.parse(mode, text, size, ids)
    assert parsed.malformed == [] and parsed.unknown_ids == 0
    return text, parsed


def test_task5_round_trip_costs_exactly_the_grid_loss():
    # Legend marker x0=516 y0=47 w=30 h=11 in 1280 x 960: grid y0 x0 y1 x1 = 49 403 60 426
    # (546 * 999 / 1280 = 426.14, 58 * 999 / 960 = 60.36). The decoded box lies inside the true
    # one, so IoU = its area / 330 = (23 * 1280 / 999) * (11 * 960 / 999) / 330 = 0.943967.
    gt = {"legend_pairs": [{"id": 12, "bb": {"x0": 516, "y0": 47, "width": 30, "height": 11}}]}
    text, parsed = _round_trip("task5", gt, ids=[12])
    assert text == "12 49 403 60 426"
    want = Fraction(23 * 1280, 999) * Fraction(11 * 960, 999) / 330
    assert float(want) == pytest.approx(0.9439670, abs=1e-7)
    scores = ci.task5({"a": {"task5": {"output": gt}}}, {"a": {"task5": {"output": parsed.output}}})
    assert scores.metrics["score"] == pytest.approx(float(want), abs=1e-12)


def test_on_grid_outputs_round_trip_perfectly():
    # A 999 x 999 image: the grid is the pixel grid, so every task scores exactly 1.
    size = (999, 999)
    bb = {"x0": 10, "y0": 20, "width": 30, "height": 5}
    outputs = {
        "task2": {"text_blocks": [{"id": 0, "bb": bb, "text": "Sales\nby year"}]},
        "task4": {"axes": {"x-axis": [{"id": 3, "tick_pt": {"x": 201, "y": 837}}], "y-axis": []}},
        "task5": {"legend_pairs": [{"id": 14, "bb": bb}]},
        "task6a": {
            "visual elements": {
                "bars": [bb, {"x0": 50, "y0": 20, "width": 30, "height": 500}],
                "boxplots": [],
                "lines": [],
                "scatter points": [],
            }
        },
    }
    text, parsed = _round_trip("task2", outputs["task2"], size)
    assert text == "20 10 25 40 Sales by year"  # wrapped text on one line
    gt = {"a": {"task1": {"output": {"chart_type": "Vertical bar"}}}}
    for mode, out in outputs.items():
        text, parsed = _round_trip(mode, out, size, ids=[3, 14])
        key = cl.official_key(mode)
        g, p = {"a": {**gt["a"], key: {"output": out}}}, {"a": {key: {"output": parsed.output}}}
        sizes = {"a": size}
        if mode in ("task4", "task6a"):
            scores = getattr(ci, mode)(g, p, sizes)
        else:
            scores = getattr(ci, mode)(g, p)
        first = {"task2": "hmean", "task4": "f1", "task5": "score", "task6a": "score"}[mode]
        assert scores.metrics[first] == 1.0, mode


def test_task6a_grammar_per_element_kind():
    ve = {
        "bars": [{"x0": 0, "y0": 0, "width": 640, "height": 480}],
        "boxplots": [
            {s: {"x": 100, "y": 100 + 10 * i, "_bb": {}} for i, s in enumerate(cl.BOX_ORDER)}
        ],
        "lines": [[{"x": 0, "y": 960}, {"x": 1280, "y": 0}]],
        "scatter points": [[{"x": 640, "y": 480}]],  # PMC: one list per series
    }
    text, parsed = _round_trip("task6a", {"visual elements": ve})
    # 100 * 999 / 1280 = 78.05; 100, 110, ... * 999 / 960 = 104.06, 114.47, 124.88, 135.28, 145.69
    assert text.split("\n") == [
        "bar 0 0 500 500",
        "box 104 78 114 78 125 78 135 78 146 78",
        "point 500 500",
        "line 999 0 0 999",  # ordered by its first point
    ]
    out = parsed.output["visual elements"]
    assert out["bars"][0] == pytest.approx(
        {"x0": 0.0, "y0": 0.0, "width": 500 * 1280 / 999, "height": 500 * 960 / 999}
    )
    assert out["lines"] == [[{"x": 0.0, "y": 960.0}, {"x": 1280.0, "y": 0.0}]]
    assert list(out["boxplots"][0]) == list(cl.BOX_ORDER)
    assert len(out["scatter points"]) == 1  # written flat


def test_malformed_lines_are_counted_never_scored():
    cases = {
        "task2": ("10 20 30 40 Sales\n10 20 5 40 inverted\nfoo\n\n1000 0 0 0 big\n1 2 3", 1, 4),
        "task4": ("x 3 10 20\nz 3 1 2\nx 3 10\ny 9 5 5\nx three 1 2", 2, 3),
        "task5": ("14 1 2 3 4\n14 1 2 3\n14 5 6 1 1\n7 1 2 3 4 5", 1, 3),
        "task6a": ("bar 1 2 3 4\nbox 1 2\nline 1 2 3\npoint 5 6\nline 1 2 3 4\ncircle 1 2", 3, 3),
    }
    for mode, (text, good, bad) in cases.items():
        parsed = cl.parse(mode, text, SIZE, ids=[3, 14])
        assert (parsed.items, len(parsed.malformed)) == (good, bad), mode
    assert cl.parse("task4", "x 3 10 20\ny 9 5 5", SIZE, ids=[3]).unknown_ids == 1
    assert cl.parse("task2", "1 2 3 4", SIZE).output["text_blocks"][0]["text"] == ""
    texts = ["10 20 30 40 ok\ngarbage", "garbage only", "", "10 20 30 40 ok"]
    counts = cl.parse_counts([cl.parse("task2", t, SIZE) for t in texts], texts)
    assert counts == {
        "num_items": 2,
        "num_malformed_items": 2,
        "num_partially_parsed": 1,
        "num_unparseable": 1,  # the empty output is an empty prediction, not unparseable
        "num_unknown_ids": 0,
    }


def test_export_refuses_rows_without_official_json(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a", "prediction": "x", "official": {}}\n\n{"id": "b"}\n')
    with pytest.raises(SystemExit, match="p.jsonl: line 3 has no 'official' object"):
        ct.main(["--predictions", str(path), "--out", str(tmp_path / "out")])


def test_unparseable_output_scores_as_an_empty_prediction():
    gt = {"text_blocks": [{"id": 0, "bb": {"x0": 10, "y0": 10, "width": 100, "height": 20}}]}
    gt["text_blocks"][0]["text"] = "sales"
    good = cl.serialize("task2", gt, SIZE)
    records = [
        {"id": k, "meta": {"size": list(SIZE), "gt": gt, "chart_type_raw": "Line", "ids": []}}
        for k in ("a", "b")
    ]
    scores, extra = ct.score("task2", [good, "no box here"], records, "spec")
    # b scores 0 as an empty prediction; a has recognition 1 and its grid IoU.
    assert scores.metrics["recognition"] == pytest.approx(0.5)
    assert scores.metrics["num_unparseable"] == 1 and scores.metrics["num_malformed_items"] == 1
    assert extra[1] == {
        "official": {"task2": {"output": {"text_blocks": []}}},
        "num_items": 0,
        "malformed": ["no box here"],
    }


def test_polygon_ground_truth_and_header():
    example = {
        "id": "c/x",
        "has_task2": True,
        "has_task3": True,
        "text_blocks.id": [5, 2, 9],
        "text_blocks.text": ["10", "Title", "20"],
        "text_blocks.bbox": [[50, 90, 10, 5], [0, 0, 40, 8], [10, 90, 10, 5]],
        "text_blocks.polygon": [[50, 90, 60, 90, 60, 95, 50, 95], [0] * 8, [0] * 8],
        "text_roles.id": [5, 2, 9],
        "text_roles.role": ["tick_label", "chart_title", "tick_label"],
    }
    gt = ct.ground_truth(example, "task2", polygons=True)
    assert gt["text_blocks"][0]["polygon"] == {
        "x0": 50.0, "y0": 90.0, "x1": 60.0, "y1": 90.0, "x2": 60.0, "y2": 95.0, "x3": 50.0, "y3": 95.0
    }  # fmt: skip
    assert cl.serialize("task2", {"text_blocks": gt["text_blocks"][:1]}, (999, 999)) == (
        "90 50 95 60 10"
    )
    # Task 4's header: the tick labels only, in reading order (y, then x).
    assert ct.header(ct.header_blocks(example, "task4")) == "9: 20 | 5: 10"
    assert ct.header(ct.header_blocks({**example, "has_task3": False}, "task4")) == (
        "2: Title | 9: 20 | 5: 10"
    )


def test_generated_charts_round_trip_to_the_grid_ceiling(tmp_path):
    """Perfect outputs of one generated chart per 2019 type (pie and donut annotate none of
    these tasks) score what docs/recipes.md and the recipes state: the grid's ceiling."""
    from PIL import Image

    from chartjax.synth import chart_info as synth
    from chartjax.synth import chart_info_tables as tb

    for i, chart_type in enumerate(tb.CHART_TYPES):
        synth.generate(str(tmp_path), 1, seed=4, types=[chart_type], start=i)
    docs, sizes = {}, {}
    for i in range(len(tb.CHART_TYPES)):
        with open(tmp_path / "json_gt" / f"{i}.json") as f:
            docs[str(i)] = json.load(f)
        with Image.open(tmp_path / "png" / f"{i}.png") as im:
            sizes[str(i)] = im.size
    want = {
        "task2": ("hmean", 0.9732438),  # detection 0.9478821, recognition exactly 1
        "task4": ("f1", 1.0),  # 0.5 px off at most; ticks score 1 within 1 % of the diagonal
        "task5": ("score", 0.9610268),
        "task6a": ("score", 0.9925077),
    }
    for mode, (name, value) in want.items():
        key = cl.official_key(mode)
        pred = {}
        for k, doc in docs.items():
            text = cl.serialize(mode, (doc[key] or {}).get("output"), sizes[k])
            parsed = cl.parse(mode, text, sizes[k])
            assert parsed.malformed == []
            pred[k] = {key: {"output": parsed.output}}
        if mode in ("task4", "task6a"):
            scores = getattr(ci, mode)(docs, pred, sizes)
        else:
            scores = getattr(ci, mode)(docs, pred)
        assert scores.metrics["num_unannotated"] == 2
        assert scores.metrics[name] == pytest.approx(value, abs=1e-7), mode
        if mode == "task2":
            assert scores.metrics["recognition"] == 1.0


# ---------------------------------------------------------------- dummy data ---------------


@pytest.fixture(scope="module")
def dummy_records(tfds_dir):
    data_dir = tfds_dir("chart_info", "synthetic_2019")
    out = {}
    for mode in cl.MODES:
        source = sources.TfdsSource(
            "chart_info/synthetic_2019",
            data_dir,
            expand=ct.make_expand(mode, polygons=False),
            field_keys=ct.KEYS,
            image_key=None,
            encoded_keys=("image",),
        )
        out[mode] = {r["id"]: r for r in source.records("train")}
    return data_dir, out


def test_dummy_records(dummy_records):
    _, records = dummy_records
    # The pie (686) annotates none of these tasks; every other chart annotates all four.
    for mode in cl.MODES:
        assert sorted(records[mode]) == ["21987", "344", "7", "8"], mode
    r4, r5 = records["task4"]["344"], records["task5"]["344"]
    assert r4["prompt"] == "7: 0 | 3: 2005" and r5["prompt"] == "14: 2011"
    # The dummy images are 16 x 12 pixels and the annotations far larger: everything clamps
    # to 999 (tick x=201 y=837; the legend box at 843, 101); ties keep the annotation's order.
    assert r4["target"] == "x 3 999 999\ny 7 999 999"
    assert r5["target"] == "14 999 999 999 999"
    assert r4["meta"]["size"] == [16, 12] and r4["meta"]["ids"] == [7, 3]
    with open(os.path.join(DUMMY, "json_gt", "344.json")) as f:
        official = json.load(f)
    for mode in cl.MODES:  # the ground truth is the annotation file's own task output
        want = official[cl.official_key(mode)]["output"]
        got = records[mode]["344"]["meta"]["gt"]
        if mode == "task2":
            want = [{k: b[k] for k in ("id", "text", "bb")} for b in want["text_blocks"]]
            got = got["text_blocks"]
        elif mode == "task6a":
            want = {"visual elements": want["visual elements"]}
        elif mode == "task4":
            want = {"axes": want["axes"]}
        assert got == want, mode
    assert records["task2"]["8"]["target"] == ""  # the scatter has no text block


# ---------------------------------------------------------------- recipes ------------------


def read_eval_path(workdir) -> str:
    return os.path.join(str(workdir), "eval", "train", "step_2", "predictions.jsonl")


def _official_gt() -> tuple[dict, dict]:
    from PIL import Image

    gt, sizes = {}, {}
    for name in sorted(os.listdir(os.path.join(DUMMY, "json_gt"))):
        stem = name[:-5]
        with open(os.path.join(DUMMY, "json_gt", name)) as f:
            gt[stem] = json.load(f)
        with Image.open(os.path.join(DUMMY, "png", f"{stem}.png")) as im:
            sizes[stem] = im.size
    return gt, sizes


SPLITS_TEXT = [s.replace("chart_info_task", "chart_info_text_task") for s in SPLITS]
# The four modes are one (family x task kind): Pix2Struct fine-tuned to write a chart's
# elements as lines of text. `test_recipe` trains one of them (task5) end to end; every mode's
# recipe is parsed, built, featurized and its targets scored by `test_recipe_pipeline` (issue #43
# item 6, DESIGN §8).
E2E_MODE = "task5"


@pytest.mark.parametrize("mode", cl.MODES)
def test_recipe_pipeline(mode, tmp_path, vocab_file, tfds_dir):
    """The recipe's task without a model: its targets as the predictions give metrics that
    `chartjax-score` of the exported official JSON reproduces."""
    import numpy as np

    from chartjax.metrics import prediction_files
    from tests.tasks.tiny_recipes import recipe_batches

    data_dir = tfds_dir("chart_info", "synthetic_2019")
    bindings = (
        TINY_PIX2STRUCT + SPLITS_TEXT + [f"VOCAB = '{vocab_file}'", f"DATA_DIR = '{data_dir}'"]
    )
    task, train_batch, batch = recipe_batches(
        f"chart_info_{mode}_pix2struct", bindings, "chart_info_text", "train"
    )
    assert train_batch["encoder_input_tokens"].shape == (8, 64, 2 + 4 * 4 * 3)
    keep = batch["_mask"]
    cols = {k: np.asarray(v)[keep] for k, v in batch.items() if k in sources.RECORD_KEYS}
    scores, rows = task.evaluate(np.asarray(batch["decoder_target_tokens"])[keep], cols, "train")
    assert len(rows) == 4 and scores.metrics["num_unannotated"] == 1  # the pie
    path = tmp_path / "predictions.jsonl"
    prediction_files.write_jsonl(path, rows)
    _check_official_scores(mode, scores.metrics, rows, str(path), tmp_path)


@pytest.mark.slow
def test_recipe(tmp_path, vocab_file, tfds_dir, tiny_t5x):
    mode = E2E_MODE
    data_dir = tfds_dir("chart_info", "synthetic_2019")
    init = tiny_t5x("pix2struct")
    run_recipe(
        f"chart_info_{mode}_pix2struct",
        tmp_path / "run",
        TINY_PIX2STRUCT
        + SPLITS_TEXT
        + [f"VOCAB = '{vocab_file}'", f"INIT_PATH = '{init}'", f"DATA_DIR = '{data_dir}'"],
    )
    obj, rows = read_eval(tmp_path / "run", "train", 2)
    assert obj["task"] == f"chart_info_{mode}" and obj["step"] == 2
    assert obj["num_examples"] == len(rows) == 4
    assert obj["metrics"]["num_unannotated"] == 1  # the pie
    _check_official_scores(mode, obj["metrics"], rows, read_eval_path(tmp_path / "run"), tmp_path)


def _check_official_scores(mode, m, rows, predictions, tmp_path):
    assert m["num_malformed_items"] == sum(len(r["malformed"]) for r in rows)
    assert m["num_items"] == sum(r["num_items"] for r in rows)
    # The official per-image JSON of the rows, scored as `chartjax-score --task chart_info_<mode>`
    # scores a folder of them, gives the numbers of metrics.json.
    ct.main(["--predictions", predictions, "--out", str(tmp_path / "pred")])
    assert len(os.listdir(tmp_path / "pred")) == 4
    from chartjax.metrics import prediction_files

    pred = prediction_files.read_json_dir(str(tmp_path / "pred"), "--predictions")
    gt, sizes = _official_gt()
    scorer = catalog.scorer(f"chart_info_{mode}")
    assert scorer.invalid_predictions(pred) == {}
    scores = scorer.score(
        ScoreInputs(pred, gt, frozenset(set(gt) - set(pred)), {"image_sizes": sizes})
    )
    for name, value in scores.metrics.items():
        assert m[name] == pytest.approx(value, abs=1e-12), name
        if name in ("detection", "recognition", "hmean", "precision", "recall", "f1", "score"):
            assert 0.0 <= value <= 1.0
