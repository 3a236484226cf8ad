"""tools/train_vocab.py: split_digits gives one piece per digit (the Pix2Struct learning check
reads printed values digit by digit, issue 15 item 5)."""

from __future__ import annotations

import numpy as np
import sentencepiece as spm

from chartjax.tools import train_vocab


def test_split_digits(tmp_path):
    rng = np.random.default_rng(0)
    texts = [f"Year | {rng.integers(1960, 2020)} | {rng.integers(10, 99)}.5" for _ in range(300)]
    pieces = {}
    for split in (False, True):
        model = train_vocab.train(
            texts,
            str(tmp_path / f"spm_{split}"),
            vocab_size=300,
            hard_vocab_limit=False,
            split_digits=split,
        )
        sp = spm.SentencePieceProcessor(model_file=model)
        pieces[split] = sp.encode("Year | 1987 | 42.5", out_type=str)
        assert sp.decode(sp.encode("Year | 1987 | 42.5")) == "Year | 1987 | 42.5"
    digits = [p.lstrip("\u2581") for p in pieces[True] if any(c.isdigit() for c in p)]
    assert digits == ["1", "9", "8", "7", "4", "2", "5"]  # "." and "▁" are pieces of their own
    assert any(sum(c.isdigit() for c in p) > 1 for p in pieces[False])  # merged otherwise
