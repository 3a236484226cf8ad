"""Checks for the NLTK data the text metrics need (built offline by ``python -m chartjax.tools.nltk_data``)."""

from __future__ import annotations

import functools

__all__ = ["NltkDataMissing", "ensure_nltk_data", "word_tokenize"]

_RESOURCES = {"wordnet": "corpora/wordnet", "punkt_tab": "tokenizers/punkt_tab/english/"}


class NltkDataMissing(LookupError):
    """An NLTK resource (WordNet, punkt_tab) is not installed."""


def ensure_nltk_data(*names: str) -> None:
    """Raises NltkDataMissing naming the fix if a resource ("wordnet", "punkt_tab") is absent."""
    import nltk

    for name in names:
        try:
            nltk.data.find(_RESOURCES[name])
        except LookupError as err:
            raise NltkDataMissing(
                f"NLTK resource {name!r} not found (searched {nltk.data.path}); "
                "build it offline with `python -m chartjax.tools.nltk_data`"
            ) from err


@functools.lru_cache(maxsize=1 << 16)
def _word_tokenize(text: str) -> tuple[str, ...]:
    import nltk

    return tuple(nltk.word_tokenize(text))


def word_tokenize(text: str) -> list[str]:
    """``nltk.word_tokenize`` (punkt + Treebank), memoized: METEOR and CIDEr tokenize the same
    predictions and references, so the second metric reuses the first one's work."""
    ensure_nltk_data("punkt_tab")
    return list(_word_tokenize(text))
