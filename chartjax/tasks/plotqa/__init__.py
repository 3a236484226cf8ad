"""PlotQA (Methani et al., WACV 2020) as MatCha / DePlot report it: relaxed accuracy overall and
per question template (chartjax.metrics.plotqa).

This module serves `chartjax-score --task plotqa`. Reference rows (docs/design.md §8) carry the
answer as `target` (a string, a list of alternatives, or, as the release writes answers, a
number) and an optional `meta` object with `template` (data_retrieval, min_max, ...) and
`question_type`, each a breakdown of the metrics.json.

The PlotQA room (tasks/plotqa/): the scorer here; references.py (reference rows from a
build, for chartjax-score).
"""

from __future__ import annotations

import math

from chartjax.metrics import plotqa as plotqa_metrics
from chartjax.metrics.prediction_files import check_fields
from chartjax.metrics.scores import Scores
from chartjax.tasks.chartqa import check_meta_text, meta_values
from chartjax.tasks.core.task import FileScorer, ScoreInputs, answer_prediction


def _is_answer(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return math.isfinite(value)
    if isinstance(value, str):
        return True
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


ANSWER_FIELD = ("a string, a number or a non-empty list of strings", _is_answer)


def _target_text(value) -> str | list[str]:
    if isinstance(value, int | float):  # the release's numeric answers: 2010, 12.5
        return repr(value)
    return value


def _score_files(inputs: ScoreInputs) -> Scores:
    check_fields(inputs.references, {"target": ANSWER_FIELD})
    ids = list(inputs.references)
    keys = {}
    for key in ("template", "question_type"):
        keys[key] = meta_values(inputs.references, ids, key)
        check_meta_text(inputs.references, ids, key, keys[key])
    outputs = [
        None if i in inputs.missing else str(inputs.predictions[i]["prediction"]) for i in ids
    ]
    return plotqa_metrics.plotqa_scores(
        outputs,
        [_target_text(inputs.references[i]["target"]) for i in ids],
        templates=keys["template"],
        question_types=keys["question_type"],
    )


SCORER = FileScorer("plotqa", "jsonl", _score_files, check_prediction=answer_prediction)
