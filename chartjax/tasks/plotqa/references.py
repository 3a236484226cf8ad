"""`chartjax-score --task plotqa --references tfds:plotqa/<config>:<split>`: reference rows from a
build.

The plotqa build (tfds_builders/plotqa) stores a plot per record and its questions as a
sequence; the readers expand it into one example per question (chartjax/data/tfds_records.py),
and each becomes `{"id": "<config>/<split>/<question_id>", "target": <answer>, "meta":
{"template": ..., "question_type": ...}}` (docs/design.md §8). The target is the release's
answer as it was written, a number or a string (the build keeps it as JSON text); `meta` holds
the pair's `template` and its `type` as `question_type`, each left out where the pair had none.
"""

from __future__ import annotations

import dataclasses
import json
import math

from chartjax.tasks.core.task import FileScorer


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _target(answer_json: str):
    try:
        value = json.loads(answer_json)
    except json.JSONDecodeError:
        return answer_json
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return value
    return answer_json


def reference_row(ex: dict, split: str) -> dict:
    """One question of a plotqa build as a reference row (without its `id`)."""
    meta = {}
    for key, field in (("template", "template"), ("question_type", "type")):
        value = _text(ex[field]) if field in ex else ""
        if value:
            meta[key] = value
    return {"target": _target(_text(ex["answer"])), "meta": meta}


def with_tfds_references(scorer: FileScorer) -> FileScorer:
    """The plotqa scorer, reading `tfds:plotqa/<config>:<split>` references (kept if it has its
    own)."""
    if scorer.reference_row is not None:
        return scorer
    return dataclasses.replace(scorer, reference_row=reference_row)
