"""Text-generation metrics: BLEU, ChartCheck BLEU, ROUGE, METEOR, sentence splitting.

Libraries do the work (sacrebleu, rouge-score, NLTK); what is written here is only the
benchmark-specific glue (docs/metrics.md §1.2, §2.1, §6). All scores are fractions in [0, 1].
CIDEr is in ``cider.py``, content selection in ``content_selection.py``, the model-based metrics
(BERTScore, BLEURT, perplexity) in ``text_models.py``; all are re-exported here.

NLTK data (WordNet for METEOR, punkt_tab for tokenization and sentence splitting) is looked up
in NLTK's usual folders; ``python -m chartjax.tools.nltk_data`` builds it offline.
"""

from __future__ import annotations

import collections
import functools
import math
import warnings
from collections.abc import Mapping, Sequence
from statistics import fmean

from chartjax.data.table_records import records_from_table
from chartjax.metrics.cider import cider, ptb_tokenize
from chartjax.metrics.classification import group_by
from chartjax.metrics.content_selection import content_selection_score
from chartjax.metrics.nltk_resources import NltkDataMissing, ensure_nltk_data, word_tokenize
from chartjax.metrics.scores import Scores, as_reference_lists
from chartjax.metrics.text_models import (
    BleurtScorer,
    bertscore,
    bleurt,
    corpus_perplexity,
    transformers_bleurt_scorer,
)

__all__ = [
    "BleurtScorer",
    "NltkDataMissing",
    "bertscore",
    "bleu",
    "bleurt",
    "chartcheck_bleu",
    "cider",
    "content_selection_score",
    "corpus_perplexity",
    "ensure_nltk_data",
    "meteor",
    "ptb_tokenize",
    "records_from_table",
    "rouge",
    "rouge_per_example",
    "split_sentences",
    "transformers_bleurt_scorer",
]

ReferenceList = Sequence[str | Sequence[str]]


@functools.cache
def _wordnet():
    """NLTK's WordNet reader without the OMW version map.

    The stock reader re-reads index.sense twice at start-up to map WordNet versions for the
    multilingual (OMW) functions; METEOR never uses that map, and skipping it halves the load
    time. Synset lookups are unchanged.
    """
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class _Reader(WordNetCorpusReader):
        def map_wn(self, version="wordnet"):
            return None

    ensure_nltk_data("wordnet")
    with warnings.catch_warnings():  # "multilingual functions are not available": no OMW
        warnings.simplefilter("ignore")
        return _Reader(nltk.data.find("corpora/wordnet"), None)


class _CachedStemmer:
    """Porter stemming memoized per word (a pure function; the same stems, far fewer calls)."""

    def __init__(self):
        from nltk.stem.porter import PorterStemmer

        self.stem = functools.lru_cache(maxsize=1 << 18)(PorterStemmer().stem)


class _CachedSynsets:
    """The only WordNet call METEOR makes, ``synsets(word)``, memoized per word."""

    def __init__(self, reader):
        self.synsets = functools.lru_cache(maxsize=1 << 18)(reader.synsets)


@functools.cache
def _meteor_resources():
    return _CachedStemmer(), _CachedSynsets(_wordnet())


def _rouge_tokenizer():
    from rouge_score import tokenize, tokenizers

    class _Tokenizer(tokenizers.Tokenizer):
        """rouge-score's default tokenizer with the stemmer memoized."""

        def __init__(self):
            self._stemmer = _CachedStemmer()

        def tokenize(self, text):
            return tokenize.tokenize(text, self._stemmer)

    return _Tokenizer()


def _check_lengths(predictions: Sequence, references: Sequence) -> list[list[str]]:
    if len(predictions) != len(references):
        raise ValueError(
            f"{len(predictions)} predictions for {len(references)} references: lengths differ"
        )
    if not predictions:
        raise ValueError("no examples to score")
    return as_reference_lists(references)


def split_sentences(text: str) -> str:
    """ChartCheck's pre-processing: strip, NLTK ``sent_tokenize``, one sentence per line."""
    import nltk

    ensure_nltk_data("punkt_tab")
    return "\n".join(nltk.sent_tokenize(text.strip()))


