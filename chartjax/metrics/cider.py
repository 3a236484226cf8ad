"""CIDEr and CIDEr-D with corpus-level IDF, as Chart-to-Text ran them (docs/metrics.md §2.3).

Written here (about 60 lines of arithmetic) rather than taken from pycocoevalcap, whose 104 MB
wheel and Java tokenizer subprocess buy nothing for the scorer itself. Definitions:

- n = 1..4; df(g) = number of examples whose reference set contains n-gram g;
  ref_len = log(#examples); vec[g] = tf(g) * (ref_len - log(max(1, df(g)))).
- CIDEr (vrama91 ``cider_scorer``): sim_n = <vec_h, vec_r> / (|vec_h| |vec_r|).
- CIDEr-D (pycocoevalcap ``Cider``): numerator sum_g min(vec_h[g], vec_r[g]) * vec_r[g], and
  sim_n multiplied by exp(-(len_h - len_r)^2 / (2 * 6^2)), lengths counted as in the original
  (the number of bigrams).
- score = 10 * mean_n(sum_refs sim_n) / #refs per example; corpus score = mean over examples.
IDF comes from the evaluated set itself: a one-example corpus scores 0 (log 1 = 0).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence

from chartjax.metrics.nltk_resources import word_tokenize
from chartjax.metrics.scores import Scores, as_reference_lists

__all__ = ["PTB_PUNCTUATION", "cider", "cider_scores", "ptb_tokenize"]

# Tokens the coco-caption/pyciderevalcap PTBTokenizer removes after tokenizing.
PTB_PUNCTUATION = frozenset(
    ["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-", ".", "?", "!", ",", ":", "-", "--"]
    + ["...", ";"]
)
_BRACKETS = {"(": "-LRB-", ")": "-RRB-", "{": "-LCB-", "}": "-RCB-", "[": "-LSB-", "]": "-RSB-"}
_MAX_N = 4
_SIGMA = 6.0


def ptb_tokenize(text: str) -> list[str]:
    """Lower-cased PTB-style tokens without punctuation (the captioning tokenizer's output).

    Approximates Stanford PTBTokenizer 3.4.1 (``-preserveLines -lowerCase``: tokenize, then
    lower-case) with NLTK's Treebank-based ``word_tokenize`` (needs punkt_tab); parity on
    unusual punctuation is [unverified]. Brackets become PTB escapes, so ( ) { } are removed
    like the original.
    """
    tokens = (_BRACKETS.get(t, t.lower()) for t in word_tokenize(text.replace("\n", " ")))
    return [t for t in tokens if t not in PTB_PUNCTUATION]


def _counts(tokens: Sequence[str]) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for n in range(1, _MAX_N + 1):
        for i in range(len(tokens) - n + 1):
            counts[tuple(tokens[i : i + n])] += 1
    return counts


def _vector(counts, df, ref_len):
    vec = [{} for _ in range(_MAX_N)]
    norm = [0.0] * _MAX_N
    length = 0
    for gram, tf in counts.items():
        n = len(gram) - 1
        value = tf * (ref_len - math.log(max(1.0, df.get(gram, 0.0))))
        vec[n][gram] = value
        norm[n] += value * value
        if n == 1:  # the original counts length on the bigram vector
            length += tf
    return vec, [math.sqrt(x) for x in norm], length


def _sim(hyp, ref, *, clipped: bool) -> float:
    (vec_h, norm_h, len_h), (vec_r, norm_r, len_r) = hyp, ref
    penalty = math.exp(-((len_h - len_r) ** 2) / (2 * _SIGMA**2)) if clipped else 1.0
    total = 0.0
    for n in range(_MAX_N):
        r = vec_r[n]
        if clipped:
            val = sum(min(v, r[g]) * r[g] for g, v in vec_h[n].items() if g in r)
        else:
            val = sum(v * r[g] for g, v in vec_h[n].items() if g in r)
        if norm_h[n] != 0 and norm_r[n] != 0:
            val /= norm_h[n] * norm_r[n]
        total += val * penalty
    return total / _MAX_N


def cider_scores(
    hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[Sequence[str]]]
) -> tuple[list[float], list[float]]:
    """Per-example (CIDEr, CIDEr-D) on already tokenized text.

    Args:
      hypotheses: one token list per example.
      references: per example, a non-empty list of token lists.
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} reference sets")
    ref_counts = [[_counts(r) for r in refs] for refs in references]
    df: collections.Counter = collections.Counter()
    for counts in ref_counts:
        df.update(set().union(*counts))
    ref_len = math.log(float(len(references))) if references else 0.0
    plain, clipped = [], []
    for hyp, counts in zip(hypotheses, ref_counts):
        h = _vector(_counts(hyp), df, ref_len)
        rs = [_vector(c, df, ref_len) for c in counts]
        plain.append(10.0 * sum(_sim(h, r, clipped=False) for r in rs) / len(rs))
        clipped.append(10.0 * sum(_sim(h, r, clipped=True) for r in rs) / len(rs))
    return plain, clipped


def cider(
    predictions: Sequence[str],
    references: Sequence[str | Sequence[str]],
    *,
    tokenize: bool = True,
) -> Scores:
    """Corpus CIDEr and CIDEr-D (native units, not bounded by 1).

    ``tokenize=True`` applies ``ptb_tokenize``; ``False`` splits on whitespace (pre-tokenized,
    already lower-cased text).
    """
    refs = as_reference_lists(references)
    if len(predictions) != len(refs):
        raise ValueError(f"{len(predictions)} predictions for {len(refs)} references")
    if not refs:
        raise ValueError("cider: no examples to score")
    tok = ptb_tokenize if tokenize else str.split
    plain, clipped = cider_scores(
        [tok(p) for p in predictions], [[tok(r) for r in rs] for rs in refs]
    )
    method = "nltk word_tokenize PTB approximation" if tokenize else "whitespace"
    return Scores(
        metrics={"cider": sum(plain) / len(plain), "cider_d": sum(clipped) / len(clipped)},
        libraries={"cider": f"chartjax corpus-idf n=4 sigma=6 tokenizer={method}"},
    )
