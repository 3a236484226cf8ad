"""Chart-to-Text task: inputs of every mode, DePlot tables as records, scoring; every
gin_configs/tasks/chart_to_text_*.gin recipe on the builder's dummy data (model-free pipeline),
and end to end with tiny models for the recipes that cover each model family and input file."""

from __future__ import annotations

import json
import os
import re
from contextlib import nullcontext
from pathlib import Path

import gin
import numpy as np
import pytest

from chartjax import config as config_lib
from chartjax.metrics import prediction_files, report
from chartjax.metrics.chart_to_text import chart_to_text_scores
from chartjax.tasks import chart_to_text as c2t
from chartjax.tasks.core import seq2seq
from tests.tasks.tiny_recipes import P2S_TINY, RUN_TINY, T5_TINY, TINY_LAYERS, recipe_batches

ROOT = str(Path(__file__).resolve().parents[2])
RECIPE_DIR = os.path.join(ROOT, "gin_configs", "tasks")

STATISTA = {
    "id": "statista/two_col-1",
    "title": "Users in millions ( 2020 )\n",
    "summary": "Facebook had 2740 million users .",
    "chart_type": "line",
    "complexity": 0,
    "ocr.text": ["Q2 '20 ", "Number of users ", "2740 "],
    "ocr.bbox": [[3, 30, 20, 38], [3, 1, 40, 9], [25, 30, 40, 38]],
    "table.linearized": "Quarter | Number of users\nQ3 '20 | 2740",
    "table.records": "Quarter|Q3_'20|x|bar_chart Number_of_users|2740|y|bar_chart",
}
PEW = {
    "id": "pew/two_col-7",
    "title": "Foreign-born population",
    "summary": "It rose.",
    "chart_type": "line",
    "complexity": 1,
    "ocr.text": [],
    "ocr.bbox": [],
    "ocr_data": "foreign born  | 50  | 1900 ",
}
DEPLOT = "TITLE | Users <0x0A> Quarter | Users <0x0A> Q3 '20 | 2740 <0x0A> Q2 '20 | 2701"


def _one(expand, ex):
    (rec,) = expand(ex)
    return rec


def test_inputs_of_every_mode():
    tab = _one(c2t.make_expand("tab_t5", "statista"), STATISTA)
    assert tab["prompt"] == (
        "translate Chart to Text: Users in millions ( 2020 ) <s> "
        "Quarter|Q3_'20|x|bar_chart Number_of_users|2740|y|bar_chart"
    )
    assert tab["target"] == "Facebook had 2740 million users ."
    assert tab["meta"] == {
        "chart_type": "line",
        "complexity": "simple",
        "title": "Users in millions ( 2020 )",
        "cs_data": STATISTA["table.records"],
    }
    lin = _one(c2t.make_expand("tab_t5", "statista", table_format="linearized"), STATISTA)
    assert lin["prompt"].endswith("<s> Quarter | Number of users\nQ3 '20 | 2740")
    ocr = _one(c2t.make_expand("ocr_t5", "statista"), STATISTA)  # boxes top to bottom
    assert ocr["prompt"].endswith("<s> Number of users | Q2 '20 | 2740")
    pew = _one(c2t.make_expand("ocr_t5", "pew"), PEW)
    assert pew["prompt"] == (
        "translate Chart to Text: Foreign-born population <s> foreign born  | 50  | 1900 "
    )
    assert pew["meta"]["cs_data"] == PEW["ocr_data"] and pew["meta"]["complexity"] == "complex"
    assert _one(c2t.make_expand("image", "pew"), PEW)["prompt"] == ""
    dep = _one(c2t.make_expand("deplot_t5", "pew", table_for=lambda eid: DEPLOT), PEW)
    assert dep["prompt"] == (
        "translate Chart to Text: Foreign-born population <s> "
        "Quarter|Q3_'20|x|bar_chart Users|2740|y|bar_chart "
        "Quarter|Q2_'20|x|bar_chart Users|2701|y|bar_chart"
    )
    assert dep["meta"]["cs_data"] == PEW["ocr_data"]  # CS reads the chart's data, not DePlot's


def _png(width, height):
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buf, format="PNG")
    return buf.getvalue()


