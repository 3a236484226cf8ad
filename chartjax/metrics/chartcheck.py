"""ChartCheck: label parsers, accuracy / macro-F1 with breakdowns, explanation metrics
(docs/metrics.md §1).

Labels are canonical strings "TRUE" (the chart supports the claim) and "FALSE" (it refutes it).
Unparseable generations are counted (``num_unparseable``) and scored as wrong; the Flan-T5
baselines' behaviour of dropping them from both sides is ``drop_unparseable=True``
(``num_skipped`` says how many were dropped). Accuracy carries its 95 % Wilson interval, macro-F1
a 95 % percentile-bootstrap interval (seeded, so a rerun prints the same numbers).

Explanation metrics come in the variants the authors computed them with
(``EXPLANATION_VARIANTS``): the Flan-T5 script's and ``matcha_test.py``'s differ in sentence
splitting, ROUGE stemming and the BERTScore / BLEURT models.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from chartjax.metrics import classification as C
from chartjax.metrics.scores import Scores

__all__ = [
    "EXPLANATION_VARIANTS",
    "LABELS",
    "chartcheck_scores",
    "explanation_scores",
    "parse_flan_t5",
    "parse_gold",
    "parse_matcha",
]

LABELS = ("TRUE", "FALSE")
_GOLD = {
    "true": "TRUE",
    "supports": "TRUE",
    "yes": "TRUE",
    "1": "TRUE",
    "false": "FALSE",
    "refutes": "FALSE",
    "no": "FALSE",
    "0": "FALSE",
}


def parse_flan_t5(text: str) -> str | None:
    """Flan-T5 baseline: "true" anywhere (checked first) -> TRUE, else "false" -> FALSE."""
    low = text.lower()
    if "true" in low:
        return "TRUE"
    if "false" in low:
        return "FALSE"
    return None


def parse_matcha(text: str) -> str | None:
    """MatCha baseline targets "Yes"/"No": the first word decides (case and punctuation free)."""
    words = re.findall(r"[a-z]+", text.lower())
    if not words:
        return None
    return {"yes": "TRUE", "no": "FALSE"}.get(words[0])


def parse_gold(label) -> str:
    """A gold label (TRUE/FALSE, supports/refutes, Yes/No, 1/0, or "... the claim is X.")."""
    text = str(label).strip().lower()
    match = re.search(r"the claim is (\w+)", text)
    if match:
        text = match.group(1)
    if text not in _GOLD:
        raise ValueError(f"unknown ChartCheck gold label {label!r}")
    return _GOLD[text]


PARSERS = {"flan_t5": parse_flan_t5, "matcha": parse_matcha}


def chartcheck_scores(
    generations: Sequence[str],
    gold: Sequence,
    *,
    parser: str = "flan_t5",
    chart_types: Sequence[str] | None = None,
    reasoning_types: Sequence[Sequence[str]] | None = None,
    drop_unparseable: bool = False,
) -> Scores:
    """Accuracy, macro-F1 over TRUE/FALSE, Wilson CI, confusion and group breakdowns."""
    if len(generations) != len(gold):
        raise ValueError(f"{len(generations)} predictions for {len(gold)} references")
    preds = [PARSERS[parser](g) for g in generations]
    golds = [parse_gold(g) for g in gold]
    keep = [i for i, p in enumerate(preds) if p is not None or not drop_unparseable]
    num_unparseable = sum(p is None for p in preds)
    if not keep:  # every verdict dropped: nothing to score, which is itself the result
        counts = {"num_unparseable": num_unparseable, "num_skipped": len(preds), "num_scored": 0}
        why = f"all {len(preds)} outputs were unparseable and drop_unparseable is on"
        return Scores(
            metrics=counts,
            unavailable={"accuracy": why, "macro_f1": why},
            libraries={"chartcheck": f"parser={parser} drop_unparseable={drop_unparseable}"},
        )
    preds, golds = [preds[i] for i in keep], [golds[i] for i in keep]
    metrics = C.classification_metrics(preds, golds, labels=LABELS)
    metrics["macro_f1_ci95_low"], metrics["macro_f1_ci95_high"] = macro_f1_interval(preds, golds)
    metrics["num_unparseable"] = num_unparseable
    metrics["num_skipped"] = len(generations) - len(keep)  # left out of both sides
    metrics["num_scored"] = len(keep)
    breakdowns = {"confusion": C.confusion_breakdown(preds, golds, LABELS)}
    if chart_types is not None:
        breakdowns["chart_type"] = C.breakdown(preds, golds, [chart_types[i] for i in keep])
    if reasoning_types is not None:
        bad = next((i for i, r in enumerate(reasoning_types) if isinstance(r, str)), None)
        if bad is not None:  # list("Filter") would be six one-letter types
            raise ValueError(f"reasoning_types[{bad}] is a string; expected a list of strings")
        keys = [list(reasoning_types[i]) for i in keep]
        breakdowns["reasoning_type"] = C.breakdown(preds, golds, keys)
    return Scores(
        metrics=metrics,
        breakdowns=breakdowns,
        libraries={"chartcheck": f"parser={parser} drop_unparseable={drop_unparseable}"},
    )


def macro_f1_interval(
    predictions: Sequence, targets: Sequence, *, resamples: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of the macro-F1 over TRUE/FALSE (claims resampled
    with replacement; F1 = 0 for a label with neither support nor predictions, as macro_f1)."""
    pred = np.asarray([LABELS.index(p) if p in LABELS else -1 for p in predictions])
    gold = np.asarray([LABELS.index(t) for t in targets])
    idx = np.random.default_rng(seed).integers(0, len(gold), size=(resamples, len(gold)))
    p, g = pred[idx], gold[idx]
    f1 = []
    for c in range(len(LABELS)):
        tp = np.sum((p == c) & (g == c), axis=1)
        wrong = np.sum((p == c) != (g == c), axis=1)  # false positives + false negatives
        denom = 2 * tp + wrong
        f1.append(np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0))
    low, high = np.percentile(np.mean(f1, axis=0), [2.5, 97.5])
    return float(low), float(high)


