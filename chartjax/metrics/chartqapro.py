"""ChartQAPro (Masry et al. 2025) as lmms-eval scores it (lmms-eval `tasks/chartqapro/`).

Per example (its last answer is the one scored):
  prediction and target: surrounding whitespace, then trailing "." stripped
  a text written like a list, "[a, b]", is split into items, scored item by item in order; an
    item one side lacks scores 0, the example the mean over the longer list
  per item:
    exact match (case-insensitive, stripped) if its Year flag is YES, or the question type is
      Fact Checking or Multi Choice
    else, if both parse as numbers (a "%" stripped, not divided by 100): a zero target needs
      exactly 0, else |p - t| / |t| <= 0.05
    else ANLS of the lowercased texts, threshold 0.5: 1 - d / max(len), 0 when d / max(len) >= 0.5
      (d: Levenshtein distance; two empty texts score 1)
`relaxed_accuracy` is the mean over examples (lmms-eval's `relaxed_overall`), with one entry per
question type beside it, each with a 95 % percentile-bootstrap interval (scores are graded).

Hand-written: no ANLS package is installed, so ANLS is the few lines below over `editdistance`
(a chartjax dependency). Written from a description of lmms-eval
`tasks/chartqapro/utils.py`, not from its source: the order of the strip steps, how a list whose
items are not quoted is split, whether the "%"-stripped or the raw texts enter ANLS, and that
the prediction side is parsed as a list the same way are [unverified].
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

import editdistance
import numpy as np

from chartjax.metrics.chartqa import mean_entry
from chartjax.metrics.classification import group_by
from chartjax.metrics.scores import Scores, as_reference_lists

__all__ = ["EXACT_TYPES", "anls", "answer_score", "chartqapro_scores", "split_list"]

EXACT_TYPES = ("Fact Checking", "Multi Choice")  # question types scored by exact match
_LIST = re.compile(r"^\[(.*)\]$", re.DOTALL)


def anls(target: str, prediction: str, threshold: float = 0.5) -> float:
    """Normalized Levenshtein similarity of two texts as given (callers lowercase): 1 - d / max
    length, 0 when d / max length >= threshold; two empty texts score 1."""
    length = max(len(target), len(prediction))
    if length == 0:
        return 1.0
    distance = editdistance.eval(target, prediction) / length
    return 0.0 if distance >= threshold else 1.0 - distance


def _clean(text: str) -> str:
    return text.strip().rstrip(".").strip()


def split_list(text: str) -> list[str]:
    """The items of a text written like a list (``"['a', 'b']"``, ``"[a, b]"``), else the text
    as one item. A Python literal list is read as one; otherwise the bracketed text is split at
    commas. Items are stripped of spaces and quotes."""
    match = _LIST.match(text.strip())
    if not match:
        return [text]
    try:
        value = ast.literal_eval(text.strip())
    except (SyntaxError, ValueError):
        value = match.group(1).split(",")
    if not isinstance(value, list):
        return [text]
    return [str(item).strip(" '\"") for item in value]


def _bare(text: str) -> str:
    return text.strip().strip("%").strip()


def _number(text: str) -> float | None:
    try:
        return float(_bare(text))
    except ValueError:
        return None


def _item_score(target: str, prediction: str, exact: bool) -> float:
    if exact:
        return float(target.strip().lower() == prediction.strip().lower())
    t, p = _number(target), _number(prediction)
    if t is not None and p is not None:
        if t == 0.0:
            return float(p == 0.0)
        return float(abs(p - t) / abs(t) <= 0.05)  # NaN compares False: "nan" scores 0
    return anls(_bare(target).lower(), _bare(prediction).lower())


def _is_yes(flag) -> bool:
    return flag is True or (isinstance(flag, str) and flag.strip().upper() == "YES")


def answer_score(
    target: str,
    prediction: str,
    *,
    question_type: str | None = None,
    year: Sequence | str | bool | None = None,
) -> float:
    """One example's score in [0, 1]: ``year`` holds the Year flags ("YES"/"NO" or booleans),
    one per answer item (cycled when fewer), or one flag for all."""
    targets, preds = split_list(_clean(target)), split_list(_clean(prediction))
    flags = [year] if year is None or isinstance(year, str | bool) else list(year)
    always_exact = question_type in EXACT_TYPES
    scores = []
    for i in range(max(len(targets), len(preds))):
        if i >= len(targets) or i >= len(preds):
            scores.append(0.0)
            continue
        exact = always_exact or (bool(flags) and _is_yes(flags[i % len(flags)]))
        scores.append(_item_score(targets[i], preds[i], exact))
    return float(np.mean(scores))


def chartqapro_scores(
    predictions: Sequence[str | None],
    references: Sequence[str | Sequence[str]],
    *,
    question_types: Sequence[str | None] | None = None,
    years: Sequence | None = None,
) -> Scores:
    """`relaxed_accuracy` (+ 95 % bootstrap interval) and the breakdown `question_type`.

    A None (missing) prediction scores 0; with several alternative targets the best counts.
    """
    n = len(references)
    if len(predictions) != n:
        raise ValueError(f"{len(predictions)} predictions for {n} references")
    if not predictions:
        raise ValueError("no examples to score")
    for name, values in (("question types", question_types), ("year flags", years)):
        if values is not None and len(values) != n:
            raise ValueError(f"{len(values)} {name} for {n} references")
    refs = as_reference_lists(references)
    types = list(question_types) if question_types is not None else [None] * n
    flags = list(years) if years is not None else [None] * n
    scores = [
        0.0 if p is None else max(answer_score(t, p, question_type=q, year=y) for t in targets)
        for p, targets, q, y in zip(predictions, refs, types, flags)
    ]
    entry = mean_entry(scores)
    breakdowns = {}
    kept = [(q, s) for q, s in zip(types, scores) if q is not None]
    if kept:
        groups = group_by([q for q, _ in kept], [s for _, s in kept])
        breakdowns["question_type"] = {g: mean_entry(v) for g, v in groups.items()}
    return Scores(
        metrics={k: v for k, v in entry.items() if k != "n"},
        breakdowns=breakdowns,
        libraries={
            "relaxed_accuracy": "lmms-eval chartqapro relaxed_overall: per list item exact "
            "(year, Fact Checking, Multi Choice) / 5% relative (exact 0) / ANLS 0.5",
            "protocol": "lmms_eval",
        },
    )