def test_ocr_inputs_with_boxes():
    """OCR-T5 with boxes: phrases in reading order, each with its span in the prompt and its
    box divided by the image size (40 x 80 here)."""
    ex = STATISTA | {"image": _png(40, 80)}
    rec = _one(c2t.make_expand("ocr_t5", "statista", boxes=True), ex)
    head = "translate Chart to Text: Users in millions ( 2020 ) <s> "
    assert rec["prompt"] == head + "Number of users | Q2 '20 | 2740"
    assert rec["prompt"] == _one(c2t.make_expand("ocr_t5", "statista"), STATISTA)["prompt"]
    n = len(head)
    assert rec["meta"]["ocr_boxes"] == [
        [n, n + 15, 3 / 40, 1 / 80, 1.0, 9 / 80],
        [n + 18, n + 24, 3 / 40, 30 / 80, 0.5, 38 / 80],
        [n + 27, n + 31, 25 / 40, 30 / 80, 1.0, 38 / 80],
    ]
    spans = [rec["prompt"][s:e] for s, e, *_ in rec["meta"]["ocr_boxes"]]
    assert spans == ["Number of users", "Q2 '20", "2740"]
    # The release's order: the file's.
    rel = _one(c2t.make_expand("ocr_t5", "statista", ocr_order="release", boxes=True), ex)
    assert rel["prompt"] == head + "Q2 '20 | Number of users | 2740"
    # Pew: the bbox file's phrases in the release order are data/<id>.txt up to spacing.
    pew = PEW | {
        "image": _png(100, 50),
        "ocr.text": ["foreign born ", "50 ", "1900 "],
        "ocr.bbox": [[0, 2, 60, 9], [1, 20, 8, 26], [10, 40, 30, 46]],
    }
    rec = _one(c2t.make_expand("ocr_t5", "pew", ocr_order="release", boxes=True), pew)
    assert rec["prompt"] == "translate Chart to Text: Foreign-born population <s> " + (
        "foreign born | 50 | 1900"
    )
    assert [b[2:] for b in rec["meta"]["ocr_boxes"]] == [
        [0.0, 0.04, 0.6, 0.18],
        [0.01, 0.4, 0.08, 0.52],
        [0.1, 0.8, 0.3, 0.92],
    ]
    assert rec["meta"]["cs_data"] == PEW["ocr_data"]
    # A Pew chart without a bbox file reads data/<id>.txt, with no boxes.
    bare = _one(c2t.make_expand("ocr_t5", "pew", boxes=True), PEW | {"image": _png(9, 6)})
    assert bare["prompt"].endswith("<s> foreign born  | 50  | 1900 ")
    assert bare["meta"]["ocr_boxes"] == []


def test_predicted_tables():
    assert c2t.table_text(DEPLOT, "linearized") == "Quarter | Users\nQ3 '20 | 2740\nQ2 '20 | 2701"
    # Rows wider than the header get pandas' "Unnamed" labels; an empty output gives "".
    assert c2t.table_text("Year\n2019 | 5", "records") == (
        "Year|2019|x|line_chart Unnamed:_1|5|y|line_chart"
    )
    assert c2t.table_text("", "records") == "" and c2t.table_text("", "linearized") == ""


def test_score_fn():
    recs = [
        {
            "id": "statista/a",
            "target": "Facebook had 2740 million users .",
            "meta": {
                "chart_type": "line",
                "complexity": "simple",
                "title": "Users",
                "cs_data": STATISTA["table.records"],
            },
        },
        {
            "id": "statista/b",
            "target": "Sales rose to 45 in 2020 .",
            "meta": {
                "chart_type": "bar",
                "complexity": "complex",
                "title": "Sales",
                "cs_data": "Year|2020|x|line_chart Sales|45|y|line_chart",
            },
        },
    ]
    perfect, extra = c2t.make_score_fn()([r["target"] for r in recs], recs, "test")
    assert extra is None
    assert perfect.metrics["bleu"] == 1.0  # sacrebleu's 100.00000000000004 clipped
    assert all(g["bleu"] == 1.0 for g in perfect.breakdowns["chart_type"].values())
    assert perfect.metrics["content_selection"] == 1.0
    assert set(perfect.breakdowns) == {"chart_type", "complexity"}
    assert set(perfect.unavailable) == {"bleurt", "perplexity"}
    worse, _ = c2t.make_score_fn()(["Facebook had users .", "Sales fell ."], recs, "test")
    # CS: records [facebook, 2740] and [sales, 45, 2020]: 1/2 and 1/3 found.
    assert worse.metrics["content_selection"] == pytest.approx((1 / 2 + 1 / 3) / 2)


