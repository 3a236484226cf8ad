"""ChartQA (Masry et al. 2022) as MatCha / Pix2Struct answer it: the question rendered above the
chart, the answer as text; scored by relaxed accuracy (chartjax.metrics.chartqa).

ChartQA is not one of chartjax's four corpora (no builder): this module serves
`chartjax-infer --task chartqa` (rows `{"id", "image", "question" | "query"}`) and
`chartjax-score --task chartqa`, for the MatCha-ChartQA rows of ChartCheck.
"""

from __future__ import annotations

from chartjax.metrics import chartqa as chartqa_metrics
from chartjax.metrics.prediction_files import TEXTS, check_fields
from chartjax.metrics.scores import Scores
from chartjax.tasks.task import FileScorer, InferenceSpec, ScoreInputs, answer_prediction

INFERENCE = InferenceSpec(
    name="chartqa",
    modality="image",
    default_template="chartqa",
    templates={"chartqa": "{question}"},
    target_field="answer",
    field_aliases={"question": ("query",)},  # ChartQA's own files call the question `query`
)


def _score_files(inputs: ScoreInputs) -> Scores:
    check_fields(inputs.references, {"target": TEXTS})
    ids = list(inputs.references)
    # A missing prediction (None) is wrong, even against an empty target.
    outputs = [
        None if i in inputs.missing else str(inputs.predictions[i]["prediction"]) for i in ids
    ]
    return chartqa_metrics.relaxed_accuracy(outputs, [inputs.references[i]["target"] for i in ids])


SCORER = FileScorer("chartqa", "jsonl", _score_files, check_prediction=answer_prediction)
