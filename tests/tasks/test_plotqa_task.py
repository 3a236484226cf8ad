"""PlotQA fine-tuning (chartjax/tasks/plotqa/task.py) and DePlot on PlotQA's derived tables
(deplot_task.source = "plotqa"), plus DePlot's ChartQA evaluation recipe (issue 41 item 4).

Structural, as tests/tasks/test_chartqa_task.py checks the ChartQA recipes: every recipe loads,
builds its task and featurizes a training and an evaluation batch of the plotqa builder's dummy
data (v1 and v2), and its own targets score perfectly. The ChartQA QA run end to end in
test_chartqa_task.py covers this model family and task kind (and deplot_chart_info's the DePlot
task), so no new training run; the released-checkpoint recipes are run through chartjax-eval's
loop once, on tiny HF-format weights.
"""

from __future__ import annotations

import json

import gin
import numpy as np
import pytest

from chartjax import config as config_lib
from chartjax.metrics import report
from chartjax.tasks import catalog, deplot
from chartjax.tasks.core import seq2seq
from chartjax.tasks.plotqa import task as plotqa_task
from tests.gin_configs.test_tasks import TASKS, recipe_kind
from tests.tasks.tiny_recipes import P2S_TINY, recipe_batches

QA_RECIPES = (
    "plotqa_v1_matcha",
    "plotqa_v2_matcha",
    "plotqa_v1_matcha_eval",
    "plotqa_v2_matcha_eval",
)


@pytest.fixture(autouse=True)
def _clean_gin():
    gin.clear_config()
    yield
    gin.clear_config()


def _bindings(vocab_file: str, data_dir: str) -> list[str]:
    return P2S_TINY + [f"VOCAB = '{vocab_file}'", f"DATA_DIR = '{data_dir}'", "INIT_PATH = 'x'"]


def _eval_rows(task, batch):
    keep = np.asarray(batch["_mask"])
    cols = {k: np.asarray(v)[keep] for k, v in batch.items() if k in seq2seq.RECORD_KEYS}
    return task.evaluate(np.asarray(batch["decoder_target_tokens"])[keep], cols, "v")


# ---------------------------------------------------------------- records -----------------


def test_question_records_keep_the_answer_as_written_and_its_template():
    ex = {
        "id": "v2/test/8",
        "question_string": "What is the sum of Debt?",
        "answer": "81",
        "template": "arithmetic",
        "type": "line",
    }
    assert plotqa_task.question_record(ex) == [
        {
            "id": "v2/test/8",
            "prompt": "What is the sum of Debt?",
            "target": "81",
            "meta": {"template": "arithmetic", "question_type": "line"},
        }
    ]
    assert plotqa_task.answer_text('"Peru"') == "Peru"
    assert plotqa_task.answer_text("7.25") == "7.25"
    assert plotqa_task.answer_text("1e-05") == "1e-05"  # as the release wrote it
    assert plotqa_task.answer_text("NaN") == "NaN"  # not a finite number: kept as stored
    (rec,) = plotqa_task.question_record({**ex, "template": "", "type": ""})
    assert rec["meta"] == {}
    with pytest.raises(ValueError, match="plotqa_task.config must be one of"):
        plotqa_task.make_task(config="v3", features=seq2seq.Features(vocab_file="x"))
    assert catalog.inference_of_run({"task": "plotqa"}) == "chartqa"


def test_scores_per_template_and_question_type():
    records = [
        {"target": "14", "meta": {"template": "data_retrieval", "question_type": "line"}},
        {"target": "Peru", "meta": {"template": "min_max", "question_type": "hbar_categorical"}},
        {"target": "100", "meta": {"template": "data_retrieval", "question_type": "line"}},
    ]
    # 14.5 is within 5 % of 14; "peru" matches case-insensitively; 106 is 6 % off 100.
    scores, extra = plotqa_task.score(["14.5", "peru", "106"], records)
    assert scores.metrics["relaxed_accuracy"] == pytest.approx(2 / 3)
    templates = scores.breakdowns["template"]
    assert templates["data_retrieval"]["relaxed_accuracy"] == 0.5
    assert templates["data_retrieval"]["n"] == 2
    assert templates["min_max"]["relaxed_accuracy"] == 1.0
    assert scores.breakdowns["question_type"]["line"]["relaxed_accuracy"] == 0.5
    assert [e["relaxed_correct"] for e in extra] == [True, True, False]
    assert extra[1] == {
        "template": "min_max",
        "question_type": "hbar_categorical",
        "relaxed_correct": True,
    }


