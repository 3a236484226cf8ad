"""SentencePiece vocabulary: a tiny model trained at test time by tools/train_vocab.py."""

import json
import random

import numpy as np
import pytest

from chartjax.data import vocab as vocab_lib
from chartjax.tools import train_vocab

WORDS = [
    "chart",
    "bar",
    "line",
    "value",
    "year",
    "sales",
    "price",
    "the",
    "of",
    "and",
    "2019",
    "12.5",
    "Generate",
    "table",
    "|",
    "header",
    "TITLE",
    "x",
    "y",
]


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    rng = random.Random(0)
    d = tmp_path_factory.mktemp("vocab")
    recs = []
    for i in range(200):
        rows = [" | ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(3)]
        recs.append({"id": i, "table": "\n".join(rows), "caption": " ".join(rng.sample(WORDS, 6))})
    jsonl = d / "data.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in recs))
    txt = d / "text.txt"
    txt.write_text("".join(r["caption"] + "\n" for r in recs))
    return d, jsonl, txt


@pytest.fixture(scope="session")
def vocab(corpus):
    d, jsonl, _ = corpus
    train_vocab.main(
        [
            "--input",
            str(jsonl),
            "--field",
            "table",
            "--field",
            "caption",
            "--out",
            str(d / "spm"),
            "--vocab_size",
            "300",
        ]
    )
    return vocab_lib.Vocabulary(str(d / "spm.model"))


def test_special_ids(vocab):
    sp = vocab.sp
    assert (sp.pad_id(), sp.eos_id(), sp.unk_id(), sp.bos_id()) == (0, 1, 2, -1)
    assert (vocab.pad_id, vocab.eos_id, vocab.decoder_start_id) == (0, 1, 0)
    assert vocab.vocab_size == 300
    assert vocab.byte_fallback


def test_newline_is_byte_fallback_and_round_trips(vocab):
    text = "year | sales\n2019 | 12.5\nbar é"
    ids = vocab.encode(text)
    pieces = [vocab.sp.id_to_piece(i) for i in ids]
    assert pieces.count("<0x0A>") == 2
    assert "\n" not in "".join(pieces)  # no piece holds a raw newline
    assert vocab.decode(ids) == text


def test_encode_batch_pads_truncates_and_decodes(vocab):
    texts = ["bar chart", "the sales of the year and the price of the value"]
    full = vocab.encode_batch(texts)
    n0, n1 = len(vocab.encode(texts[0])), len(vocab.encode(texts[1]))
    assert full.dtype == np.int32 and full.shape == (2, max(n0, n1) + 1)
    assert full[0, n0] == 1 and (full[0, n0 + 1 :] == 0).all()
    assert full[1, n1] == 1
    assert vocab.decode_batch(full) == texts
    cut = vocab.encode_batch(texts, max_len=4)
    assert cut.shape == (2, 4) and cut[1, 3] == 1
    assert list(cut[1, :3]) == vocab.encode(texts[1])[:3]
    # Decoding stops at the first EOS and skips pads, ids past the piece table decode as UNK.
    assert vocab.decode([*vocab.encode("bar"), 0, 1, *vocab.encode("line")]) == "bar"
    assert vocab.decode([vocab.vocab_size + 5]) == vocab.sp.decode([2])


def test_fix_newlines_for_hf_output():
    assert vocab_lib.fix_newlines("a | b <0x0A> c | d") == "a | b \n c | d"


def test_text_file_input_and_errors(corpus, tmp_path):
    d, jsonl, txt = corpus
    lines = list(train_vocab.iter_texts([str(txt)]))
    assert len(lines) == 200 and "\n" not in "".join(lines)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"table": "a"}\n{"caption": "b"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: missing field 'table'"):
        list(train_vocab.iter_texts([str(bad)], ["table"]))
    bad.write_text('{"table": "a"}\nnot json\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: invalid JSON"):
        list(train_vocab.iter_texts([str(bad)], ["table"]))
    with pytest.raises(ValueError, match="needs --field"):
        list(train_vocab.iter_texts([str(bad)]))


def test_bad_vocab_files(tmp_path, corpus):
    with pytest.raises(FileNotFoundError, match="nope.model"):
        vocab_lib.Vocabulary(str(tmp_path / "nope.model"))
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="junk.model"):
        vocab_lib.Vocabulary(str(junk))
    # A model with other special ids (SentencePiece defaults: unk 0, bos 1, eos 2) is refused.
    import sentencepiece as spm

    _, _, txt = corpus
    spm.SentencePieceTrainer.train(
        input=str(txt),
        model_prefix=str(tmp_path / "dflt"),
        vocab_size=60,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    with pytest.raises(ValueError, match="special ids"):
        vocab_lib.Vocabulary(str(tmp_path / "dflt.model"))
