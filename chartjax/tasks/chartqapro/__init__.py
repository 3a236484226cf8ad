"""ChartQAPro (Masry et al. 2025) as lmms-eval runs it: its prompt, as data, and its scorer
(chartjax.metrics.chartqapro) behind `chartjax-score --task chartqapro`, and the inference spec
behind `chartjax-infer --task chartqapro` (the prompt written from a row of the build,
tfds_builders/chartqapro, or of a JSONL file).

Reference rows (docs/design.md §8): `target` is the scored answer (the last of the dataset's
`Answer` list; a list here means alternatives, the best counts), with an optional `meta` object
holding `question_type` (Factoid, Conversational, Hypothetical, Fact Checking, Multi Choice) and
`year` (the dataset's `Year` flags, "YES"/"NO" per answer item, or booleans). Source: lmms-eval
`tasks/chartqapro/chartqapro.yaml` and `utils.py`.

The ChartQAPro room (tasks/chartqapro/): prompt and scorer here; references.py (reference
rows from a build, for chartjax-score).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chartjax.metrics import chartqapro as chartqapro_metrics
from chartjax.metrics.prediction_files import TEXTS, PredictionFileError, check_fields, located
from chartjax.metrics.scores import Scores
from chartjax.tasks.chartqa import check_meta_text, meta_values
from chartjax.tasks.core.task import (
    DerivedFields,
    FileScorer,
    InferenceSpec,
    ScoreInputs,
    answer_prediction,
)

PROMPT_SUFFIX = "\nAnswer the question with a single word."
# lmms-eval's default: the prompt `prompt()` writes, greedy decoding, at most 16 new tokens.
# Data for inference to read (the same keys as chartjax.tasks.chartqa.PROTOCOLS).
PROTOCOLS: dict[str, dict[str, Any]] = {
    "lmms_eval": {"scoring": "lmms_eval", "prompt_suffix": PROMPT_SUFFIX, "max_new_tokens": 16}
}
# How one earlier turn of a conversation is written; the separators (a space inside a turn and
# between turns) are [unverified]: the description followed writes them "Q1: ... A1: ... Qn: ...".
TURN = "Q{k}: {question} A{k}: {answer}"
TURN_SEPARATOR = " "


def prompt(
    question: str | Sequence[str],
    question_type: str | None = None,
    paragraph: str | None = None,
    answers: Sequence[str] = (),
) -> str:
    """The text lmms-eval gives the model for one ChartQAPro item.

    Args:
      question: the dataset's `Question`: a string, or the list of a conversation's questions.
      question_type: the dataset's `Question Type`; "Conversational" writes the earlier turns.
      paragraph: the dataset's `Paragraph` (context), if any.
      answers: the dataset's `Answer` list; a conversation's earlier answers come from it.

    Returns:
      `Context: <paragraph>\\n\\n` (when there is one), the question (a conversation as
      `Q1: q1 A1: a1 ... Qn: qn`), then `\\nAnswer the question with a single word.`
    """
    questions = [question] if isinstance(question, str) else list(question)
    if not questions:
        raise ValueError("prompt: no question")
    if question_type == "Conversational" and len(questions) > 1:
        if len(answers) < len(questions) - 1:
            raise ValueError(
                f"prompt: a conversation of {len(questions)} questions needs at least "
                f"{len(questions) - 1} earlier answers, got {len(answers)}"
            )
        turns = [
            TURN.format(k=k, question=q, answer=a)
            for k, (q, a) in enumerate(zip(questions[:-1], answers), start=1)
        ]
        text = TURN_SEPARATOR.join([*turns, f"Q{len(questions)}: {questions[-1]}"])
    else:
        text = questions[-1]
    context = f"Context: {paragraph}\n\n" if paragraph and paragraph.strip() else ""
    return context + text + PROMPT_SUFFIX


def _prompt_fields(fields: dict) -> dict[str, str]:
    """`prompt` (lmms-eval's text) and `query` (the same without its answer instruction: the
    header a Pix2Struct-style model reads) from a row's `question`, `answer`, `question_type`
    and `paragraph` (the build's features, or the dataset's column names in a JSONL row)."""
    if "question" not in fields:
        raise ValueError("no field 'question' (or 'Question') for the ChartQAPro prompt")
    answers = fields.get("answer") or []
    text = prompt(
        fields["question"],
        fields.get("question_type"),
        fields.get("paragraph"),
        [answers] if isinstance(answers, str) else list(answers),
    )
    return {"prompt": text, "query": text[: -len(PROMPT_SUFFIX)]}


def _last_answer(value, label_names=None) -> str:
    """The scored answer: the last of the `answer` list."""
    if isinstance(value, str):
        return value
    items = list(value)
    return str(items[-1]) if items else ""


# `chartjax-infer --task chartqapro --tfds chartqapro:test` (or --inputs rows holding the
# dataset's fields): lmms-eval's prompt by default, `--template chartqapro_query` without its
# answer instruction.
INFERENCE = InferenceSpec(
    name="chartqapro",
    modality="image",
    default_template="chartqapro",
    templates={"chartqapro": "{prompt}", "chartqapro_query": "{query}"},
    target_field="answer",
    target_text=_last_answer,
    field_aliases={
        "question": ("Question",),
        "answer": ("Answer",),
        "question_type": ("Question Type",),
        "paragraph": ("Paragraph",),
    },
    derived=DerivedFields(
        names=("prompt", "query"),
        inputs=("question", "answer", "question_type", "paragraph"),
        make=_prompt_fields,
    ),
)


def _is_flags(value) -> bool:
    if isinstance(value, str | bool):
        return True
    return isinstance(value, list) and all(isinstance(v, str | bool) for v in value)


def _score_files(inputs: ScoreInputs) -> Scores:
    check_fields(inputs.references, {"target": TEXTS})
    ids = list(inputs.references)
    types = meta_values(inputs.references, ids, "question_type")
    check_meta_text(inputs.references, ids, "question_type", types)
    years = meta_values(inputs.references, ids, "year")
    for i, flags in zip(ids, years or []):
        if flags is not None and not _is_flags(flags):
            raise PredictionFileError(
                f"{located(inputs.references, i)}: field 'meta.year' is {flags!r}; expected "
                '"YES"/"NO", a boolean or a list of them'
            )
    outputs = [
        None if i in inputs.missing else str(inputs.predictions[i]["prediction"]) for i in ids
    ]
    return chartqapro_metrics.chartqapro_scores(
        outputs,
        [inputs.references[i]["target"] for i in ids],
        question_types=types,
        years=years,
    )


SCORER = FileScorer("chartqapro", "jsonl", _score_files, check_prediction=answer_prediction)