def test_plotqa_annotation_to_deplot_target():
    """A hand-written annotations.json entry: the build's table (header = the category axis's
    title and the series labels; a row per category) under the entry's title."""
    from tfds_builders.plotqa.plotqa_table import plot_table

    entry = {
        "image_index": 7,
        "type": "hbar_categorical",
        "general_figure_info": {
            "title": {"text": "Tourists | 2019"},
            "x_axis": {"label": {"text": "Arrivals (millions)"}},
            "y_axis": {"label": {"text": "Country"}},
        },
        "models": [
            {"name": "n1", "label": "Air", "x": [12.5, 3], "y": ["Peru", "Chad"]},
            {"name": "Sea", "x": [1], "y": ["Chad"]},
        ],
    }
    table = plot_table(entry)
    assert table == "Country,Air,Sea\nPeru,12.5,\nChad,3,1\n"
    assert deplot.plotqa_table_target(table, json.dumps(entry)) == (
        "TITLE | Tourists / 2019\nCountry | Air | Sea\nPeru | 12.5 | \nChad | 3 | 1"
    )
    assert deplot.plotqa_title("{}") == "" and deplot.plotqa_title("not json") == ""
    assert deplot.plotqa_table_target("", "{}") == "TITLE | \n"


# ---------------------------------------------------------------- recipes -----------------

# (recipe, its eval split as the task names it, plotqa config) -> the dummy build's questions
# of that split: (question ids, templates).
DUMMY_QUESTIONS = {
    ("v1", "validation"): ({"v1/validation/10", "v1/validation/11"}, ["data_retrieval", "min_max"]),
    ("v2", "validation"): (
        {"v2/validation/10", "v2/validation/11", "v2/validation/12"},
        ["arithmetic", "data_retrieval", "min_max"],
    ),
    ("v1", "test"): ({"v1/test/7"}, ["comparison"]),
    ("v2", "test"): ({"v2/test/7", "v2/test/8"}, ["arithmetic", "comparison"]),
}


@pytest.mark.parametrize("recipe", QA_RECIPES)
def test_plotqa_recipe_builds_and_featurizes(recipe, vocab_file, tfds_dir):
    """Parses, builds the task, featurizes a training and an evaluation batch of the dummy
    build of the recipe's config; the targets themselves score 1 overall and per template, in
    a valid metrics.json."""
    config = "v2" if "v2" in recipe else "v1"
    is_eval = recipe.endswith("_eval")
    data_dir = tfds_dir("plotqa", config)
    bindings = _bindings(vocab_file, data_dir)
    config_lib.parse_gin([f"tasks/{recipe}.gin"], bindings)
    assert gin.query_parameter("plotqa_task.config") == config
    assert gin.query_parameter("train.init_format") == ("hf" if is_eval else "t5x")
    assert recipe_kind(TASKS / f"{recipe}.gin") == ("eval" if is_eval else "train")
    if not is_eval:
        assert gin.query_parameter("train.best_metric") == "relaxed_accuracy"
        assert gin.query_parameter("train.global_batch_size") == 256
        assert gin.query_parameter("schedule.total_steps") == 10000
        # runs/smoke.gin after it evaluates one plot's questions, not a shard of plots
        gin.clear_config()
        config_lib.parse_gin([f"tasks/{recipe}.gin", "runs/smoke.gin"], bindings)
        assert gin.query_parameter("plotqa_task.eval_splits") == ("validation[:1]",)
    split = "test" if is_eval else "validation[:1shard]"
    task, train_batch, batch = recipe_batches(recipe, bindings, "plotqa", split)
    assert task.eval_splits == (split,)
    assert train_batch["encoder_input_tokens"].shape == (8, 64, 2 + 4 * 4 * 3)
    assert train_batch["decoder_target_tokens"].shape == (8, 32)
    ids, templates = DUMMY_QUESTIONS[(config, split.split("[")[0])]
    scores, rows = _eval_rows(task, batch)
    assert {r["id"] for r in rows} == ids
    assert scores.metrics["relaxed_accuracy"] == 1.0
    assert sorted(r["template"] for r in rows) == templates
    assert all(r["relaxed_correct"] for r in rows)
    assert set(scores.breakdowns["template"]) == set(templates)
    assert all(v["relaxed_accuracy"] == 1.0 for v in scores.breakdowns["template"].values())
    if config == "v2" and is_eval:  # the dummy's numeric answer, written as the release did
        assert {r["id"]: r["target"] for r in rows}["v2/test/8"] == "81"
    report.validate_metrics(
        report.build_metrics(
            task="plotqa",
            split=split,
            step=0,
            num_examples=len(rows),
            metrics=scores.metrics,
            breakdowns=scores.breakdowns,
            unavailable=scores.unavailable,
            provenance={"libraries": scores.libraries},
        )
    )


