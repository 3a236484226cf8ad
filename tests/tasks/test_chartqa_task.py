"""ChartQA fine-tuning (chartjax/tasks/chartqa/task.py) and DePlot on ChartQA tables
(deplot_task.source = "chartqa"): the five recipes load, build their task and featurize a batch
of the chartqa builder's dummy data (a table-only build for DePlot), scoring the targets
themselves perfectly; and one `chartjax-train` run of a tiny Pix2Struct on a generated
`chartjax-synth chartqa` corpus writes the per-source relaxed accuracies (issue 41 items 4, 5)."""

from __future__ import annotations

import json
import os
import shutil

import gin
import numpy as np
import pytest

from chartjax import config as config_lib
from chartjax.metrics import report
from chartjax.tasks import deplot
from chartjax.tasks.chartqa import task as chartqa_task
from chartjax.tasks.core import seq2seq
from tests.gin_configs.test_tasks import TASKS, recipe_kind
from tests.tasks.tiny_recipes import P2S_TINY, recipe_batches

QA_RECIPES = ("chartqa_matcha", "chartqa_pix2struct", "chartqa_matcha_eval", "chartqa_lattice_toy")
RECIPES = (*QA_RECIPES, "deplot_chartqa")
INIT_FORMAT = {
    "chartqa_matcha": "t5x",
    "chartqa_pix2struct": "t5x",
    "chartqa_matcha_eval": "hf",
    "chartqa_lattice_toy": "chartjax",  # from the chart -> table stage (benches.py chartqa_learning)
    "deplot_chartqa": "t5x",
}


@pytest.fixture(autouse=True)
def _clean_gin():
    gin.clear_config()
    yield
    gin.clear_config()


# ---------------------------------------------------------------- records -----------------


def test_question_records_carry_their_source_and_skip_left_out_sources():
    ex = {"id": "test/human/3", "query": "Which year?", "label": "2019", "source": "human"}
    (rec,) = chartqa_task.question_record(ex, ("human", "augmented"))
    assert rec == {
        "id": "test/human/3",
        "prompt": "Which year?",
        "target": "2019",
        "meta": {"source": "human"},
    }
    assert chartqa_task.question_record(ex, ("augmented",)) == []
    with pytest.raises(ValueError, match="chartqa_task.protocol must be one of"):
        chartqa_task.make_task(protocol="nope", features=seq2seq.Features(vocab_file="x"))


def test_inference_reads_the_question_under_chartqa_and_plotqa_names():
    from chartjax.inference.prompts import render_prompt
    from chartjax.tasks.chartqa import INFERENCE

    for name in ("question", "query", "question_string"):  # ours, ChartQA's, PlotQA's
        fields = {name: "Which year?", "answer": "2019"}
        assert (
            render_prompt("{question}", fields, "row 1", INFERENCE.field_aliases) == "Which year?"
        )


def test_chartqa_table_as_deplot_target():
    csv_text = '\ufeffYear,Online,In store\n2019,10.0,nan\n\n2020,"1,5",90.0\n'
    assert deplot.chartqa_table_target(csv_text.lstrip("\ufeff")) == (
        "TITLE | \nYear | Online | In store\n2019 | 10.0 | nan\n2020 | 1,5 | 90.0"
    )
    assert deplot.chartqa_table_target("") == "TITLE | \n"


# ---------------------------------------------------------------- recipes -----------------


def _bindings(vocab_file: str, data_dir: str) -> list[str]:
    return P2S_TINY + [f"VOCAB = '{vocab_file}'", f"DATA_DIR = '{data_dir}'", "INIT_PATH = 'x'"]


