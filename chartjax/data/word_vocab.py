"""A whitespace-word vocabulary built from a corpus, for the from-scratch Chart-to-Text rows
(Chart2text, Field-Infuse, image captioning), whose papers use word vocabularies. It has the
interface seq2seq.target_arrays uses. Hand-written: the SentencePiece / BPE vocabularies of
data/vocab.py and data/bpe.py need a trained model file."""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence

import numpy as np

SPECIALS = ("<pad>", "</s>", "<unk>")
PAD, EOS, UNK = 0, 1, 2


class WordVocab:
    """Ids: the specials, then `words` in order."""

    pad_id, eos_id, unk_id, decoder_start_id = PAD, EOS, UNK, PAD

    def __init__(self, words: Sequence[str]):
        self.words = list(SPECIALS) + [w for w in words if w not in SPECIALS]
        self.index = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def id(self, word: str) -> int:
        return self.index.get(word, UNK) if word else PAD

    def encode_batch(self, texts, max_len: int, add_eos: bool = True) -> np.ndarray:
        out = np.zeros((len(texts), max_len), np.int32)
        for n, text in enumerate(texts):
            ids = [self.id(w) for w in text.split()][: max_len - int(add_eos)]
            ids += [EOS] if add_eos else []
            out[n, : len(ids)] = ids
        return out

    def decode_batch(self, ids) -> list[str]:
        texts = []
        for row in np.asarray(ids):
            words = []
            for i in row.tolist():
                if i == EOS:
                    break
                if i != PAD:
                    words.append(self.words[i] if i < len(self.words) else SPECIALS[UNK])
            texts.append(" ".join(words))
        return texts


def most_frequent(token_lists: Iterable[Sequence[str]], size: int) -> WordVocab:
    """The `size` - 3 most frequent non-empty tokens (ties by the token), after the specials."""
    counts = collections.Counter(t for tokens in token_lists for t in tokens if t)
    ranked = sorted(
        (c for c in counts.items() if c[0] not in SPECIALS), key=lambda c: (-c[1], c[0])
    )
    return WordVocab([w for w, _ in ranked[: max(size - len(SPECIALS), 0)]])
