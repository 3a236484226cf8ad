"""PlotQA (Methani et al., WACV 2020) as MatCha / DePlot report it: relaxed accuracy.

The metric is ChartQA's (chartjax.metrics.chartqa): pix2struct's ``relaxed_correctness``, a
number within 5 % of a non-zero numeric target, else a case-insensitive exact match (the
ChartQA paper's §5.1 cites PlotQA for it; that MatCha scored PlotQA with exactly this
function, its year quirk included, is [unverified]). Reported overall and per question template
(and per question type where the references give one), each with a 95 % Wilson interval.
"""

from __future__ import annotations

from collections.abc import Sequence

from chartjax.metrics.chartqa import binary_entry, relaxed_correctness
from chartjax.metrics.classification import group_by
from chartjax.metrics.scores import Scores, as_reference_lists

__all__ = ["plotqa_scores"]


def plotqa_scores(
    predictions: Sequence[str | None],
    references: Sequence[str | Sequence[str]],
    *,
    templates: Sequence[str | None] | None = None,
    question_types: Sequence[str | None] | None = None,
) -> Scores:
    """`relaxed_accuracy` (+ 95 % Wilson interval) overall, and breakdowns `template` and
    `question_type` over the examples that have one (None: left out of that breakdown)."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    if not predictions:
        raise ValueError("no examples to score")
    refs = as_reference_lists(references)
    correct = [
        p is not None and any(relaxed_correctness(t, p) for t in targets)
        for p, targets in zip(predictions, refs)
    ]
    entry = binary_entry(correct)
    metrics = {k: v for k, v in entry.items() if k != "n"}
    breakdowns = {}
    for name, keys in (("template", templates), ("question_type", question_types)):
        if keys is None:
            continue
        if len(keys) != len(correct):
            raise ValueError(f"{len(keys)} {name}s for {len(correct)} references")
        kept = [(k, c) for k, c in zip(keys, correct) if k is not None]
        if kept:
            groups = group_by([k for k, _ in kept], [c for _, c in kept])
            breakdowns[name] = {g: binary_entry(v) for g, v in groups.items()}
    return Scores(
        metrics=metrics,
        breakdowns=breakdowns,
        libraries={
            "relaxed_accuracy": "pix2struct relaxed_correctness 5% (as MatCha/DePlot on PlotQA)",
            "protocol": "pix2struct",
        },
    )