# The dummy plotqa build's plots as DePlot targets (tfds_builders/plotqa/dummy_data).
DUMMY_TABLES = {
    "validation": {
        "0": "TITLE | Yield\nYear | Wheat\n2001 | 2.5\n2002 | 3.5",
        "1": "TITLE | Visitors\nMonth | Visitors\nJan | 100\nFeb | 150",
    },
    "test": {"0": "TITLE | Debt\nYear | Debt\n2015 | 40\n2016 | 41"},
}


@pytest.mark.parametrize("recipe", ["deplot_plotqa", "deplot_plotqa_eval"])
def test_deplot_plotqa_recipe_reads_a_table_per_plot(recipe, vocab_file, tfds_dir):
    """One DePlot example per plot (not per question), its target the derived table under the
    plot's title, chart type the plot's type."""
    bindings = _bindings(vocab_file, tfds_dir("plotqa", "v1"))
    config_lib.parse_gin([f"tasks/{recipe}.gin"], bindings)
    is_eval = recipe.endswith("_eval")
    assert gin.query_parameter("train.init_format") == ("hf" if is_eval else "t5x")
    assert recipe_kind(TASKS / f"{recipe}.gin") == ("eval" if is_eval else "train")
    split = "test" if is_eval else "validation"
    task, train_batch, batch = recipe_batches(recipe, bindings, "deplot", split)
    assert task.source.per_record and task.source.name == "plotqa/v1"
    assert task.eval_splits == (("test",) if is_eval else ("validation", "test"))
    assert train_batch["encoder_input_tokens"].shape == (8, 64, 2 + 4 * 4 * 3)
    scores, rows = _eval_rows(task, batch)
    assert {r["id"]: r["target"] for r in rows} == DUMMY_TABLES[split]
    assert all(r["input"] == deplot.PROMPT for r in rows)
    # 32 target tokens cut the tables short; the numbers match as far as they go.
    assert 0.0 < scores.metrics["rnss"] <= 1.0
    types = {"validation": {"dot_line", "vbar_categorical"}, "test": {"line"}}[split]
    assert set(scores.breakdowns["chart_type"]) == types


def test_deplot_chartqa_eval_recipe_reads_the_test_tables(vocab_file, tfds_dir):
    bindings = _bindings(vocab_file, tfds_dir("chartqa"))
    config_lib.parse_gin(["tasks/deplot_chartqa_eval.gin"], bindings)
    assert gin.query_parameter("train.init_format") == "hf"
    assert recipe_kind(TASKS / "deplot_chartqa_eval.gin") == "eval"
    task, _, batch = recipe_batches("deplot_chartqa_eval", bindings, "deplot", "test")
    assert task.eval_splits == ("test",) and task.source.name == "chartqa"
    scores, rows = _eval_rows(task, batch)
    assert rows and all(r["target"].startswith("TITLE | \n") for r in rows)
    assert 0.0 < scores.metrics["rms_f1"] <= 1.0


# ---------------------------------------------------------------- released weights --------


@pytest.mark.slow
def test_released_checkpoint_recipes_score_tiny_hf_weights(tmp_path, vocab_file, tfds_dir):
    """matcha-plotqa-v2 and deplot on PlotQA through chartjax-eval's loop, on a tiny HF-format
    Pix2Struct standing in for the released weights (init/hf.gin); metrics.json read back."""
    from chartjax import evaluate as evaluate_lib
    from chartjax.interop import hf
    from chartjax.models import tiny
    from chartjax.models.t5 import pix2struct
    from tests.tasks.tiny_recipes import RUN_TINY, TINY_LAYERS

    init = tmp_path / "tiny-hf"
    hf.save(pix2struct.build(tiny.tiny_pix2struct(**TINY_LAYERS), 3), str(init))
    data_dir = tfds_dir("plotqa", "v2")
    tfds_dir("plotqa", "v1")
    for recipe, metric, n in (
        ("plotqa_v2_matcha_eval", "relaxed_accuracy", 2),  # dummy v2 test: 2 questions
        ("deplot_plotqa_eval", "rms_f1", 1),  # its one plot
    ):
        gin.clear_config()
        bindings = P2S_TINY + RUN_TINY + _bindings(vocab_file, data_dir)[len(P2S_TINY) :]
        config_lib.parse_gin([f"tasks/{recipe}.gin"], bindings + [f"INIT_PATH = '{init}'"])
        workdir = tmp_path / recipe
        assert set(evaluate_lib.evaluate(str(workdir))) == {"test"}
        obj = json.loads((workdir / "eval/test/step_0/metrics.json").read_text())
        report.validate_metrics(obj)
        assert obj["num_examples"] == n
        assert 0.0 <= obj["metrics"][metric] <= 1.0
        if metric == "relaxed_accuracy":
            assert set(obj["breakdowns"]["template"]) == {"arithmetic", "comparison"}
        else:
            assert "rnss" in obj["metrics"] and set(obj["breakdowns"]["chart_type"]) == {"line"}
