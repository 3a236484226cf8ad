"""ChartQA relaxed accuracy (docs/metrics.md §5.3): pix2struct's ``relaxed_correctness``.

Hand-written (a few lines; the pix2struct package is not a dependency). Default semantics are
the original's exactly: a prediction that parses as a number is correct within 5 % of a non-zero
numeric target (so the year 2008 "matches" 2010); anything else needs a case-insensitive exact
string match without stripping. Two clearly named chartjax variants are opt-in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from chartjax.metrics.scores import Scores, as_reference_lists

__all__ = ["relaxed_accuracy", "relaxed_correctness"]

_YEAR = re.compile(r"^\s*\d{4}\s*$")


def _to_float(text: str) -> float | None:
    try:
        if text.endswith("%"):
            return float(text.rstrip("%")) / 100.0
        return float(text)
    except ValueError:
        return None


def relaxed_correctness(
    target: str,
    prediction: str,
    max_relative_change: float = 0.05,
    *,
    strip: bool = False,
    year_exact: bool = False,
) -> bool:
    """Whether ``prediction`` is relaxed-correct for ``target`` (argument order as pix2struct).

    Args:
      strip: (chartjax variant) strip whitespace before comparing strings.
      year_exact: (chartjax variant) a four-digit integer target must be matched exactly
        (fixes google-research/pix2struct#35, where 2008 counts as 2010).
    """
    if strip:
        target, prediction = target.strip(), prediction.strip()
    if year_exact and _YEAR.match(target):
        return _to_float(prediction) == _to_float(target)
    prediction_float, target_float = _to_float(prediction), _to_float(target)
    if prediction_float is not None and target_float:
        # NaN targets are truthy and compare False: "nan" vs "nan" is wrong, as in the original.
        return abs(prediction_float - target_float) / abs(target_float) <= max_relative_change
    return prediction.lower() == target.lower()


def relaxed_accuracy(
    predictions: Sequence[str | None],
    references: Sequence[str | Sequence[str]],
    *,
    strip: bool = False,
    year_exact: bool = False,
) -> Scores:
    """Mean over examples of the best relaxed correctness over each example's targets; a None
    (missing) prediction is wrong."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    if not predictions:
        raise ValueError("no examples to score")
    refs = as_reference_lists(references)
    correct = sum(
        p is not None
        and any(relaxed_correctness(t, p, strip=strip, year_exact=year_exact) for t in targets)
        for p, targets in zip(predictions, refs)
    )
    variant = f"strip={strip} year_exact={year_exact}"
    return Scores(
        metrics={"relaxed_accuracy": correct / len(refs)},
        libraries={"relaxed_accuracy": f"pix2struct relaxed_correctness 5% {variant}"},
    )