# --------------------------------------------------------------------------------------------
# BLEU
# --------------------------------------------------------------------------------------------


def bleu(
    predictions: Sequence[str],
    references: ReferenceList,
    *,
    tokenize: str = "13a",
    lowercase: bool = False,
    force: bool = False,
    groups: Mapping[str, Sequence] | None = None,
) -> Scores:
    """Corpus BLEU with sacrebleu (exp smoothing, closest reference length), as a fraction.

    ``tokenize="none"`` scores pre-tokenized text as is (Chart-to-Text's multi-bleu.perl runs on
    PTB-tokenized files). Examples may have different numbers of references.
    The sacrebleu signature is recorded under ``libraries["sacrebleu"]``. ``force`` silences
    sacrebleu's "already tokenized?" warning (the score does not change). ``groups``
    (``{breakdown: one key per example}``) adds per-group corpus BLEU and n as breakdowns,
    computed from the same per-sentence statistics (sacrebleu's own, pinned 2.6.0 internals).
    """
    from sacrebleu.metrics import BLEU

    refs = _check_lengths(predictions, references)
    num_refs = max(len(r) for r in refs)
    # sacrebleu takes reference *streams*; None pads examples with fewer references.
    streams = [[r[k] if k < len(r) else None for r in refs] for k in range(num_refs)]
    metric = BLEU(tokenize=tokenize, lowercase=lowercase, force=force)
    hyps = list(predictions)
    metric._check_corpus_score_args(hyps, streams)
    stats = metric._extract_corpus_statistics(hyps, streams)  # what corpus_score does
    out = Scores(
        metrics={"bleu": _fraction(metric._aggregate_and_compute(stats).score)},
        libraries={"sacrebleu": str(metric.get_signature())},
    )
    for name, keys in (groups or {}).items():
        table = {}
        for group, idx in group_by(list(keys), list(range(len(hyps)))).items():
            score = _fraction(metric._aggregate_and_compute([stats[i] for i in idx]).score)
            table[group] = {"bleu": score, "n": len(idx)}
        out.breakdowns[name] = table
    return out


def _fraction(percent: float) -> float:
    # sacrebleu's exp(log-mean) gives 100.00000000000004 for a perfect corpus.
    return min(percent / 100.0, 1.0)


def _ngrams(tokens: Sequence[str], max_order: int) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for order in range(1, max_order + 1):
        for i in range(len(tokens) - order + 1):
            counts[tuple(tokens[i : i + order])] += 1
    return counts


def chartcheck_bleu(
    predictions: Sequence[str], references: ReferenceList, *, max_order: int = 4
) -> Scores:
    """BLEU as ChartCheck computed it (HF ``evaluate`` "bleu" = tensorflow/nmt ``compute_bleu``).

    Hand-written because ``evaluate`` cannot load offline (docs/metrics.md §1.2): sacrebleu's
    13a tokenizer (case-sensitive), clipped n-gram counts summed over the corpus, no smoothing
    (any zero precision gives 0), and the *shortest* reference length per example for the
    brevity penalty (``bp = 1`` if ratio > 1 else ``exp(1 - 1/ratio)``).
    """
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    refs = _check_lengths(predictions, references)
    tokenizer = Tokenizer13a()
    matches = [0] * max_order
    possible = [0] * max_order
    ref_length = hyp_length = 0
    for prediction, ref_list in zip(predictions, refs):
        hyp = tokenizer(prediction).split()
        ref_tokens = [tokenizer(r).split() for r in ref_list]
        ref_length += min(len(r) for r in ref_tokens)
        hyp_length += len(hyp)
        merged: collections.Counter = collections.Counter()
        for r in ref_tokens:
            merged |= _ngrams(r, max_order)
        for ngram, count in (_ngrams(hyp, max_order) & merged).items():
            matches[len(ngram) - 1] += count
        for order in range(1, max_order + 1):
            possible[order - 1] += max(0, len(hyp) - order + 1)
    precisions = [m / p if p > 0 else 0.0 for m, p in zip(matches, possible)]
    geo_mean = (
        math.exp(sum(math.log(p) for p in precisions) / max_order) if min(precisions) > 0 else 0.0
    )
    ratio = hyp_length / ref_length if ref_length else 0.0
    # nmt divides by zero for an empty hypothesis corpus; its limit (bp -> 0) is used instead.
    bp = 1.0 if ratio > 1.0 else (math.exp(1.0 - 1.0 / ratio) if ratio > 0 else 0.0)
    return Scores(
        metrics={
            "bleu": geo_mean * bp,
            "bleu_brevity_penalty": bp,
            "bleu_length_ratio": ratio,
        },
        libraries={"bleu": "nmt compute_bleu (max_order=4, smooth=False) + sacrebleu 13a"},
    )


