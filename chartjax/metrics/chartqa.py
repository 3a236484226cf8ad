"""ChartQA relaxed accuracy (docs/metrics.md §5.3): pix2struct's ``relaxed_correctness``, the
protocols of the evaluation suites that report it, and the per-source scores of a test set.

Hand-written (a few lines; the pix2struct package is not a dependency). Default semantics are
the original's exactly: a prediction that parses as a number is correct within 5 % of a non-zero
numeric target (so the year 2008 "matches" 2010); anything else needs a case-insensitive exact
string match without stripping. Two clearly named chartjax variants are opt-in (`strip`,
`year_exact`), and `PROTOCOLS` names how other suites score the same answers.

Scores of a ChartQA test set (`chartqa_scores`): the accuracy per question source (`human`,
`augmented`), each with its 95 % Wilson interval, and the overall accuracy as papers and suites
report it: the mean of the sources' accuracies (its 95 % interval combines the sources' Wilson
intervals by MOVER), with the pooled mean beside it when the sources differ in size.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence

import numpy as np

from chartjax.metrics.classification import wilson_interval
from chartjax.metrics.scores import Scores, as_reference_lists

__all__ = [
    "PROTOCOLS",
    "RelaxedProtocol",
    "binary_entry",
    "chartqa_scores",
    "mean_entry",
    "mean_interval",
    "mean_of_proportions_interval",
    "protocol_correct",
    "relaxed_accuracy",
    "relaxed_correctness",
]

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
    case_sensitive: bool = False,
) -> bool:
    """Whether ``prediction`` is relaxed-correct for ``target`` (argument order as pix2struct).

    Args:
      strip: (chartjax variant) strip whitespace before comparing strings.
      year_exact: (chartjax variant) a four-digit integer target must be matched exactly
        (fixes google-research/pix2struct#35, where 2008 counts as 2010).
      case_sensitive: compare strings as written (big_vision without `to_lower`).
    """
    if strip:
        target, prediction = target.strip(), prediction.strip()
    if year_exact and _YEAR.match(target):
        return _to_float(prediction) == _to_float(target)
    prediction_float, target_float = _to_float(prediction), _to_float(target)
    if prediction_float is not None and target_float:
        # NaN targets are truthy and compare False: "nan" vs "nan" is wrong, as in the original.
        return abs(prediction_float - target_float) / abs(target_float) <= max_relative_change
    if case_sensitive:
        return prediction == target
    return prediction.lower() == target.lower()


@dataclasses.dataclass(frozen=True)
class RelaxedProtocol:
    """How one evaluation suite applies relaxed correctness to a model's answer.

    strip_prediction: the answer is stripped of surrounding whitespace first (not the target).
    swap_arguments: the suite calls ``relaxed_correctness(prediction, target)``, so the 5 % is
      relative to the prediction (open-compass/VLMEvalKit#584).
    case_sensitive: strings must match case as well.
    source: where the rule comes from (recorded in metrics.json's provenance).
    """

    name: str
    source: str
    strip_prediction: bool = False
    swap_arguments: bool = False
    case_sensitive: bool = False


# docs/metrics.md §5.3; the suites' files are named beside each. The 5 % year quirk (2008 ~ 2010)
# is in all of them (pix2struct#35).
PROTOCOLS: dict[str, RelaxedProtocol] = {
    p.name: p
    for p in (
        RelaxedProtocol("pix2struct", "google-research/pix2struct metrics.relaxed_correctness"),
        # lmms-eval tasks/chartqa utils.relaxed_correctness has pix2struct's semantics; that the
        # answer arrives stripped (its model wrappers strip the generation) is [unverified].
        RelaxedProtocol(
            "lmms_eval", "lmms-eval tasks/chartqa relaxed_correctness", strip_prediction=True
        ),
        # VLMEvalKit vqa_eval.process_line: prediction stripped, then the arguments swapped.
        # Whether later VLMEvalKit releases fixed the swap is [unverified].
        RelaxedProtocol(
            "vlmevalkit",
            "VLMEvalKit vqa_eval relaxed_accuracy (arguments swapped, #584)",
            strip_prediction=True,
            swap_arguments=True,
        ),
        # big_vision paligemma chartqa evaluator without to_lower: case-sensitive strings.
        # No stripping is [unverified].
        RelaxedProtocol(
            "big_vision",
            "big_vision paligemma chartqa evaluator, to_lower off",
            case_sensitive=True,
        ),
    )
}


def protocol_correct(target: str, prediction: str, protocol: str | RelaxedProtocol) -> bool:
    """Relaxed correctness of one answer for one target as ``protocol`` scores it."""
    p = PROTOCOLS[protocol] if isinstance(protocol, str) else protocol
    if p.strip_prediction:
        prediction = prediction.strip()
    if p.swap_arguments:
        target, prediction = prediction, target
    return relaxed_correctness(target, prediction, case_sensitive=p.case_sensitive)


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


# --------------------------------------------------------------------------------------------
# Intervals and per-group entries (shared with PlotQA and ChartQAPro)
# --------------------------------------------------------------------------------------------


def mean_interval(
    values: Sequence[float], *, resamples: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of the mean of ``values`` (graded scores in [0, 1]).
    Seeded, so a rerun prints the same numbers; all-equal values give a zero-width interval."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return 0.0, 1.0
    idx = np.random.default_rng(seed).integers(0, v.size, size=(resamples, v.size))
    low, high = np.percentile(v[idx].mean(axis=1), [2.5, 97.5])
    return float(low), float(high)


def mean_of_proportions_interval(
    entries: Sequence[dict], name: str = "relaxed_accuracy"
) -> tuple[float, float]:
    """95 % interval of the unweighted mean of independent proportions, from each one's Wilson
    interval by MOVER (Zou & Donner 2008): with weights w = 1/k,
    low = m - sqrt(sum w^2 (p - l)^2), high = m + sqrt(sum w^2 (u - p)^2)."""
    w = 1.0 / len(entries)
    mean = sum(w * e[name] for e in entries)
    below = math.sqrt(sum((w * (e[name] - e[f"{name}_ci95_low"])) ** 2 for e in entries))
    above = math.sqrt(sum((w * (e[f"{name}_ci95_high"] - e[name])) ** 2 for e in entries))
    return max(0.0, mean - below), min(1.0, mean + above)


def binary_entry(correct: Sequence[bool], name: str = "relaxed_accuracy") -> dict:
    """``{name, "n", name_ci95_low, name_ci95_high}`` of right/wrong answers (Wilson 95 %)."""
    n, k = len(correct), int(sum(bool(c) for c in correct))
    low, high = wilson_interval(k, n)
    return {name: k / n, "n": n, f"{name}_ci95_low": low, f"{name}_ci95_high": high}


def mean_entry(scores: Sequence[float], name: str = "relaxed_accuracy") -> dict:
    """``{name, "n", name_ci95_low, name_ci95_high}`` of graded scores in [0, 1] (bootstrap)."""
    low, high = mean_interval(scores)
    return {
        name: float(np.mean(scores)),
        "n": len(scores),
        f"{name}_ci95_low": low,
        f"{name}_ci95_high": high,
    }


def _headline(entry: dict, name: str, as_name: str) -> dict[str, float]:
    """An entry's value and interval under metric name ``as_name`` (its ``n`` left out)."""
    return {as_name + k[len(name) :]: v for k, v in entry.items() if k.startswith(name)}


# --------------------------------------------------------------------------------------------
# A ChartQA test set
# --------------------------------------------------------------------------------------------

SOURCES = ("human", "augmented")  # the two halves of a ChartQA split (ChartQA-H, ChartQA-M)


def chartqa_scores(
    predictions: Sequence[str | None],
    references: Sequence[str | Sequence[str]],
    sources: Sequence[str | None] | None = None,
    *,
    protocol: str = "pix2struct",
) -> Scores:
    """Relaxed accuracy overall and per question source, each with a 95 % interval.

    Args:
      predictions: one answer per example; None (missing) is wrong.
      references: each example's target or list of alternative targets (the best counts).
      sources: each example's source (`human`, `augmented`, or another name); None for an
        example without one.
      protocol: a key of `PROTOCOLS`.

    Returns:
      Scores with `relaxed_accuracy` (+ `_ci95_low`/`_high`): the mean of the sources'
      accuracies when every example has a source, else the pooled mean over all examples;
      `relaxed_accuracy_human` / `_augmented` (+ intervals) for those sources; and
      `relaxed_accuracy_pooled` (+ interval) beside a mean of sources of different sizes. The
      breakdown `source` holds every source's entry with its `n`.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; known: {sorted(PROTOCOLS)}")
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    if sources is not None and len(sources) != len(references):
        raise ValueError(f"{len(sources)} sources for {len(references)} references")
    if not predictions:
        raise ValueError("no examples to score")
    refs = as_reference_lists(references)
    correct = [
        p is not None and any(protocol_correct(t, p, protocol) for t in targets)
        for p, targets in zip(predictions, refs)
    ]
    name = "relaxed_accuracy"
    pooled = binary_entry(correct, name)
    groups: dict[str, list[bool]] = {}
    for c, s in zip(correct, sources or [None] * len(correct)):
        if s is not None:
            groups.setdefault(str(s), []).append(c)
    entries = {g: binary_entry(v, name) for g, v in sorted(groups.items())}
    metrics: dict[str, float] = {}
    every_row_has_a_source = bool(groups) and sum(map(len, groups.values())) == len(correct)
    if every_row_has_a_source and len(groups) > 1:
        low, high = mean_of_proportions_interval(list(entries.values()), name)
        overall_rule = "mean of the sources' accuracies"
        metrics.update(
            {
                name: float(np.mean([e[name] for e in entries.values()])),
                f"{name}_ci95_low": low,
                f"{name}_ci95_high": high,
            }
        )
        if len({len(v) for v in groups.values()}) > 1:
            metrics.update(_headline(pooled, name, f"{name}_pooled"))
    else:
        overall_rule = "pooled over all examples"
        metrics.update(_headline(pooled, name, name))
    for source in SOURCES:
        if source in entries:
            metrics.update(_headline(entries[source], name, f"{name}_{source}"))
    p = PROTOCOLS[protocol]
    return Scores(
        metrics=metrics,
        breakdowns={"source": entries} if entries else {},
        libraries={
            "relaxed_accuracy": f"{p.name}: {p.source}; 5% relative; overall = {overall_rule}",
            "protocol": p.name,
        },
    )
