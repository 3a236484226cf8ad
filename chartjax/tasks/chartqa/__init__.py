"""ChartQA (Masry et al. 2022) as MatCha / Pix2Struct answer it: the question rendered above the
chart, the answer as text; scored by relaxed accuracy (chartjax.metrics.chartqa).

This module serves `chartjax-infer --task chartqa` (rows `{"id", "image", "question" |
"query"}`) and `chartjax-score --task chartqa`, for ChartQA itself and the MatCha-ChartQA rows of
ChartCheck. Scoring reads each reference row's optional `meta.source` (`human` / `augmented`,
docs/design.md §8) for the per-source accuracies and their mean; `--compat` picks the protocol
(`PROTOCOLS`; `spec` is pix2struct's), recorded in metrics.json's provenance.

The ChartQA room (tasks/chartqa/): prompts and scorer here; task.py (fine-tuning and
evaluation); references.py (reference rows from a build, for chartjax-score).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chartjax.metrics import chartqa as chartqa_metrics
from chartjax.metrics.prediction_files import TEXTS, PredictionFileError, check_fields, located
from chartjax.metrics.scores import Scores
from chartjax.tasks.core.task import FileScorer, InferenceSpec, ScoreInputs, answer_prediction

INFERENCE = InferenceSpec(
    name="chartqa",
    modality="image",
    default_template="chartqa",
    templates={"chartqa": "{question}"},
    target_field="answer",
    # ChartQA's own files call the question `query`, PlotQA's (and its TFDS records)
    # `question_string`: matcha-plotqa checkpoints answer through this task too
    field_aliases={"question": ("query", "question_string")},
)

# The evaluation protocols ChartQA numbers come from, by the name `--compat` takes. `scoring`
# names chartjax.metrics.chartqa.PROTOCOLS; `prompt_suffix` is appended to the question (None:
# the protocol renders no text prompt of its own or it is unknown) and `max_new_tokens` caps
# the answer (None: the protocol sets no cap of its own). Data for inference to read; nothing
# here runs a model. Sources: the suites' files named beside each.
PROTOCOLS: dict[str, dict[str, Any]] = {
    # Pix2Struct / MatCha / DePlot: the question alone, rendered as a header above the chart.
    "pix2struct": {"scoring": "pix2struct", "prompt_suffix": "", "max_new_tokens": None},
    # lmms-eval tasks/chartqa: post_prompt and generation_kwargs.max_new_tokens, greedy.
    "lmms_eval": {
        "scoring": "lmms_eval",
        "prompt_suffix": "\nAnswer the question with a single word.",
        "max_new_tokens": 16,
    },
    # VLMEvalKit ChartQA_TEST: the newline before the instruction is [unverified].
    "vlmevalkit": {
        "scoring": "vlmevalkit",
        "prompt_suffix": "\nAnswer the question using a single word or phrase.",
        "max_new_tokens": None,
    },
    # big_vision PaliGemma transfer: its prompt and decode length are [unverified] (not here).
    "big_vision": {"scoring": "big_vision", "prompt_suffix": None, "max_new_tokens": None},
}
COMPAT = ("spec", *PROTOCOLS)  # spec: pix2struct's relaxed_correctness


def protocol_of(compat: str | None) -> str:
    """The protocol name a `--compat` value selects (`spec`, or none, is pix2struct)."""
    return "pix2struct" if compat in (None, "spec") else compat


def meta_values(references: Mapping[str, Any], ids, key: str) -> list | None:
    """Each row's `meta[key]` (None where a row has no such entry), or None when no row has one.
    A `meta` that is not an object is refused, naming the file, line and id."""
    out = []
    for i in ids:
        meta = references[i].get("meta")
        if meta is not None and not isinstance(meta, Mapping):
            raise PredictionFileError(
                f"{located(references, i)}: field 'meta' is not an object (docs/design.md §8)"
            )
        out.append((meta or {}).get(key))
    return out if any(v is not None for v in out) else None


def check_meta_text(references: Mapping[str, Any], ids, key: str, values: list | None) -> None:
    """Refuses a `meta[key]` that is present but not a string, naming the file, line and id."""
    for i, value in zip(ids, values or []):
        if value is not None and not isinstance(value, str):
            raise PredictionFileError(
                f"{located(references, i)}: field 'meta.{key}' is {value!r}; expected a string"
            )


def _score_files(inputs: ScoreInputs) -> Scores:
    check_fields(inputs.references, {"target": TEXTS})
    ids = list(inputs.references)
    sources = meta_values(inputs.references, ids, "source")
    check_meta_text(inputs.references, ids, "source", sources)
    # A missing prediction (None) is wrong, even against an empty target.
    outputs = [
        None if i in inputs.missing else str(inputs.predictions[i]["prediction"]) for i in ids
    ]
    return chartqa_metrics.chartqa_scores(
        outputs,
        [inputs.references[i]["target"] for i in ids],
        sources,
        protocol=protocol_of(inputs.options.get("compat")),
    )


SCORER = FileScorer(
    "chartqa", "jsonl", _score_files, compat=COMPAT, check_prediction=answer_prediction
)