# --------------------------------------------------------------------------------------------
# ROUGE and METEOR
# --------------------------------------------------------------------------------------------

_ROUGE_NAMES = {
    "rouge1": "rouge_1",
    "rouge2": "rouge_2",
    "rougeL": "rouge_l",
    "rougeLsum": "rouge_lsum",
}


def rouge_per_example(
    predictions: Sequence[str],
    references: ReferenceList,
    *,
    use_stemmer: bool = True,
    types: Sequence[str] = tuple(_ROUGE_NAMES),
) -> dict[str, list[float]]:
    """Per-example ROUGE F-measures (metric name -> list) for rouge-score ``types``."""
    from rouge_score import rouge_scorer

    refs = _check_lengths(predictions, references)
    tokenizer = _rouge_tokenizer() if use_stemmer else None
    scorer = rouge_scorer.RougeScorer(list(types), tokenizer=tokenizer)
    out: dict[str, list[float]] = {_ROUGE_NAMES[t]: [] for t in types}
    for prediction, ref_list in zip(predictions, refs):
        result = scorer.score_multi(ref_list, prediction)
        for key in types:
            out[_ROUGE_NAMES[key]].append(result[key].fmeasure)
    return out


def rouge(
    predictions: Sequence[str], references: ReferenceList, *, use_stemmer: bool = True
) -> Scores:
    """Mean per-example ROUGE-1/2/L/Lsum F-measure with rouge-score (no bootstrap).

    rougeLsum treats "\\n" as the sentence separator (apply ``split_sentences`` first for
    ChartCheck). With several references, the best-F reference counts (``score_multi``).
    """
    from importlib.metadata import version

    per = rouge_per_example(predictions, references, use_stemmer=use_stemmer)
    return Scores(
        metrics={name: fmean(values) for name, values in per.items()},
        libraries={"rouge_score": f"{version('rouge-score')} use_stemmer={use_stemmer} mean-F"},
    )


def meteor(
    predictions: Sequence[str],
    references: ReferenceList,
    *,
    alpha: float = 0.9,
    beta: float = 3.0,
    gamma: float = 0.5,
) -> Scores:
    """Mean per-example NLTK METEOR on ``word_tokenize`` tokens (ChartCheck's parameters).

    With several references NLTK's ``meteor_score`` takes the best one.
    """
    import nltk
    from nltk.translate import meteor_score as nltk_meteor

    refs = _check_lengths(predictions, references)
    ensure_nltk_data("wordnet", "punkt_tab")
    stemmer, wordnet = _meteor_resources()
    values = []
    for prediction, ref_list in zip(predictions, refs):
        hyp = word_tokenize(prediction)
        tokenized = [word_tokenize(r) for r in ref_list]
        values.append(
            nltk_meteor.meteor_score(
                tokenized,
                hyp,
                alpha=alpha,
                beta=beta,
                gamma=gamma,
                stemmer=stemmer,
                wordnet=wordnet,
            )
        )
    return Scores(
        metrics={"meteor": fmean(values)},
        libraries={
            "nltk_meteor": f"nltk {nltk.__version__} alpha={alpha} beta={beta} gamma={gamma} "
            f"wordnet {_wordnet().get_version()}"
        },
    )