def test_perfect_bleu_is_exactly_one():
    # sacrebleu gives 100.00000000000004 for a perfect corpus; metrics.json wants <= 1.
    from chartjax.metrics import text

    s = text.bleu(["Sales rose in 2020 ."], [["Sales rose in 2020 ."]], groups={"g": ["a"]})
    assert s.metrics["bleu"] == 1.0 and s.breakdowns["g"]["a"]["bleu"] == 1.0


def test_bad_arguments_are_named():
    text = seq2seq.Features(modality="text", vocab_file="unused")
    with pytest.raises(ValueError, match="Pew does not have"):
        c2t.make_task(config="pew", mode="tab_t5", features=text)
    with pytest.raises(ValueError, match="needs Features.modality = 'image'"):
        c2t.make_task(mode="image", features=text)
    with pytest.raises(ValueError, match="needs tables_file"):
        c2t.make_task(mode="deplot_t5", features=text)
    with pytest.raises(ValueError, match="config 'vistext'"):
        c2t.make_task(config="vistext", features=text)
    with pytest.raises(ValueError, match="boxes=True needs mode 'ocr_t5', not 'tab_t5'"):
        c2t.make_task(mode="tab_t5", boxes=True, features=text)
    with pytest.raises(ValueError, match="ocr_order 'left_to_right' is not one of"):
        c2t.make_task(mode="ocr_t5", ocr_order="left_to_right", features=text)


# ----------------------------------------------------------------------- recipes -----------
# As in test_chartcheck.py: a model-free pipeline test for every recipe, and a full train() /
# evaluate() run once per (model family x task kind) (issue #43 item 6, DESIGN §8); the config
# (Statista / Pew) and the prompt's input (gold table, OCR text, DePlot table) differ only in
# the data path, which `test_recipe_pipeline` featurizes and scores for every recipe:
#
#   family                 task kind                                   end to end
#   T5 1.0 (HF init)       fine-tune, text prompt -> summary           statista_ocr_t5_boxes
#   MatCha (Pix2Struct)    zero-shot, evaluation only                  statista_matcha
#
# The T5 row runs with the box layer on (the _boxes rows' one piece of extra model code: an
# embedding of each token's box added to the T5 input, starting at zero as the HF init lacks
# it); the rows without boxes are that model less the layer.

RUN_TINY = RUN_TINY + [
    "chart_to_text_task.shuffle_buffer = 8",
    "chart_to_text_task.eval_splits = ('test',)",
]
# The BART rows have their own tests: test_chart_to_text_bart.py; the Chart2text and
# Field-Infuse rows (records, not text prompts) test_chart_to_text_records.py; the image-
# captioning rows and their Barlow Twins pretraining (a ResNet, no prompt)
# test_chart_to_text_caption.py.
OWN_TESTS = (
    "_bart.gin",
    "_chart2text.gin",
    "_field_infuse.gin",
    "_barlow_twins.gin",
    "_image_caption.gin",
)
RECIPES = sorted(
    f[:-4]
    for f in os.listdir(RECIPE_DIR)
    if f.startswith("chart_to_text_") and f.endswith(".gin") and not f.endswith(OWN_TESTS)
)
EVAL_ONLY = {"chart_to_text_statista_matcha", "chart_to_text_pew_matcha"}
E2E = [
    "chart_to_text_statista_ocr_t5_boxes",
    "chart_to_text_statista_matcha",
]


def recipe_text(recipe):
    with open(os.path.join(RECIPE_DIR, recipe + ".gin")) as f:
        return f.read()


def recipe_config(recipe):
    (config,) = [
        line.split("=")[1].strip().strip('"')
        for line in recipe_text(recipe).splitlines()
        if line.startswith("chart_to_text_task.config")
    ]
    return config


@pytest.fixture(scope="module")
def data_dir(tfds_dir):
    tfds_dir("chart_to_text", "statista")
    return tfds_dir("chart_to_text", "pew")


