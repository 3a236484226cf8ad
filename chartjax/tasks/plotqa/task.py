"""PlotQA fine-tuning and evaluation (MatCha): the question rendered as the header above the
plot, the answer as the target, as the ChartQA task makes its examples (chartqa_task.py; MatCha
fine-tuned PlotQA v1 and v2 separately, docs/models.md §2.3).

Examples come from a plotqa build (tfds_builders/plotqa, config `v1` or `v2`: the PlotQA release
or a `chartjax-synth plotqa` corpus), one per question (a plot's questions expanded by
chartjax/data/tfds_records.py), id `<config>/<split>/<question_id>` (docs/design.md §8). The
target is the release's answer as it was written: a string answer as text, a numeric one as the
JSON number (`14`, `7.25`). Each evaluation scores as `chartjax-score --task plotqa --references
tfds:plotqa/<config>:<split>` does (chartjax.metrics.plotqa.plotqa_scores): `relaxed_accuracy`
overall (pix2struct's relaxed_correctness: 5 % for numbers, else a case-insensitive exact match)
with its 95 % interval, and the breakdowns `template` (data_retrieval, min_max, arithmetic, ...)
and `question_type` (the pair's `type`: vbar_categorical, line, ...). Each predictions.jsonl row
carries its `template`, `question_type` and whether it is `relaxed_correct`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import gin

from chartjax.metrics import chartqa as chartqa_metrics
from chartjax.metrics import plotqa as plotqa_metrics
from chartjax.tasks.core import seq2seq
from chartjax.tasks.core.task import Task

CONFIGS = ("v1", "v2")
FIELD_KEYS = ("id", "question_string", "answer", "template", "type")


def answer_text(answer_json: str) -> str:
    """A plotqa build's `answer` (the release's answer as JSON text) as the target text: a
    string as itself, a finite number as written (`14`, `7.25`), anything else as stored."""
    try:
        value = json.loads(answer_json)
    except json.JSONDecodeError:
        return answer_json
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return answer_json.strip()
    return answer_json


def question_record(example: dict) -> list[dict]:
    """One question of a plotqa build as a seq2seq record; its template and type (when the
    release gives them) in `meta`."""
    meta = {}
    for key, field in (("template", "template"), ("question_type", "type")):
        if example.get(field):
            meta[key] = example[field]
    return [
        {
            "id": example["id"],
            "prompt": example["question_string"],
            "target": answer_text(example["answer"]),
            "meta": meta,
        }
    ]


def score(texts: list[str], records: list[dict]):
    """Relaxed accuracy overall, per template and per question type; per-row correctness."""
    targets = [r["target"] for r in records]
    templates = [r["meta"].get("template") for r in records]
    types = [r["meta"].get("question_type") for r in records]
    scores = plotqa_metrics.plotqa_scores(
        texts,
        targets,
        templates=templates if any(templates) else None,
        question_types=types if any(types) else None,
    )
    extra = [
        {
            "template": tm,
            "question_type": ty,
            "relaxed_correct": chartqa_metrics.relaxed_correctness(t, p),
        }
        for p, t, tm, ty in zip(texts, targets, templates, types)
    ]
    return scores, extra


@gin.configurable("plotqa_task", module="chartjax.tasks.plotqa_task")
def make_task(
    data_dir: str = "~/tensorflow_datasets",
    config: str = "v1",
    train_split: str = "train",
    eval_splits: Sequence[str] = ("validation", "test"),
    shuffle_buffer: int = 10_000,
    features: seq2seq.Features | None = None,
    decoding: seq2seq.Decoding | None = None,
) -> Task:
    """The PlotQA question-answering task over the `plotqa/<config>` build in `data_dir`.

    config: `v1` (qa_pairs_V1.json) or `v2` (qa_pairs_V2.json, a superset with more
      open-vocabulary numeric answers); MatCha reports the two separately.
    eval_splits: TFDS split names, slices included: `validation[:1shard]` is the build's first
      shard of plots (about 500, spread over the split) with all their questions.
    """
    if config not in CONFIGS:
        raise ValueError(f"plotqa_task.config must be one of {CONFIGS}, not {config!r}")
    return seq2seq.make_task(
        name="plotqa",
        dataset=f"plotqa/{config}",
        data_dir=data_dir,
        train_split=train_split,
        eval_splits=tuple(eval_splits),
        field_keys=FIELD_KEYS,
        expand=question_record,
        score_fn=lambda texts, records, split: score(texts, records),
        features=features or seq2seq.Features(),
        decoding=decoding or seq2seq.Decoding(),
        shuffle_buffer=shuffle_buffer,
    )
