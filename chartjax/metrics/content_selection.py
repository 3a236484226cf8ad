"""Chart-to-Text content selection (CS) and its record strings (docs/metrics.md §2.2).

Hand-written: no library implements this benchmark-specific metric. The record format follows
the Chart-to-Text preprocessing (``baseline_models/Chart2Text/etc/templatePreprocess.py``), whose
``testData.txt`` lines are what the official CS script (``evaluation_metrics/cs/
ocrdata_auto_eval.py``) reads as "data"; they are written by chartjax/data/table_records.py
(the builders and tasks shape their data with it; this module only scores).
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean

__all__ = ["CS_FILLERS", "content_selection", "content_selection_score", "cs_records"]

# The official script's 23 filler tokens (never records).
CS_FILLERS = frozenset(
    ["in", "the", "and", "or", "an", "as", "can", "be", "a", ":", "-", "to", "but", "is", "of"]
    + ["it", "on", ".", "at", "(", ")", ",", ";"]
)


def cs_records(gold: str, data: str, title: str) -> list[str]:
    """Gold-summary tokens that count as records: lower-cased, non-filler, distinct, in order.

    A token is a record if it is a substring of ``lower(data with "_" -> " " + " " + title)``
    (the official substring test: gold "20" counts when the data holds "2020").
    """
    context = (data.replace("_", " ") + " " + title).lower()
    records: list[str] = []
    for token in gold.split():
        low = token.lower()
        if low not in CS_FILLERS and low not in records and low in context:
            records.append(low)
    return records


def content_selection(prediction: str, gold: str, data: str, title: str) -> float:
    """CS of one example: the fraction of gold records that the prediction mentions.

    Prediction tokens are whitespace-split and lower-cased only (no punctuation splitting, so
    "2020," does not match "2020"); each record can be matched once. 0.0 when the gold summary
    has no records (the ``ocrdata_auto_eval.py`` convention).
    """
    records = cs_records(gold, data, title)
    if not records:
        return 0.0
    remaining = list(records)
    hits = 0
    for token in prediction.split():
        low = token.lower()
        if low in remaining:
            remaining.remove(low)
            hits += 1
    return hits / len(records)


def content_selection_score(
    predictions: Sequence[str],
    golds: Sequence[str],
    datas: Sequence[str],
    titles: Sequence[str],
) -> float:
    """Mean per-example CS as a fraction in [0, 1] (the official script prints it x100)."""
    n = len(predictions)
    if not (len(golds) == len(datas) == len(titles) == n):
        raise ValueError(
            "content_selection_score: predictions, golds, datas and titles differ in length: "
            f"{n}, {len(golds)}, {len(datas)}, {len(titles)}"
        )
    if n == 0:
        raise ValueError("content_selection_score: no examples")
    return fmean(
        content_selection(p, g, d, t) for p, g, d, t in zip(predictions, golds, datas, titles)
    )