@pytest.fixture(scope="module")
def tables_file(tmp_path_factory, data_dir):
    """DePlot-style tables for every dummy chart of both configs (as chartjax-infer writes)."""
    from chartjax.data import sources

    rows = []
    for config in ("statista", "pew"):
        bdir = sources.tfds_builder_dir(f"chart_to_text/{config}", data_dir)
        for split in ("train", "validation", "test"):
            rows += [
                {"id": i, "prediction": f"TITLE | t <0x0A> Year | Value <0x0A> 2019 | {n}"}
                for n, i in enumerate(sources.TfdsSource("", directory=bdir).ids(split))
            ]
    path = tmp_path_factory.mktemp("c2t_files") / "tables.jsonl"
    prediction_files.write_jsonl(path, rows)
    return str(path)


@pytest.fixture(scope="module")
def init_ckpts(tmp_path_factory, tiny_t5x):
    """Tiny stand-ins: HF t5-base-like T5 1.0 (ReLU, tied logits), T5X MatCha."""
    from chartjax.interop import hf
    from chartjax.models import t5, tiny

    d = tmp_path_factory.mktemp("c2t_init")
    hf.save(
        t5.build(
            tiny.tiny_t5(mlp_activations=("relu",), logits_via_embedding=True, **TINY_LAYERS), 5
        ),
        str(d / "t5_1_0"),
    )
    return {"t5": str(d / "t5_1_0"), "p2s": tiny_t5x("pix2struct")}


def _bindings(recipe, vocab_file, data_dir, tables_file, init_path="unused", extra=()):
    text = recipe_text(recipe)
    b = (
        (P2S_TINY if "models/pix2struct.gin" in text else T5_TINY)
        + RUN_TINY
        + [f"VOCAB = '{vocab_file}'", f"DATA_DIR = '{data_dir}'", f"INIT_PATH = '{init_path}'"]
    )
    if "TABLES = %gin.REQUIRED" in text:
        b.append(f"TABLES = '{tables_file}'")
    return b + list(extra)


def _check_metrics(obj, rows, split):
    report.validate_metrics(obj)
    assert (obj["task"], obj["split"]) == ("chart_to_text", split)
    assert obj["num_examples"] == len(rows) == 1  # each dummy eval split holds one chart
    m = obj["metrics"]
    for name in ("bleu", "rouge_1", "rouge_2", "rouge_l", "meteor", "content_selection"):
        assert 0 <= m[name] <= 1
    assert m["cider"] >= 0 and m["cider_d"] >= 0
    assert set(obj["unavailable"]) == {"bleurt", "perplexity"}
    assert set(obj["breakdowns"]) == {"chart_type", "complexity"}


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_pipeline(recipe, vocab_file, data_dir, tables_file):
    """The recipe's task on the dummy data without a model: batch shapes, and scoring the
    targets themselves gives BLEU 1 and CS 1 in a valid metrics.json."""

    image = "models/pix2struct.gin" in recipe_text(recipe)
    boxes = "chart_to_text_task.boxes = True" in recipe_text(recipe)
    # Room for the OCR phrases behind the title (the tiny vocabulary spells most words out).
    length = 256 if boxes else 64
    extra = ["Features.max_target_len = 128", f"Features.max_input_len = {length}"]
    bindings = _bindings(recipe, vocab_file, data_dir, tables_file, extra=extra)
    task, train_batch, batch = recipe_batches(recipe, bindings, "chart_to_text", "test")
    enc = train_batch["encoder_input_tokens"]
    assert enc.shape == ((8, 64, 2 + 4 * 4 * 3) if image else (8, length))
    keep = batch["_mask"]
    cols = {k: np.asarray(v)[keep] for k, v in batch.items() if k in seq2seq.RECORD_KEYS}
    assert [i.decode() for i in cols["id"]][0].startswith(recipe_config(recipe) + "/")
    targets = np.asarray(batch["decoder_target_tokens"])[keep]
    scores, rows = task.evaluate(targets, cols, "test")
    metrics, breakdowns = scores.metrics, scores.breakdowns
    obj = report.build_metrics(
        task="chart_to_text",
        split="test",
        step=0,
        num_examples=len(rows),
        metrics=metrics,
        breakdowns=breakdowns,
        unavailable=scores.unavailable,
    )
    _check_metrics(obj, rows, "test")
    assert rows[0]["prediction"] == rows[0]["target"]
    assert metrics["bleu"] == pytest.approx(1.0) and metrics["rouge_l"] == pytest.approx(1.0)
    best = re.findall(r'^train.best_metric = "(\w+)"$', recipe_text(recipe), re.M)
    assert len(best) == (recipe not in EVAL_ONLY)
    assert all(b in metrics for b in best)  # it keeps its best checkpoint by a computed metric
    if "deplot_t5" in recipe:  # DePlot's table, as records, follows the title
        assert "<s> Year|2019|x|line_chart Value|" in rows[0]["input"]
    if boxes:
        _check_train_boxes(train_batch, recipe_config(recipe), vocab_file)
    else:
        assert "encoder_input_boxes" not in train_batch


