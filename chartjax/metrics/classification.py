"""Classification metrics: accuracy, macro-F1, confusion matrices, Wilson intervals, breakdowns.

Plain Python (no numpy needed). Labels may be any hashable values (strings, ints, bools);
a prediction that is not a known label (e.g. an unparseable generation stored as None) simply
counts as wrong. Group names in breakdowns are always strings (JSON keys).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

__all__ = [
    "accuracy",
    "breakdown",
    "classification_metrics",
    "confusion_breakdown",
    "confusion_matrix",
    "group_by",
    "macro_f1",
    "wilson_interval",
]


def _check_pair(predictions: Sequence, targets: Sequence) -> None:
    if len(predictions) != len(targets):
        raise ValueError(
            f"predictions and targets differ in length: {len(predictions)} != {len(targets)}"
        )
    if not targets:
        raise ValueError("no examples: predictions and targets are empty")


def _sorted_labels(labels: Iterable[Hashable]) -> list:
    """Sorted labels; mixed types (e.g. None among strings) fall back to sorting by repr."""
    unique = set(labels)
    try:
        return sorted(unique)
    except TypeError:
        return sorted(unique, key=repr)


def accuracy(predictions: Sequence, targets: Sequence) -> float:
    """Fraction of examples whose prediction equals the target (micro average)."""
    _check_pair(predictions, targets)
    return sum(p == t for p, t in zip(predictions, targets)) / len(targets)


def _per_label_f1(predictions: Sequence, targets: Sequence, labels: Sequence) -> dict:
    """label -> (f1, support, num_predicted)."""
    out = {}
    for label in labels:
        tp = sum(p == label and t == label for p, t in zip(predictions, targets))
        support = sum(t == label for t in targets)
        predicted = sum(p == label for p in predictions)
        # F1 = 2TP / (2TP + FP + FN) = 2TP / (support + predicted); 0 when both are 0 (sklearn's
        # zero_division=0 value).
        denom = support + predicted
        out[label] = (2 * tp / denom if denom else 0.0, support, predicted)
    return out


def macro_f1(predictions: Sequence, targets: Sequence, labels: Sequence | None = None) -> float:
    """Unweighted mean of per-label F1.

    Args:
      predictions: predicted labels (values outside ``labels`` count as wrong).
      targets: gold labels.
      labels: the labels to average over. Default: the sorted union of the labels seen in
        targets and predictions. A label with no support and no predictions scores F1 = 0 when
        ``labels`` is given (sklearn's ``zero_division=0``); it would be excluded from the mean
        only when ``labels`` was not given (every label of the default union has support or
        predictions, so in practice nothing is excluded).

    With the default label set, None (an unparseable prediction) is not treated as a label; it
    still counts as a false negative of its target's label.
    """
    _check_pair(predictions, targets)
    given = labels is not None
    if labels is None:
        labels = _sorted_labels(x for x in (*targets, *predictions) if x is not None)
    if not labels:
        raise ValueError("macro_f1: no labels to average over")
    per_label = _per_label_f1(predictions, targets, labels)
    scores = [f1 for f1, support, predicted in per_label.values() if given or support or predicted]
    return sum(scores) / len(scores)


def confusion_matrix(predictions: Sequence, targets: Sequence, labels: Sequence) -> list[list[int]]:
    """Counts with rows = target label, columns = predicted label, both in ``labels`` order.

    Raises ValueError if a target or prediction is not in ``labels`` (so no example is silently
    lost); use ``confusion_breakdown`` to count predictions outside the label set.
    """
    _check_pair(predictions, targets)
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for i, (p, t) in enumerate(zip(predictions, targets)):
        if t not in index:
            raise ValueError(f"confusion_matrix: target {t!r} (example {i}) not in labels {labels}")
        if p not in index:
            raise ValueError(
                f"confusion_matrix: prediction {p!r} (example {i}) not in labels {labels}"
            )
        matrix[index[t]][index[p]] += 1
    return matrix


def confusion_breakdown(
    predictions: Sequence, targets: Sequence, labels: Sequence
) -> dict[str, dict[str, int]]:
    """The confusion matrix in metrics.json's breakdown shape.

    Returns ``{"<true label>": {"pred_<label>": count}}`` with a row per label and a column per
    label; a prediction outside ``labels`` (e.g. None for an unparseable output) gets its own
    column ``pred_<str(value)>`` so that every row sums to that label's support.
    Raises ValueError if a target is not in ``labels``.
    """
    _check_pair(predictions, targets)
    label_set = set(labels)
    extra = _sorted_labels(p for p in predictions if p not in label_set)
    columns = [*labels, *extra]
    out = {str(t): {f"pred_{p}": 0 for p in columns} for t in labels}
    for i, (p, t) in enumerate(zip(predictions, targets)):
        if t not in label_set:
            raise ValueError(
                f"confusion_breakdown: target {t!r} (example {i}) not in labels {labels}"
            )
        out[str(t)][f"pred_{p}"] += 1
    return out


def wilson_interval(num_correct: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (default z: 95 %).

    Returns (0.0, 1.0) for n == 0 (no information).
    """
    if n < 0 or num_correct < 0 or num_correct > n:
        raise ValueError(f"wilson_interval: need 0 <= num_correct <= n, got {num_correct}, {n}")
    if n == 0:
        return 0.0, 1.0
    p = num_correct / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


def _natural_key(name: str) -> tuple:
    # Integer-like group names ("2", "10") sort numerically, the rest alphabetically after them.
    stripped = name[1:] if name.startswith("-") else name
    return (0, int(name), "") if stripped.isdigit() else (1, 0, name)


def group_by(keys: Sequence[Any], values: Sequence[Any]) -> dict[str, list]:
    """Groups ``values`` by ``keys`` (one key per value).

    A key that is a list, tuple or set is multi-label (e.g. ChartCheck reasoning types): the
    value goes to every distinct group in it (an empty list puts it in no group). Group names
    are ``str(key)``; groups are returned sorted (integer-like names numerically).
    """
    if len(keys) != len(values):
        raise ValueError(f"group_by: {len(keys)} keys for {len(values)} values")
    groups: dict[str, list] = {}
    for key, value in zip(keys, values):
        names = key if isinstance(key, list | tuple | set | frozenset) else [key]
        for name in dict.fromkeys(str(k) for k in names):  # distinct, in order
            groups.setdefault(name, []).append(value)
    return {name: groups[name] for name in sorted(groups, key=_natural_key)}


def _accuracy_entry(pairs: list[tuple[Any, Any]]) -> dict[str, float | int]:
    n = len(pairs)
    correct = sum(p == t for p, t in pairs)
    low, high = wilson_interval(correct, n)
    return {"accuracy": correct / n, "n": n, "accuracy_ci95_low": low, "accuracy_ci95_high": high}


def breakdown(
    predictions: Sequence,
    targets: Sequence,
    keys: Sequence,
    *,
    with_macro_f1: bool = False,
    labels: Sequence | None = None,
) -> dict[str, dict]:
    """Per-group accuracy with a 95 % Wilson interval.

    Args:
      predictions, targets: as for ``accuracy``.
      keys: one group key per example (a list key is multi-label, see ``group_by``).
      with_macro_f1: also report ``macro_f1`` per group (over ``labels`` if given).
      labels: label set for the per-group macro-F1.

    Returns:
      ``{group: {"accuracy", "n", "accuracy_ci95_low", "accuracy_ci95_high"[, "macro_f1"]}}``.
    """
    _check_pair(predictions, targets)
    groups = group_by(keys, list(zip(predictions, targets)))
    out = {}
    for name, pairs in groups.items():
        entry = _accuracy_entry(pairs)
        if with_macro_f1:
            preds, golds = zip(*pairs)
            entry["macro_f1"] = macro_f1(list(preds), list(golds), labels)
        out[name] = entry
    return out


def classification_metrics(
    predictions: Sequence, targets: Sequence, labels: Sequence | None = None
) -> dict[str, float]:
    """``accuracy``, ``macro_f1`` and the 95 % Wilson interval of the accuracy."""
    _check_pair(predictions, targets)
    entry = _accuracy_entry(list(zip(predictions, targets)))
    return {
        "accuracy": entry["accuracy"],
        "macro_f1": macro_f1(predictions, targets, labels),
        "accuracy_ci95_low": entry["accuracy_ci95_low"],
        "accuracy_ci95_high": entry["accuracy_ci95_high"],
    }