@pytest.mark.parametrize("recipe", QA_RECIPES)
def test_chartqa_recipe_builds_and_featurizes(recipe, vocab_file, tfds_dir):
    """Parses, builds the task, featurizes a training and an evaluation batch of the dummy
    build; the targets themselves score 1 in every source, in a valid metrics.json."""
    data_dir = tfds_dir("chartqa")
    config_lib.parse_gin([f"tasks/{recipe}.gin"], _bindings(vocab_file, data_dir))
    assert gin.query_parameter("train.init_format") == INIT_FORMAT[recipe]
    assert recipe_kind(TASKS / f"{recipe}.gin") == ("eval" if "eval" in recipe else "train")
    if recipe != "chartqa_matcha_eval":
        assert gin.query_parameter("train.best_metric") == "relaxed_accuracy_human"
    task, train_batch, batch = recipe_batches(
        recipe, _bindings(vocab_file, data_dir), "chartqa", "validation"
    )
    assert train_batch["encoder_input_tokens"].shape == (8, 64, 2 + 4 * 4 * 3)
    assert train_batch["decoder_target_tokens"].shape == (8, 32)
    keep = np.asarray(batch["_mask"])
    assert keep.sum() == 4  # dummy val: 2 human + 2 augmented questions
    cols = {k: np.asarray(v)[keep] for k, v in batch.items() if k in seq2seq.RECORD_KEYS}
    scores, rows = task.evaluate(np.asarray(batch["decoder_target_tokens"])[keep], cols, "v")
    m = scores.metrics
    assert m["relaxed_accuracy"] == m["relaxed_accuracy_human"] == 1.0
    assert m["relaxed_accuracy_augmented"] == 1.0
    assert sorted(r["source"] for r in rows) == ["augmented", "augmented", "human", "human"]
    assert all(r["relaxed_correct"] for r in rows)
    assert {r["id"] for r in rows} == {
        f"validation/{s}/{i}" for s in ("human", "augmented") for i in (0, 1)
    }
    report.validate_metrics(
        report.build_metrics(
            task="chartqa",
            split="validation",
            step=0,
            num_examples=len(rows),
            metrics=m,
            breakdowns=scores.breakdowns,
            unavailable=scores.unavailable,
            provenance={"libraries": scores.libraries},
        )
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A tiny `chartjax-synth chartqa` corpus, as written and with its QA files removed."""
    from chartjax.tools.synth import main as synth_main

    root = tmp_path_factory.mktemp("chartqa_gen")
    qa = root / "qa"
    argv = ["chartqa", "--out", str(qa), "--train-charts", "6", "--val-charts", "2"]
    assert synth_main(argv + ["--questions", "1", "--size", "320x240", "--seed", "3"]) == 0
    tables_only = root / "tables_only"
    shutil.copytree(qa, tables_only)
    for path in tables_only.glob("*/*_*.json"):
        path.unlink()
    return {"qa": qa, "tables_only": tables_only, "root": root}


def _tfds_build(manual_dir, data_dir) -> str:
    import tensorflow_datasets as tfds

    from tfds_builders.chartqa import chartqa as builder_mod

    builder = builder_mod.Builder(data_dir=str(data_dir))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual_dir))
    )
    return str(data_dir)


@pytest.mark.slow
def test_deplot_chartqa_recipe_reads_a_build_of_tables_without_questions(vocab_file, corpus):
    """Charts and tables only (one's own tables): one DePlot example per chart."""
    data_dir = _tfds_build(corpus["tables_only"], corpus["root"] / "tfds_tables")
    bindings = _bindings(vocab_file, data_dir)
    config_lib.parse_gin(["tasks/deplot_chartqa.gin"], bindings)
    assert gin.query_parameter("train.init_format") == "t5x"
    task, train_batch, batch = recipe_batches("deplot_chartqa", bindings, "deplot", "validation")
    assert task.eval_splits == ("validation", "test") and task.source.per_record
    assert train_batch["encoder_input_tokens"].shape == (8, 64, 2 + 4 * 4 * 3)
    keep = np.asarray(batch["_mask"])
    assert keep.sum() == 2  # both validation charts, no question among them
    cols = {k: np.asarray(v)[keep] for k, v in batch.items() if k in seq2seq.RECORD_KEYS}
    scores, rows = task.evaluate(np.asarray(batch["decoder_target_tokens"])[keep], cols, "v")
    stems = sorted(p.stem for p in (corpus["tables_only"] / "val" / "png").iterdir())
    assert sorted(r["id"] for r in rows) == stems
    for r in rows:
        csv_text = (corpus["tables_only"] / "val" / "tables" / f"{r['id']}.csv").read_text()
        assert r["target"] == deplot.chartqa_table_target(csv_text)
        assert r["input"] == deplot.PROMPT
    # 32 target tokens cut the tables; their numbers match as far as they go
    assert 0.0 < scores.metrics["rnss"] <= 1.0
    assert set(scores.breakdowns["chart_type"]) == {"unknown"}  # no annotations/


# ---------------------------------------------------------------- end to end --------------


@pytest.mark.slow
def test_chartqa_train_end_to_end_writes_relaxed_accuracy_per_source(
    tmp_path, capsys, vocab_file, corpus
):
    """chartjax-train, a tiny Pix2Struct from scratch for 2 steps (runs/smoke.gin) on a
    generated ChartQA-style build: metrics.json has the per-source relaxed accuracies."""
    from chartjax.tools import train as train_cli

    data_dir = _tfds_build(corpus["qa"], corpus["root"] / "tfds_qa")
    workdir = tmp_path / "run"
    bindings = [
        f"VOCAB = '{vocab_file}'",
        f"DATA_DIR = '{data_dir}'",
        "Pix2StructConfig.vocab_size = 400",
        "train.num_train_steps = 2",
        "train.checkpoint_every = 2",
        "train.log_every = 1",
        "Decoding.max_decode_len = 8",
    ]
    args = [
        "--gin_file=tasks/chartqa_pix2struct.gin",
        "--gin_file=runs/smoke.gin",
        f"--workdir={workdir}",
    ]
    status = train_cli.main(args + [f"--gin_bindings={b}" for b in bindings])
    assert status == 0, capsys.readouterr().err
    (split_dir,) = (workdir / "eval").iterdir()  # validation[:1], the first chart's questions
    step_dir = split_dir / "step_2"
    obj = json.loads((step_dir / "metrics.json").read_text())
    report.validate_metrics(obj)
    assert obj["task"] == "chartqa" and obj["num_examples"] == 2  # 1 human + 1 augmented
    m = obj["metrics"]
    for name in ("relaxed_accuracy", "relaxed_accuracy_human", "relaxed_accuracy_augmented"):
        assert 0.0 <= m[name] <= 1.0 and f"{name}_ci95_low" in m
    assert obj["provenance"]["libraries"]["protocol"] == "pix2struct"
    rows = [
        json.loads(line)
        for line in (step_dir / "predictions.jsonl").read_text().split("\n")
        if line
    ]
    assert sorted(r["source"] for r in rows) == ["augmented", "human"]
    assert {r["id"].split("/")[1] for r in rows} == {"human", "augmented"}
    assert os.path.isdir(workdir / "checkpoints" / "2")
    # The run's questions were headers: its exports and chartjax-infer read it as ChartQA's.
    from chartjax.interop import saved_gin
    from chartjax.tasks import catalog

    run = saved_gin.input_settings(str(workdir / "config.gin"))
    assert run["is_vqa"] and catalog.inference_of_run(run) == "chartqa"


@pytest.mark.slow
def test_chartqa_matcha_eval_scores_tiny_hf_weights(tmp_path, vocab_file, tfds_dir):
    """The released-checkpoint recipe through chartjax-eval's loop, on a tiny HF-format
    Pix2Struct standing in for google/matcha-chartqa (init/hf.gin)."""
    from chartjax import evaluate as evaluate_lib
    from chartjax.interop import hf
    from chartjax.models import tiny
    from chartjax.models.t5 import pix2struct
    from tests.tasks.tiny_recipes import RUN_TINY, TINY_LAYERS

    init = tmp_path / "matcha-chartqa"
    hf.save(pix2struct.build(tiny.tiny_pix2struct(**TINY_LAYERS), 3), str(init))
    bindings = P2S_TINY + RUN_TINY + _bindings(vocab_file, tfds_dir("chartqa"))[len(P2S_TINY) :]
    config_lib.parse_gin(["tasks/chartqa_matcha_eval.gin"], bindings + [f"INIT_PATH = '{init}'"])
    out = evaluate_lib.evaluate(str(tmp_path / "run"))
    assert set(out) == {"test"}
    obj = json.loads((tmp_path / "run/eval/test/step_0/metrics.json").read_text())
    report.validate_metrics(obj)
    assert obj["num_examples"] == 3  # dummy test: 2 human + 1 augmented questions
    assert {"relaxed_accuracy_human", "relaxed_accuracy_augmented"} <= set(obj["metrics"])