@dataclasses.dataclass(frozen=True)
class ExplanationMetrics:
    """How one script of the authors scored explanations (all through HF `evaluate`).

    sentence_split: NLTK sent_tokenize, one sentence per line, before every metric.
    rouge_stemmer: rouge-score's Porter stemmer (HF `evaluate` rouge: off unless asked).
    bertscore_model, bertscore_layer: the model they named and bert-score's layer for it.
    bleurt: the BLEURT checkpoint they loaded.
    """

    name: str
    source: str
    sentence_split: bool
    rouge_stemmer: bool
    bertscore_model: str
    bertscore_layer: int
    bleurt: str


EXPLANATION_VARIANTS = {
    # mubasharaak/ChartCheck a904b10 explanation_generation_flanT5.py lines 78-150:
    # postprocess_text (strip, sent_tokenize, "\n"), rouge use_stemmer=True, bleu, bertscore
    # lang="en" (roberta-large, layer 17), meteor, bleurt default (BLEURT-base-128).
    "flan_t5_script": ExplanationMetrics(
        "flan_t5_script",
        "ChartCheck a904b10 explanation_generation_flanT5.py compute_metrics",
        sentence_split=True,
        rouge_stemmer=True,
        bertscore_model="roberta-large",
        bertscore_layer=17,
        bleurt="bleurt-base-128",
    ),
    # mubasharaak/ChartCheck 6a74e95 matcha_test.py lines 151-174: the text after
    # "Explanation: ", no sentence splitting, rouge defaults (no stemming), BLEURT-20, bleu,
    # meteor, bertscore model_type="microsoft/deberta-xlarge-mnli" (layer 40).
    "matcha_test": ExplanationMetrics(
        "matcha_test",
        "ChartCheck 6a74e95 matcha_test.py",
        sentence_split=False,
        rouge_stemmer=False,
        bertscore_model="microsoft/deberta-xlarge-mnli",
        bertscore_layer=40,
        bleurt="BLEURT-20",
    ),
}


def explanation_scores(
    predictions: Sequence[str],
    references: Sequence[str],
    *,
    variant: str = "flan_t5_script",
    bertscore_model: str | Path | None = None,
    bleurt_checkpoint: str | Path | None = None,
) -> Scores:
    """ChartCheck's explanation metrics as one of the authors' scripts computed them
    (``EXPLANATION_VARIANTS``): BLEU (nmt, no smoothing), ROUGE, METEOR, BERTScore, BLEURT.
    Names carry an ``explanation_`` prefix; ``libraries["chartcheck_explanations"]`` names the
    variant. The model-based metrics need the variant's model (``bertscore_model`` a local copy
    of ``bertscore_model``'s weights, ``bleurt_checkpoint`` of its BLEURT): without one they are
    ``unavailable``, the reason naming the model the authors used."""
    from chartjax.metrics import text as T
    from chartjax.metrics.text_models import BERTSCORE_NAMES

    if variant not in EXPLANATION_VARIANTS:
        raise ValueError(
            f"explanation metrics {variant!r}: not one of {sorted(EXPLANATION_VARIANTS)}"
        )
    v = EXPLANATION_VARIANTS[variant]
    if v.sentence_split:
        preds = [T.split_sentences(p) for p in predictions]
        refs = [T.split_sentences(r) for r in references]
    else:
        preds, refs = list(predictions), list(references)
    out = Scores()
    out.update(T.chartcheck_bleu(preds, refs))
    out.update(T.rouge(preds, refs, use_stemmer=v.rouge_stemmer))
    out.update(T.meteor(preds, refs))
    if bertscore_model is None:
        reason = f"no model directory given (--bertscore_model: {v.name} used {v.bertscore_model})"
        out.update(Scores.missing(BERTSCORE_NAMES, reason))
    else:
        out.update(
            T.bertscore(preds, refs, model_dir=bertscore_model, num_layers=v.bertscore_layer)
        )
    if bleurt_checkpoint is None:
        reason = f"no checkpoint given (--bleurt_checkpoint: {v.name} used {v.bleurt})"
        out.update(Scores.missing(["bleurt"], reason))
    else:
        out.update(T.bleurt(preds, refs, scorer=T.transformers_bleurt_scorer(bleurt_checkpoint)))
    libraries = dict(out.libraries)
    libraries["chartcheck_explanations"] = (
        f"{v.name} ({v.source}): sentence_split={v.sentence_split} "
        f"rouge_stemmer={v.rouge_stemmer} bertscore={v.bertscore_model}@{v.bertscore_layer} "
        f"bleurt={v.bleurt}"
    )
    return Scores(
        metrics={f"explanation_{k}": val for k, val in out.metrics.items()},
        unavailable={f"explanation_{k}": val for k, val in out.unavailable.items()},
        libraries=libraries,
    )
