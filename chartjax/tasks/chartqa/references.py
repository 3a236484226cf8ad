"""`chartjax-score --task chartqa --references tfds:chartqa:<split>`: reference rows from a build.

The chartqa build (tfds_builders/chartqa) stores a chart per record and its questions as a
sequence; the readers expand it into one example per question (chartjax/data/tfds_records.py),
and each becomes `{"id": "<split>/<source>/<index>", "target": <label>, "meta": {"source":
"human" | "augmented"}}` (docs/design.md §8: scorers that need more than the target read `meta`).
"""

from __future__ import annotations

import dataclasses

from chartjax.tasks.core.task import FileScorer


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def reference_row(ex: dict, split: str) -> dict:
    """One question of a chartqa build as a reference row (without its `id`)."""
    return {"target": _text(ex["label"]), "meta": {"source": _text(ex["source"])}}


def with_tfds_references(scorer: FileScorer) -> FileScorer:
    """The chartqa scorer, reading `tfds:chartqa:<split>` references (kept if it has its own)."""
    if scorer.reference_row is not None:
        return scorer
    return dataclasses.replace(scorer, reference_row=reference_row)
