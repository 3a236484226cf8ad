"""FigureQA: binary accuracy with breakdowns by figure type and question template
(docs/metrics.md §4)."""

from __future__ import annotations

from collections.abc import Sequence

from chartjax.metrics import classification as C
from chartjax.metrics.scores import Scores

__all__ = ["figureqa_scores", "parse_answer"]

_ANSWERS = {"1": 1, "yes": 1, "true": 1, "0": 0, "no": 0, "false": 0}


def parse_answer(value) -> int | None:
    """0/1 from an int, bool or text ("yes"/"no", "1"/"0", "true"/"false"); None otherwise."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if value in (0, 1) else None
    return _ANSWERS.get(str(value).strip().lower().rstrip("."))


def figureqa_scores(
    predictions: Sequence,
    answers: Sequence,
    *,
    figure_types: Sequence[str] | None = None,
    question_ids: Sequence[int] | None = None,
) -> Scores:
    """Micro accuracy (+ macro-F1, Wilson CI); unparseable predictions count as wrong.

    Answers of -1/None (test splits without released answers) make the metrics unavailable.
    """
    if len(predictions) != len(answers):
        raise ValueError(f"{len(predictions)} predictions for {len(answers)} references")
    golds = [parse_answer(a) for a in answers]
    if any(g is None for g in golds):
        names = ["accuracy", "macro_f1", "accuracy_ci95_low", "accuracy_ci95_high"]
        return Scores.missing(names, "the split has no released answers (answer -1)")
    preds = [parse_answer(p) for p in predictions]
    out = Scores(metrics=C.classification_metrics(preds, golds, labels=[0, 1]))
    out.metrics["num_unparseable"] = sum(p is None for p in preds)
    if figure_types is not None:
        out.breakdowns["figure_type"] = C.breakdown(preds, golds, list(figure_types))
    if question_ids is not None:
        out.breakdowns["question_template"] = C.breakdown(preds, golds, list(question_ids))
    return out
