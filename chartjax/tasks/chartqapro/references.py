"""`chartjax-score --task chartqapro --references tfds:chartqapro:test`: reference rows from a build.

The chartqapro build (tfds_builders/chartqapro) stores one record per row of the release; each
becomes `{"id": "test/<row index>", "target": <the last Answer>, "meta": {"question_type": ...,
"year": [<the row's Year flags>]}}` (docs/design.md §8; lmms-eval scores the last answer, with
the Year flags of its items). A row without flags has no `year` in its meta.
"""

from __future__ import annotations

import dataclasses

from chartjax.tasks.core.task import FileScorer


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def reference_row(ex: dict, split: str) -> dict:
    """One record of a chartqapro build as a reference row (without its `id`)."""
    answers = [_text(a) for a in ex["answer"]]
    if not answers:
        raise ValueError(f"{_text(ex['id'])}: no answer to score")
    meta = {"question_type": _text(ex["question_type"])}
    flags = [_text(f) for f in ex["year"]]
    if flags:
        meta["year"] = flags
    return {"target": answers[-1], "meta": meta}


def with_tfds_references(scorer: FileScorer) -> FileScorer:
    """The chartqapro scorer, reading `tfds:chartqapro:test` references (kept if it has its own)."""
    if scorer.reference_row is not None:
        return scorer
    return dataclasses.replace(scorer, reference_row=reference_row)
