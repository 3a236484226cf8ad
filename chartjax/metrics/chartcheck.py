"""ChartCheck: label parsers, accuracy / macro-F1 with breakdowns, explanation metrics (§1).

Labels are canonical strings "TRUE" (the chart supports the claim) and "FALSE" (it refutes it).
Unparseable generations are counted (``num_unparseable``) and scored as wrong; the baselines'
behaviour of dropping them from both sides is available as ``drop_unparseable=True``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from chartjax.metrics import classification as C
from chartjax.metrics.scores import Scores

__all__ = [
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
    if not keep:
        raise ValueError("chartcheck: no parseable prediction to score")
    preds, golds = [preds[i] for i in keep], [golds[i] for i in keep]
    metrics = C.classification_metrics(preds, golds, labels=LABELS)
    metrics["num_unparseable"] = num_unparseable
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


def explanation_scores(
    predictions: Sequence[str],
    references: Sequence[str],
    *,
    bertscore_model: str | Path | None = None,
    bleurt_checkpoint: str | Path | None = None,
) -> Scores:
    """ChartCheck's explanation metrics on sentence-split text (one sentence per line), as its
    ``compute_metrics`` did: BLEU (nmt, no smoothing), ROUGE, METEOR, BERTScore, BLEURT.
    Names carry an ``explanation_`` prefix."""
    from chartjax.metrics import text as T

    preds = [T.split_sentences(p) for p in predictions]
    refs = [T.split_sentences(r) for r in references]
    out = Scores()
    out.update(T.chartcheck_bleu(preds, refs))
    out.update(T.rouge(preds, refs))
    out.update(T.meteor(preds, refs))
    out.update(T.bertscore(preds, refs, model_dir=bertscore_model))
    scorer = T.transformers_bleurt_scorer(bleurt_checkpoint) if bleurt_checkpoint else None
    out.update(T.bleurt(preds, refs, scorer=scorer))
    return Scores(
        metrics={f"explanation_{k}": v for k, v in out.metrics.items()},
        unavailable={f"explanation_{k}": v for k, v in out.unavailable.items()},
        libraries=out.libraries,
    )
