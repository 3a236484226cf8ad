"""DePlot/MatCha table metrics: RMS (precision, recall, F1) and RNSS (docs/metrics.md §5.1-5.2).

Hand-written (no library implements them) from the definitions of DePlot's ``metrics.py``
(``table_datapoints_precision_recall`` and ``table_number_accuracy``), including its quirks:
a free matched "title" datapoint, single-column tables having no datapoints, "5%" parsed as 0.05
in RMS but not in RNSS, and RNSS's inverted zero-target distance. Scores are fractions in [0, 1]
(the official code prints them x100). The linearized-table format itself lives in
``chartjax/data/tables.py``; the metric parser below is DePlot's (lower-cased, no blank-line
skipping), which must not drift with the data format's own parser.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import editdistance
import numpy as np
from scipy import optimize

from chartjax.data.tables import BYTE_NEWLINE, CELL_SEP
from chartjax.metrics.scores import Scores, as_reference_lists

__all__ = [
    "anls",
    "parse_table",
    "rms",
    "rms_example",
    "rnss",
    "rnss_example",
    "table_datapoints",
]

TEXT_THETA = 0.5
NUMBER_THETA = 0.1


def anls(target: str, prediction: str, theta: float = TEXT_THETA) -> float:
    """pix2struct's ``anls_metric``: 1 - normalized edit distance if that is *strictly* < theta.

    Two empty strings (a ZeroDivisionError in the original, never reached by RMS) score 1.
    """
    longest = max(len(target), len(prediction))
    if longest == 0:
        return 1.0
    distance = editdistance.eval(target, prediction) / longest
    return 1.0 - distance if distance < theta else 0.0


def _to_float(text: str) -> float | None:
    try:
        if text.endswith("%"):
            return float(text.rstrip("%")) / 100.0
        return float(text)
    except ValueError:
        return None


def _relative_distance(target: float, prediction: float, theta: float = 1.0) -> float:
    if not target:  # the original's quirk: a zero target is "matched" by any non-zero value
        return float(not prediction)
    distance = min(abs((target - prediction) / target), 1.0)
    return distance if distance < theta else 1.0


def parse_table(text: str, transposed: bool = False) -> tuple[str | None, list[tuple[str, ...]]]:
    """DePlot's ``_parse_table``: (title or None, rows) with rows[0] the header row.

    Lower-cases, splits lines (``<0x0A>`` also separates rows), takes a first line starting with
    "title |" as the title, splits cells on the exact string " | " and strips them; transposing
    swaps rows and columns, padding short rows with "".
    """
    lines = text.replace(BYTE_NEWLINE, "\n").lower().splitlines()
    if not lines:
        return None, []
    title = None
    if lines[0].startswith("title |"):
        title = lines[0][len("title |") :].strip()
        lines = lines[1:]
    rows = [tuple(cell.strip() for cell in line.split(CELL_SEP)) for line in lines]
    if transposed and rows:
        rows = [tuple(col) for col in itertools.zip_longest(*rows, fillvalue="")]
    return title, rows


def table_datapoints(title: str | None, rows: Sequence[tuple[str, ...]]) -> dict[str, str]:
    """``{"title": title}`` plus ``"<row label> <column header>" -> cell`` (later keys win)."""
    points = {} if title is None else {"title": title}
    if len(rows) < 2 or len(rows[0]) <= 1:
        return points
    headers = rows[0]
    for row in rows[1:]:
        for header, cell in zip(headers[1:], row[1:]):
            points[f"{row[0]} {header}"] = cell
    return points


def _datapoint_score(target: tuple[str, str], prediction: tuple[str, str]) -> float:
    key_score = anls(target[0], prediction[0])
    pred_value, target_value = _to_float(prediction[1]), _to_float(target[1])
    if pred_value is not None and target_value:
        return key_score * (1 - _relative_distance(target_value, pred_value, NUMBER_THETA))
    if target[1] == prediction[1]:
        return key_score
    return key_score * anls(target[1], prediction[1])


def _table_prf(target: dict[str, str], prediction: dict[str, str]) -> tuple[float, float, float]:
    targets, preds = list(target.items()), list(prediction.items())
    if not targets and not preds:
        return 1.0, 1.0, 1.0
    if not targets:
        return 0.0, 1.0, 0.0
    if not preds:
        return 1.0, 0.0, 0.0
    cost = np.array([[1.0 - anls(t, p) for p, _ in preds] for t, _ in targets])
    rows, cols = optimize.linear_sum_assignment(cost)
    score = sum(_datapoint_score(targets[r], preds[c]) for r, c in zip(rows, cols))
    if score == 0:
        return 0.0, 0.0, 0.0
    precision, recall = score / len(preds), score / len(targets)
    return precision, recall, 2 * precision * recall / (precision + recall)


def rms_example(targets: Sequence[str], prediction: str) -> tuple[float, float, float]:
    """(precision, recall, F1) of one prediction: the best F1 over {prediction transposed, as
    is} x targets (targets are never transposed); ties keep the first, transposed first."""
    best = None
    for transposed in (True, False):
        pred_points = table_datapoints(*parse_table(prediction, transposed=transposed))
        for target in targets:
            prf = _table_prf(table_datapoints(*parse_table(target)), pred_points)
            if best is None or prf[2] > best[2]:
                best = prf
    assert best is not None
    return best


def rms(predictions: Sequence[str | None], references: Sequence[str | Sequence[str]]) -> Scores:
    """Mean per-example RMS precision, recall and F1 (F1 is the mean of per-example F1).

    A None prediction is a missing one and scores 0 in all three. (An empty table is a
    prediction: DePlot's definition gives it precision 1, having no wrong datapoint, and
    recall 0.)"""
    refs = _check(predictions, references)
    per = [(0.0, 0.0, 0.0) if p is None else rms_example(t, p) for p, t in zip(predictions, refs)]
    n = len(per)
    return Scores(
        metrics={
            "rms_precision": sum(x[0] for x in per) / n,
            "rms_recall": sum(x[1] for x in per) / n,
            "rms_f1": sum(x[2] for x in per) / n,
        },
        libraries={"rms": f"deplot definition text_theta={TEXT_THETA} number_theta={NUMBER_THETA}"},
    )


def _numbers(text: str) -> list[float]:
    out = []
    for line in text.replace(BYTE_NEWLINE, "\n").splitlines():
        for part in line.split(CELL_SEP):
            if part.strip():
                try:
                    value = float(part)
                except ValueError:
                    continue
                # "nan"/"inf" parse as floats but crash the original's assignment: skipped.
                if math.isfinite(value):
                    out.append(value)
    return out


def rnss_example(targets: Sequence[str], prediction: str) -> float:
    """Relative number set similarity of one prediction (best over targets)."""
    pred_numbers = _numbers(prediction)
    best = 0.0
    for target in targets:
        target_numbers = _numbers(target)
        if not target_numbers and not pred_numbers:
            score = 1.0
        elif not target_numbers or not pred_numbers:
            score = 0.0
        else:
            cost = np.array(
                [[_relative_distance(t, p) for p in pred_numbers] for t in target_numbers]
            )
            rows, cols = optimize.linear_sum_assignment(cost)
            score = 1.0 - cost[rows, cols].sum() / max(len(target_numbers), len(pred_numbers))
        best = max(best, float(score))
    return best


def rnss(predictions: Sequence[str | None], references: Sequence[str | Sequence[str]]) -> Scores:
    """Mean RNSS over examples; a None (missing) prediction scores 0 (the empty prediction
    scores 1 against a target without numbers)."""
    refs = _check(predictions, references)
    per = [0.0 if p is None else rnss_example(t, p) for p, t in zip(predictions, refs)]
    return Scores(
        metrics={"rnss": sum(per) / len(refs)},
        libraries={"rnss": "deplot table_number_accuracy definition"},
    )


def _check(predictions: Sequence[str], references: Sequence) -> list[list[str]]:
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    if not predictions:
        raise ValueError("no examples to score")
    return as_reference_lists(references)
