"""Every benchmark chartjax knows, by name: the one place that lists the task modules.

* `get_task(name)`: the training/evaluation Task (`train.task = "figureqa"` in gin; each
  factory is gin-configurable under its own name, e.g. `figureqa_task.image_size`).
* `inference(name)`: the InferenceSpec behind `chartjax-infer --task NAME`.
* `scorer(name)`: the FileScorer behind `chartjax-score --task NAME` (docs/design.md §8 names).
* `data_provenance(name, builder_dir, split)`: what a task's build records of a split that a
  metrics.json should carry (ChartCheck: which test set 2 it holds).
"""

from __future__ import annotations

from chartjax.tasks import (
    chart_info,
    chart_to_text,
    chartcheck,
    chartqa,
    chartqapro,
    deplot,
    figureqa,
    matcha,
    plotqa,
)
from chartjax.tasks.chart_info import text as chart_info_text
from chartjax.tasks.chart_to_text import caption as chart_to_text_caption
from chartjax.tasks.chart_to_text import records as chart_to_text_records
from chartjax.tasks.chartcheck import classifier as chartcheck_classifier
from chartjax.tasks.chartcheck import test_sets as chartcheck_test_sets
from chartjax.tasks.chartqa import references as chartqa_references
from chartjax.tasks.chartqa import task as chartqa_task
from chartjax.tasks.chartqapro import references as chartqapro_references
from chartjax.tasks.core import free_form, text_classification
from chartjax.tasks.core.task import FileScorer, InferenceSpec, Task
from chartjax.tasks.plotqa import references as plotqa_references
from chartjax.tasks.plotqa import task as plotqa_task
from chartjax.tasks.smoke import prefix_lm_synthetic, seq2seq_synthetic, synthetic

TASKS = {
    "figureqa": figureqa.make_task,
    "chartcheck": chartcheck.make_task,
    "chartcheck_classifier": chartcheck_classifier.make_task,
    "chart_to_text": chart_to_text.make_task,
    "chart_to_text_caption": chart_to_text_caption.make_task,
    "chart_to_text_barlow_twins": chart_to_text_caption.make_pretrain_task,
    "chart_to_text_records": chart_to_text_records.make_task,
    "chart_info": chart_info.make_task,
    "chart_info_text": chart_info_text.make_task,
    "deplot": deplot.make_task,
    "chartqa": chartqa_task.make_task,
    "plotqa": plotqa_task.make_task,
    "matcha": matcha.make_task,
    "synthetic": synthetic.make_task,
    "synthetic_seq2seq": seq2seq_synthetic.make_task,
    "synthetic_prefix_lm": prefix_lm_synthetic.make_task,
}
INFERENCE: dict[str, InferenceSpec] = {
    spec.name: spec
    for spec in (
        deplot.INFERENCE,
        chartqa.INFERENCE,
        chartqapro.INFERENCE,
        figureqa.INFERENCE,
        chartcheck.INFERENCE,
        free_form.CAPTION,
        chart_to_text.INFERENCE,
        free_form.TEXT,
        text_classification.CLASSIFY,
    )
}
SCORERS: dict[str, FileScorer] = {
    s.name: s
    for s in (
        figureqa.SCORER,
        chartcheck.SCORER,
        chart_to_text.SCORER,
        *chart_info.SCORERS,
        deplot.SCORER,
        chartqa_references.with_tfds_references(chartqa.SCORER),
        plotqa_references.with_tfds_references(plotqa.SCORER),
        chartqapro_references.with_tfds_references(chartqapro.SCORER),
    )
}


# task -> (builder_dir, split) -> {provenance.libraries key: value}
DATA_PROVENANCE = {"chartcheck": chartcheck_test_sets.test_set_provenance}


def data_provenance(name: str, builder_dir: str, split: str) -> dict[str, str]:
    """What `name`'s build at `builder_dir` says of `split` for the provenance ({} if nothing)."""
    fn = DATA_PROVENANCE.get(name)
    return fn(builder_dir, split) if fn else {}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise KeyError(f"unknown task {name!r}; known: {sorted(TASKS)}")
    return TASKS[name]()


def inference(name: str) -> InferenceSpec:
    if name not in INFERENCE:
        raise KeyError(f"no inference task {name!r}; known: {sorted(INFERENCE)}")
    return INFERENCE[name]


# The inference task a train run's task implies (its records render this task's prompt; its
# yes/no models read its own features).
# The inference task of a model that answers a question about an image and has no train run to
# say otherwise (an HF PaliGemma folder): the prompt is the question itself.
QUESTION_ANSWERING = "chartqa"

_RUN_TASKS = {
    "deplot": "deplot",
    "chartcheck": "chartcheck",
    "figureqa": "figureqa",
    "chartqa": "chartqa",
    "plotqa": "chartqa",  # the same question-as-header model; PlotQA's answers are scored apart
}


def inference_of_run(run: dict) -> str | None:
    """The inference task of an image model's train run (`saved_gin.input_settings`), if its
    records imply one: DePlot, ChartCheck, CHART-Info task 6b (DePlot tables), FigureQA,
    ChartQA and PlotQA (both ChartQA's: the question rendered as the header)."""
    task = run.get("task")
    if task == "chart_info" and run.get("is_vqa"):
        return "deplot"
    return _RUN_TASKS.get(task)


def templates() -> dict[str, str]:
    """Every task's named prompts (`chartjax-infer --template NAME`), e.g. a ChartCheck
    Flan-T5 prompt for `--task text`."""
    return {k: v for spec in INFERENCE.values() for k, v in spec.templates.items()}


def scorer(name: str) -> FileScorer:
    if name not in SCORERS:
        raise KeyError(f"no scorer {name!r}; known: {sorted(SCORERS)}")
    return SCORERS[name]
