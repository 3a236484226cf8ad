"""BART's byte-level BPE (chartjax/data/bpe.py, through `tokenizers`) gives HF `BartTokenizer`'s
ids on fixed claims, tables and summaries (numbers, unicode, empty cells, "<s>" in the text),
from vocab.json + merges.txt and from the tokenizer.json HF writes; truncation keeps `<s>` and
`</s>` as HF's `truncation=True`; decoding equals HF's `decode(skip_special_tokens=True)` and
stops at `</s>`; `open_vocabulary` tells BPE from SentencePiece."""

import numpy as np
import pytest

from chartjax.data import bpe, vocab
from chartjax.testing import tiny_hf
from tests.data.tokenizer_texts import CLAIMS, SUMMARIES, TABLES

transformers = pytest.importorskip("transformers")
TEXTS = CLAIMS + TABLES + SUMMARIES


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """vocab.json + merges.txt (chartjax's tiny writer), and the tokenizer.json HF saves."""
    d = tmp_path_factory.mktemp("bpe")
    tiny_hf.write_bpe(str(d / "files"))
    hf = transformers.BartTokenizer.from_pretrained(str(d / "files"))
    hf.save_pretrained(str(d / "json"))
    return {"files": str(d / "files"), "json": str(d / "json"), "hf": hf}


@pytest.mark.parametrize("which", ["files", "json"])
def test_ids_equal_hf(files, which):
    ours = bpe.BpeVocabulary(files[which])
    hf = files["hf"]
    for text in TEXTS:
        assert ours.encode(text, add_eos=True) == hf(text)["input_ids"], text
        assert ours.encode(text) == hf(text, add_special_tokens=False)["input_ids"], text
    for max_len in (5, 16, 64):
        got = ours.encode_batch(TEXTS, max_len=max_len)
        want = hf(TEXTS, max_length=max_len, truncation=True, padding="max_length")["input_ids"]
        np.testing.assert_array_equal(got, np.asarray(want))
    assert (ours.bos_id, ours.pad_id, ours.eos_id) == (0, 1, 2)
    assert ours.vocab_size == len(hf)


def test_decode_equals_hf_and_stops_at_eos(files):
    ours, hf = bpe.BpeVocabulary(files["files"]), files["hf"]
    for text in TEXTS:
        ids = hf(text)["input_ids"]
        if "</s>" in text:  # ours stops at the first </s> (a decoder's end), HF does not
            ids = ids[: ids.index(2, 1)] + [2]
        assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=True)
    ids = hf("Größe 12.5%")["input_ids"]  # <s> ... </s>
    # A decoder's output: forced <s>, the text, </s>, then padding (0 after EOS, decoding.py).
    out = ids[:] + [7, 8, 0, 0]
    assert ours.decode(out) == "Größe 12.5%"
    # HF generate's output begins with the decoder start </s>: not an end.
    assert ours.decode([2, *ids]) == "Größe 12.5%"
    assert ours.decode([ours.vocab_size + 5, *ids]) == "Größe 12.5%"  # padded table rows


def test_start_id_from_config(tmp_path, files):
    import json
    import shutil

    assert bpe.BpeVocabulary(files["files"]).decoder_start_id == 2  # BART's </s>
    d = shutil.copytree(files["files"], tmp_path / "ckpt")
    (d / "config.json").write_text(json.dumps({"decoder_start_token_id": 0}))
    assert bpe.BpeVocabulary(str(d)).decoder_start_id == 0


def test_open_vocabulary_tells_the_formats_apart(files, tmp_path):
    assert isinstance(vocab.open_vocabulary(files["files"]), bpe.BpeVocabulary)
    assert isinstance(vocab.open_vocabulary(files["json"] + "/tokenizer.json"), bpe.BpeVocabulary)
    with pytest.raises(FileNotFoundError, match="no vocabulary files"):
        vocab.open_vocabulary(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="vocabulary file not found"):
        vocab.open_vocabulary(str(tmp_path / "nope.model"))
    (tmp_path / "vocab.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="merges.txt"):
        bpe.BpeVocabulary(str(tmp_path / "vocab.json"))
