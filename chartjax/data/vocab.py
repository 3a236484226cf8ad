"""SentencePiece vocabulary with the conventions of the released T5 / Pix2Struct models.

Ids (docs/models.md §1.7): pad 0 (also the decoder start id), EOS 1, UNK 2, no BOS. Newlines have no
piece of their own: they are encoded with byte fallback as `<0x0A>`, which SentencePiece decodes
back to "\\n" (as seqio does). HF's `T5Tokenizer.decode` leaves a literal "<0x0A>" in its output;
`fix_newlines` turns such text back into real newlines.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import numpy as np
import sentencepiece as spm

PAD_ID = 0
EOS_ID = 1
UNK_ID = 2
DECODER_START_ID = 0
NEWLINE_PIECE = "<0x0A>"


def fix_newlines(text: str) -> str:
    """Literal "<0x0A>" (HF tokenizer output) -> "\\n"."""
    return text.replace(NEWLINE_PIECE, "\n")


class Vocabulary:
    """A SentencePiece model checked against the pad/EOS/UNK conventions.

    Args:
      model_file: path of a `.model` file (e.g. pix2struct's `sentencepiece.model`).
      model_proto: the serialized model instead of a file (for in-memory models).
    """

    def __init__(self, model_file: str | None = None, *, model_proto: bytes | None = None):
        if (model_file is None) == (model_proto is None):
            raise ValueError("give exactly one of model_file or model_proto")
        where = model_file or "<model_proto>"
        if model_file is not None:
            if not os.path.isfile(model_file):
                raise FileNotFoundError(f"vocabulary file not found: {model_file}")
            with open(model_file, "rb") as f:
                model_proto = f.read()
        self.sp = spm.SentencePieceProcessor()
        try:
            self.sp.LoadFromSerializedProto(model_proto)
        except (RuntimeError, OSError) as e:
            raise ValueError(f"{where}: not a SentencePiece model ({e})") from None
        got = {"pad": self.sp.pad_id(), "eos": self.sp.eos_id(), "unk": self.sp.unk_id()}
        want = {"pad": PAD_ID, "eos": EOS_ID, "unk": UNK_ID}
        if got != want:
            raise ValueError(f"{where}: special ids {got}, expected {want} (T5 conventions)")
        self.where = where
        self.byte_fallback = self.sp.piece_to_id(NEWLINE_PIECE) != UNK_ID

    @property
    def vocab_size(self) -> int:
        """Number of SentencePiece pieces (the model's embedding table may be padded larger)."""
        return self.sp.get_piece_size()

    pad_id = PAD_ID
    eos_id = EOS_ID
    unk_id = UNK_ID
    decoder_start_id = DECODER_START_ID

    def encode(self, text: str, *, add_eos: bool = False) -> list[int]:
        ids = self.sp.encode(text)
        return [*ids, EOS_ID] if add_eos else ids

    def encode_batch(
        self, texts: Sequence[str], *, max_len: int | None = None, add_eos: bool = True
    ) -> np.ndarray:
        """int32 `[B, L]`, right-padded with 0; truncated to `max_len` keeping the final EOS.

        `L` is `max_len` when given, else the longest sequence.
        """
        seqs = [self.sp.encode(t) for t in texts]
        if add_eos:
            seqs = [[*s, EOS_ID] for s in seqs]
        length = max_len if max_len is not None else max((len(s) for s in seqs), default=0)
        out = np.full((len(seqs), length), PAD_ID, np.int32)
        for i, s in enumerate(seqs):
            if len(s) > length:
                s = s[: length - 1] + [EOS_ID] if add_eos and length > 0 else s[:length]
            out[i, : len(s)] = s
        return out

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids` up to the first EOS; pad ids are dropped, `<0x0A>` becomes "\\n"."""
        kept = []
        for i in ids:
            i = int(i)
            if i == EOS_ID:
                break
            if i != PAD_ID:
                if not 0 <= i < self.vocab_size:
                    # Ids past the SentencePiece size exist in padded embedding tables (50244 for
                    # Pix2Struct): decode them as UNK rather than crash.
                    i = UNK_ID
                kept.append(i)
        return fix_newlines(self.sp.decode(kept))

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        return [self.decode(row) for row in batch]


# SentencePiece files a checkpoint directory may hold (T5X/pix2struct release, HF T5).
SENTENCEPIECE_FILES = ("sentencepiece.model", "spiece.model", "spm.model")


def open_vocabulary(path: str):
    """The seq2seq vocabulary at `path`: a SentencePiece `.model` file (T5 / Pix2Struct
    conventions, `Vocabulary`), or BART's byte-level BPE (`tokenizer.json`, or `vocab.json` +
    `merges.txt`; chartjax/data/bpe.py). A directory is searched for either (a HF checkpoint
    directory carries its tokenizer files)."""
    from chartjax.data import bpe

    if not os.path.exists(path):
        raise FileNotFoundError(f"vocabulary file not found: {path}")
    if bpe.is_bpe(path):
        return bpe.BpeVocabulary(path)
    if os.path.isdir(path):
        for name in SENTENCEPIECE_FILES:
            if os.path.isfile(os.path.join(path, name)):
                return Vocabulary(os.path.join(path, name))
        raise FileNotFoundError(
            f"{path}: no vocabulary files (looked for {', '.join(SENTENCEPIECE_FILES)}, "
            f"{bpe.TOKENIZER_JSON}, {bpe.VOCAB_JSON} + {bpe.MERGES_TXT})"
        )
    return Vocabulary(path)