# The dummy charts with a bbox file (the training charts statista two_col-1 and pew two_col-7,
# both 9 x 6 pixels): their phrases and boxes / image size, clipped to [0, 1].
DUMMY_BOXES = {
    "statista": [("Number of users", [3 / 9, 1 / 6, 1.0, 1.0])],
    "pew": [("foreign born populations in millions", [0.0, 1.0, 1.0, 1.0]), ("50", [1.0] * 4)],
}


def _check_train_boxes(batch, config, vocab_file):
    """Every token with a box is a token of a dummy phrase with that phrase's box, in order."""
    from chartjax.data import vocab as vocab_lib

    vocab = vocab_lib.open_vocabulary(vocab_file)
    tokens, boxes = np.asarray(batch["encoder_input_tokens"]), batch["encoder_input_boxes"]
    boxes = np.asarray(boxes)
    assert boxes.shape == (*tokens.shape, 4) and boxes.dtype == np.float32
    with_boxes = 0
    for row_tokens, row_boxes in zip(tokens, boxes):
        boxed = np.flatnonzero(row_boxes.any(-1))
        if not len(boxed):
            continue
        with_boxes += 1
        groups = []  # runs of one box
        for i in boxed:
            if groups and groups[-1][1] == i - 1 and (row_boxes[i] == row_boxes[i - 1]).all():
                groups[-1][1] = i
            else:
                groups.append([i, i])
        got = [(vocab.decode(row_tokens[a : b + 1]), row_boxes[a].tolist()) for a, b in groups]
        want = [(t, np.float32(b).tolist()) for t, b in DUMMY_BOXES[config]]
        assert got == want
    assert with_boxes  # the batch holds the training chart with boxes


@pytest.mark.slow
@pytest.mark.parametrize("recipe", E2E)
def test_recipe_end_to_end(recipe, tmp_path, vocab_file, data_dir, tables_file, init_ckpts):
    from chartjax.evaluate import evaluate
    from chartjax.train import train

    assert recipe in RECIPES
    eval_only = recipe in EVAL_ONLY
    init = init_ckpts["p2s" if "models/pix2struct.gin" in recipe_text(recipe) else "t5"]
    gin.clear_config()
    config_lib.parse_gin(
        [f"tasks/{recipe}.gin"], _bindings(recipe, vocab_file, data_dir, tables_file, init)
    )
    # The box layer is not in the (HF) init checkpoint: it starts at zero, and says so.
    boxes = "chart_to_text_task.boxes = True" in recipe_text(recipe)
    warns = pytest.warns(UserWarning, match="no box_embedding.kernel") if boxes else nullcontext()
    try:
        with warns:
            out = evaluate(str(tmp_path)) if eval_only else train(str(tmp_path))
    finally:
        gin.clear_config()
    step = 0 if eval_only else 2
    if not eval_only:
        assert out["step"] == 2 and out["stop_reason"] == "done"
    mdir = tmp_path / "eval" / "test" / f"step_{step}"
    obj = json.loads((mdir / "metrics.json").read_text())
    rows = prediction_files.read_jsonl(mdir / "predictions.jsonl")
    _check_metrics(obj, rows, "test")
    assert obj["step"] == step and rows[0]["id"].startswith(recipe_config(recipe) + "/")
    # The metrics are those of the predictions written next to them.
    again = chart_to_text_scores([r["prediction"] for r in rows], [r["target"] for r in rows])
    for name in ("bleu", "rouge_l", "meteor"):
        assert obj["metrics"][name] == pytest.approx(again.metrics[name])
