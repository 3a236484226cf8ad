"""ChartQA fine-tuning and evaluation (Pix2Struct, MatCha): the question rendered as the header
above the chart, the answer (`label`) as the target, as pix2struct's `convert_chartqa.py` makes
its examples (docs/corpora.md §5; the header: docs/models.md §1.5).

Examples come from a chartqa build (tfds_builders/chartqa: the ChartQA release, a
`chartjax-synth chartqa` corpus or one's own charts), one per question (a chart's questions
expanded by chartjax/data/tfds_records.py; charts without questions give none), id
`<split>/<source>/<index>` (docs/design.md §8). Each record's `meta.source` (human /
augmented) reaches the scorer, so every evaluation scores as `chartjax-score --task chartqa
--references tfds:chartqa:<split>` does (chartjax.metrics.chartqa.chartqa_scores):
`relaxed_accuracy` (the mean of the two sources' accuracies, as papers report it),
`relaxed_accuracy_human`, `relaxed_accuracy_augmented` (each with its 95 % interval) and
`relaxed_accuracy_pooled` beside the mean when the sources differ in size. `protocol` picks how
answers are compared (`pix2struct`, the default, as MatCha and Pix2Struct were scored); each
predictions.jsonl row carries its `source` and whether it is `relaxed_correct`.
"""

from __future__ import annotations

from collections.abc import Sequence

import gin

from chartjax.metrics import chartqa as chartqa_metrics
from chartjax.tasks.core import seq2seq
from chartjax.tasks.core.task import Task

FIELD_KEYS = ("id", "query", "label", "source")


def question_record(example: dict, sources: Sequence[str]) -> list[dict]:
    """One question of a chartqa build as a seq2seq record (none when its source is left out)."""
    if example["source"] not in sources:
        return []
    return [
        {
            "id": example["id"],
            "prompt": example["query"],
            "target": example["label"],
            "meta": {"source": example["source"]},
        }
    ]


def score(texts: list[str], records: list[dict], protocol: str):
    """Relaxed accuracy overall and per source; per-row source and correctness."""
    targets = [r["target"] for r in records]
    sources = [r["meta"].get("source") for r in records]
    scores = chartqa_metrics.chartqa_scores(texts, targets, sources, protocol=protocol)
    extra = [
        {"source": s, "relaxed_correct": chartqa_metrics.protocol_correct(t, p, protocol)}
        for p, t, s in zip(texts, targets, sources)
    ]
    return scores, extra


@gin.configurable("chartqa_task", module="chartjax.tasks.chartqa_task")
def make_task(
    data_dir: str = "~/tensorflow_datasets",
    train_split: str = "train",
    eval_splits: Sequence[str] = ("validation", "test"),
    sources: Sequence[str] = ("human", "augmented"),
    protocol: str = "pix2struct",
    shuffle_buffer: int = 10_000,
    features: seq2seq.Features | None = None,
    decoding: seq2seq.Decoding | None = None,
) -> Task:
    """The ChartQA question-answering task over the `chartqa` build in `data_dir`.

    sources: the question sources trained and evaluated (both by default, as pix2struct's
      `chartqa` mixture of its augmented and human tasks; its rates are [unverified]: here each
      question is one example, so the sources mix by their sizes).
    protocol: a key of chartjax.metrics.chartqa.PROTOCOLS, recorded in metrics.json's
      provenance (`libraries.protocol`).
    """
    if protocol not in chartqa_metrics.PROTOCOLS:
        raise ValueError(
            f"chartqa_task.protocol must be one of {sorted(chartqa_metrics.PROTOCOLS)}, "
            f"not {protocol!r}"
        )
    unknown = set(sources) - set(chartqa_metrics.SOURCES)
    if unknown or not sources:
        raise ValueError(
            f"chartqa_task.sources must be a non-empty subset of {chartqa_metrics.SOURCES}, "
            f"not {tuple(sources)!r}"
        )
    kept = tuple(sources)
    return seq2seq.make_task(
        name="chartqa",
        dataset="chartqa",
        data_dir=data_dir,
        train_split=train_split,
        eval_splits=tuple(eval_splits),
        field_keys=FIELD_KEYS,
        expand=lambda ex: question_record(ex, kept),
        score_fn=lambda texts, records, split: score(texts, records, protocol),
        features=features or seq2seq.Features(),
        decoding=decoding or seq2seq.Decoding(),
        shuffle_buffer=shuffle_buffer,
    )
