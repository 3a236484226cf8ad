"""Chart-to-Text: the paper's metric suite, overall and per split / chart type / complexity.

BLEU (sacrebleu), ROUGE, METEOR, CIDEr(-D), content selection, BLEURT and corpus perplexity
(the last two only with a local model; otherwise listed as unavailable).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from statistics import fmean

from chartjax.metrics import text as T
from chartjax.metrics.classification import group_by
from chartjax.metrics.content_selection import content_selection
from chartjax.metrics.scores import Scores

__all__ = ["chart_to_text_scores"]

GROUP_METRICS = ("bleu", "rouge_l", "content_selection")
# Below this many examples a worker process costs more than it saves.
PARALLEL_MIN_EXAMPLES = 2000


def _nltk_metrics(predictions, references) -> Scores:
    """METEOR and CIDEr: both tokenize with NLTK, so they share its (memoized) tokenization."""
    out = Scores()
    for name, fn in (("meteor", T.meteor), ("cider", T.cider)):
        try:
            out.update(fn(predictions, references))
        except T.NltkDataMissing as err:  # data, like a model, may be absent: say why
            out.update(
                Scores.missing(["cider", "cider_d"] if name == "cider" else [name], str(err))
            )
    return out


def chart_to_text_scores(
    predictions: Sequence[str],
    references: Sequence[str],
    *,
    records: Sequence[str] | None = None,
    titles: Sequence[str] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
    bleu_tokenize: str = "13a",
    bleurt_checkpoint: str | Path | None = None,
    ppl_model: str | Path | None = None,
    workers: int | None = None,
) -> Scores:
    """All Chart-to-Text metrics; ``groups`` (e.g. ``{"split": [...], "chart_type": [...],
    "complexity": [...]}``) adds per-group BLEU, ROUGE-L, CS and n as breakdowns (BLEU is a
    corpus metric, so each group is its own corpus; the others are per-example means).

    ROUGE here is ROUGE-1/2/L (no summary-level ROUGE-Lsum: the summaries are single lines).
    With ``workers`` > 1 (default: 2 if the machine has 2 cores) and a large corpus, METEOR and
    CIDEr run in a forked worker while BLEU, ROUGE and CS run here; results are identical.
    """
    predictions, references = list(predictions), list(references)
    workers = min(2, os.cpu_count() or 1) if workers is None else workers
    pool = None
    if workers > 1 and len(predictions) >= PARALLEL_MIN_EXAMPLES:
        pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
        nltk_future = pool.submit(_nltk_metrics, predictions, references)
    try:
        groups = {k: list(v) for k, v in (groups or {}).items()}
        out = T.bleu(predictions, references, tokenize=bleu_tokenize, groups=groups)
        rouge = T.rouge_per_example(predictions, references, types=("rouge1", "rouge2", "rougeL"))
        out.metrics.update({name: fmean(values) for name, values in rouge.items()})
        out.libraries["rouge_score"] = "use_stemmer=True mean-F"
        cs = None
        if records is not None and titles is not None:
            golds = [r if isinstance(r, str) else r[0] for r in references]
            cs = [
                content_selection(p, g, d, t)
                for p, g, d, t in zip(predictions, golds, records, titles)
            ]
            out.metrics["content_selection"] = fmean(cs)
        else:
            out.unavailable["content_selection"] = "references carry no data records and titles"
        for name, table in out.breakdowns.items():
            for group, idx in group_by(groups[name], list(range(len(predictions)))).items():
                table[group]["rouge_l"] = fmean(rouge["rouge_l"][i] for i in idx)
                if cs is not None:
                    table[group]["content_selection"] = fmean(cs[i] for i in idx)
        out.update(nltk_future.result() if pool else _nltk_metrics(predictions, references))
    finally:
        if pool:
            pool.shutdown()
    scorer = T.transformers_bleurt_scorer(bleurt_checkpoint) if bleurt_checkpoint else None
    out.update(T.bleurt(predictions, references, scorer=scorer))
    out.update(T.corpus_perplexity(predictions, model_dir=ppl_model))
    return out
