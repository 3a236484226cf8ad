"""The BART rows of Chart-to-Text (TAB-BART, TAB_OCR-BART on Statista, OCR-BART on Pew): the
seq2seq task with the checkpoint's byte-level BPE (no T5 prefix; "<s>" between title and data is
BART's <s> token; targets `<s> summary </s>` padded with 1 behind the start id 2, as HF's
run_summarization), the loss over every token but padding (BOS = 0 included), and every
`chart_to_text_*_bart` recipe end to end on the dummy data with a tiny HF BART (2 training
steps, then evaluation of the test split into a valid metrics.json; greedy here, the recipes'
beam search 4 is tests/models/test_bart.py's)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import gin
import jax.numpy as jnp
import numpy as np
import pytest

from chartjax import config as config_lib
from chartjax.metrics import prediction_files, report
from chartjax.metrics.chart_to_text import chart_to_text_scores

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted(
    f[:-4] for f in os.listdir(ROOT / "gin_configs" / "tasks") if f.endswith("_bart.gin")
)
TINY = [
    "hf_model_config.dtype = 'float32'",
    "Decoding.beam_size = 1",  # the recipes' beam 4 costs a minute of compilation here
    "Features.max_input_len = 64",
    "Features.max_target_len = 32",
    "Decoding.max_decode_len = 8",
    "train.global_batch_size = 8",
    "train.eval_batch_size = 8",
    "evaluate.eval_batch_size = 8",
    "train.progress = False",
    "train.num_train_steps = 2",
    "train.eval_every = 0",
    "train.checkpoint_every = 2",
    "train.log_every = 1",
    "train.best_metric = None",
    "chart_to_text_task.shuffle_buffer = 8",
    "chart_to_text_task.eval_splits = ('test',)",
]


def _config(recipe):
    return "pew" if "_pew_" in recipe else "statista"


@pytest.fixture(scope="module")
def data_dir(tfds_dir):
    tfds_dir("chart_to_text", "statista")
    return tfds_dir("chart_to_text", "pew")


@pytest.fixture(scope="module")
def tables_file(tmp_path_factory, data_dir):
    from chartjax.data import sources

    rows = []
    bdir = sources.tfds_builder_dir("chart_to_text/statista", data_dir)
    for split in ("train", "validation", "test"):
        rows += [
            {"id": i, "prediction": f"TITLE | t <0x0A> Year | Value <0x0A> 2019 | {n}"}
            for n, i in enumerate(sources.TfdsSource("", directory=bdir).ids(split))
        ]
    path = tmp_path_factory.mktemp("c2t_bart") / "tables.jsonl"
    prediction_files.write_jsonl(path, rows)
    return str(path)


def _bindings(bart, data_dir, tables_file):
    return TINY + [
        f"INIT_PATH = '{bart}'",
        f"DATA_DIR = '{data_dir}'",
        f"TABLES = '{tables_file}'",
    ]


def test_recipes_are_the_three_bart_rows():
    assert RECIPES == [
        "chart_to_text_pew_ocr_bart",
        "chart_to_text_statista_deplot_bart",
        "chart_to_text_statista_tab_bart",
    ]


@pytest.mark.slow
def test_bart_records_targets_and_pad_aware_loss(tiny_hf_checkpoints):
    from chartjax.data import vocab as vocab_lib
    from chartjax.models import losses
    from chartjax.tasks import chart_to_text
    from chartjax.tasks.core import seq2seq

    for recipe in RECIPES:  # BART reads no T5 prefix; greedy is for these tests only
        text = (ROOT / "gin_configs" / "tasks" / f"{recipe}.gin").read_text()
        assert 'chart_to_text_task.prefix = ""' in text and "Decoding.beam_size = 4" in text
    vocab = vocab_lib.open_vocabulary(tiny_hf_checkpoints["bart"])
    ex = {
        "id": "statista/1",
        "title": " Users ",
        "summary": "Users rose to 12.5 million in 2020.",
        "chart_type": "line",
        "complexity": 0,
        "table.records": "Year|2019|x|line_chart Users|12.5|y|line_chart",
        "table.linearized": "",
    }
    (rec,) = chart_to_text.make_expand("tab_t5", "statista", prefix="")(ex)
    assert rec["prompt"] == "Users <s> Year|2019|x|line_chart Users|12.5|y|line_chart"
    ids = vocab.encode(rec["prompt"], add_eos=True)
    assert ids[0] == 0 and ids[-1] == 2 and ids.count(0) == 2  # the written <s> is BART's <s>
    tgt, inp = seq2seq.target_arrays(vocab, rec["target"], 32)
    n = int((tgt != 1).sum())
    assert tgt[0] == 0 and tgt[n - 1] == 2 and (tgt[n:] == 1).all()  # <s> summary </s> <pad>..
    # Shifted right behind </s> (2), as HF's shift_tokens_right of labels padded with -100.
    assert inp[0] == 2 and (inp[1 : n + 1] == tgt[:n]).all() and (inp[n + 1 :] == 1).all()
    assert vocab.decode(tgt) == rec["target"]

    # The loss weights every target token but padding (1): BOS (0) counts, as in HF.
    class Fake:
        class cfg:
            pad_id, z_loss = 1, 0.0

        def __call__(self, b, deterministic):
            return jnp.zeros((*b["decoder_target_tokens"].shape, 400))

    t = jnp.asarray([[0, 5, 6, 2, 1, 1]])
    loss, aux = losses.seq2seq_loss(Fake(), {"decoder_target_tokens": t}, deterministic=True)
    assert float(aux["num_tokens"]) == 4.0 and float(loss) == pytest.approx(np.log(400))


# The three rows are one (model family x task kind), BART fine-tuned on a text prompt (issue
# #43 item 6, DESIGN §8): statista_deplot_bart trains end to end; all three (gold table, OCR
# text, DePlot table inputs) are parsed, built, featurized and scored by test_recipe_pipeline.
E2E = ["chart_to_text_statista_deplot_bart"]


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_pipeline(recipe, data_dir, tables_file, tiny_hf_checkpoints):
    """The recipe's task without a model: batches of its shapes, and its targets scored as
    the predictions into a valid metrics.json."""
    from chartjax.data import sources
    from tests.tasks.tiny_recipes import recipe_batches

    bindings = _bindings(tiny_hf_checkpoints["bart"], data_dir, tables_file)
    bindings.append("Features.max_target_len = 128")  # the whole summary
    task, train_batch, batch = recipe_batches(recipe, bindings, "chart_to_text", "test")
    assert train_batch["encoder_input_tokens"].shape == (8, 64)
    assert train_batch["decoder_target_tokens"].shape == (8, 128)
    keep = batch["_mask"]
    cols = {k: np.asarray(v)[keep] for k, v in batch.items() if k in sources.RECORD_KEYS}
    scores, rows = task.evaluate(np.asarray(batch["decoder_target_tokens"])[keep], cols, "test")
    obj = report.build_metrics(
        task=task.name, split="test", step=0, num_examples=len(rows), metrics=scores.metrics,
        breakdowns=scores.breakdowns, unavailable=scores.unavailable,
    )  # fmt: skip
    _check_metrics(obj, rows, recipe)
    assert rows[0]["prediction"] == rows[0]["target"]


def _check_metrics(obj, rows, recipe):
    report.validate_metrics(obj)
    assert (obj["task"], obj["split"], obj["num_examples"]) == ("chart_to_text", "test", 1)
    m = obj["metrics"]
    for name in ("bleu", "rouge_1", "rouge_2", "rouge_l", "meteor", "content_selection"):
        assert 0 <= m[name] <= 1
    assert set(obj["unavailable"]) == {"bleurt", "perplexity"}
    assert set(obj["breakdowns"]) == {"chart_type", "complexity"}
    assert rows[0]["id"].startswith(_config(recipe) + "/")


@pytest.mark.slow
@pytest.mark.parametrize("recipe", E2E)
def test_recipe_end_to_end(recipe, tmp_path, data_dir, tables_file, tiny_hf_checkpoints):
    from chartjax.train import train

    assert recipe in RECIPES
    gin.clear_config()
    config_lib.parse_gin(
        [f"tasks/{recipe}.gin"], _bindings(tiny_hf_checkpoints["bart"], data_dir, tables_file)
    )
    try:
        out = train(str(tmp_path))
    finally:
        gin.clear_config()
    assert out["step"] == 2 and out["stop_reason"] == "done"
    mdir = tmp_path / "eval" / "test" / "step_2"
    obj = json.loads((mdir / "metrics.json").read_text())
    rows = prediction_files.read_jsonl(mdir / "predictions.jsonl")
    _check_metrics(obj, rows, recipe)
    again = chart_to_text_scores([r["prediction"] for r in rows], [r["target"] for r in rows])
    assert obj["metrics"]["bleu"] == pytest.approx(again.metrics["bleu"])
