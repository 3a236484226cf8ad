"""DeBERTa and TAPAS inputs (chartjax/data/classifier_inputs.py) from a checkpoint's own files:

* the pinned sentencepiece (< 0.2.2, pyproject.toml) lets transformers 5 convert DeBERTa-v3's
  spm.model (0.2.3's generated protobuf code wants protobuf 7; TensorFlow pins 6.33), and the
  converted tokenizer cuts text into the SentencePiece model's own pieces (where HF 5's NFC
  normalization and whitespace folding agree with the model's NFKC);
* the ids, masks and token types equal HF `DebertaV2Tokenizer(claim, table, truncation=True,
  max_length=L)` padded to L, on fixed claims and tables (numbers, unicode, empty cells);
* TAPAS features equal `TapasTokenizer(table=<DataFrame as the ChartCheck authors build it>,
  queries=[claim], padding="max_length", truncation=True)`, for DePlot-linearized tables and
  `{header, rows}`; a table that cannot be encoded is a BadInput."""

import re
import unicodedata

import numpy as np
import pytest

from chartjax.data import classifier_inputs as ci
from chartjax.testing import tiny_hf
from tests.data.tokenizer_texts import CLAIMS, SUMMARIES, TABLES

transformers = pytest.importorskip("transformers")
pd = pytest.importorskip("pandas")
L = 48
LT = 128  # TAPAS: query + header must fit


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    d = tmp_path_factory.mktemp("tok")
    tiny_hf.write_sentencepiece(str(d / "deberta"))
    tiny_hf.write_wordpiece(str(d / "tapas"))
    return {"deberta": str(d / "deberta"), "tapas": str(d / "tapas")}


def test_pinned_sentencepiece_converts_for_transformers(dirs):
    import sentencepiece as spm

    major, minor, patch = (int(x) for x in spm.__version__.split(".")[:3])
    assert (major, minor, patch) < (0, 2, 2), spm.__version__
    hf = transformers.DebertaV2Tokenizer.from_pretrained(dirs["deberta"])  # the conversion
    sp = spm.SentencePieceProcessor(model_file=dirs["deberta"] + "/spm.model")
    same_norm = [
        t
        for t in CLAIMS + TABLES + SUMMARIES
        if unicodedata.normalize("NFKC", t) == unicodedata.normalize("NFC", t)
        and not re.search(r"\s{2,}|[\n\r\t]", t)
    ]
    assert len(same_norm) >= 8
    for text in same_norm:
        assert hf(text, add_special_tokens=False)["input_ids"] == sp.encode(text), text
    assert (hf.pad_token_id, hf.cls_token_id, hf.sep_token_id, hf.unk_token_id) == (0, 1, 2, 3)


def test_deberta_pairs_equal_hf(dirs):
    ours = ci.ClassifierTokenizer(dirs["deberta"], "deberta", L)
    hf = transformers.DebertaV2Tokenizer.from_pretrained(dirs["deberta"])
    pairs = [(c, t) for c in CLAIMS for t in TABLES] + [(s, None) for s in SUMMARIES]
    for claim, table in pairs:
        got = ours(claim, table)
        want = hf(
            claim,
            table,
            truncation=True,
            max_length=L,
            padding="max_length",
            return_token_type_ids=True,
        )
        for k in ci.FEATURES:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{k}: {claim!r} / {table!r}")
            assert got[k].shape == (L,) and got[k].dtype == np.int32
    long = ours(SUMMARIES[-1], TABLES[0])  # both cut, longest first
    assert long["attention_mask"].all() and list(long["input_ids"]).count(2) == 2


def _authors_frame(text: str):
    """table_based_classification_tapas.py's TableDataset.__getitem__, on DePlot's table text."""
    table = text.replace("<0x0A>", "\n").splitlines()
    for i in range(len(table)):
        table[i] = str(table[i]).split(" | ")
    lengths = [len(entry) for entry in table if entry]
    if not lengths:
        return pd.DataFrame({"": []}).astype(str)
    width = max(lengths)
    for i, entry in enumerate(table):
        if entry:
            while len(entry) < width:
                entry.append("")
            table[i] = entry
        else:
            table[i] = ["" for _ in range(width)]
    if len(table) > 2:
        return pd.DataFrame(table[2:], columns=table[1]).astype(str)
    return pd.DataFrame({"": []}).astype(str)


def test_tapas_tables_equal_the_authors_tokenization(dirs):
    ours = ci.ClassifierTokenizer(dirs["tapas"], "tapas", LT)
    hf = transformers.TapasTokenizer.from_pretrained(dirs["tapas"])
    for claim in CLAIMS:
        for table in TABLES:
            if table and not table.startswith("TITLE"):
                table = "TITLE | \n" + table  # DePlot's tables open with their title line
            frame = ci.table_frame(table)
            pd.testing.assert_frame_equal(frame, _authors_frame(table))
            got = ours(claim, table=table)
            want = hf(
                table=_authors_frame(table),
                queries=[claim],
                padding="max_length",
                truncation=True,
                max_length=LT,
            )
            for k in ci.FEATURES:
                np.testing.assert_array_equal(got[k], want[k][0], err_msg=f"{k}: {table!r}")
            assert got["token_type_ids"].shape == (LT, 7)
    # Column and row ids, ranks and numeric relations are set for a numeric table.
    got = ours("12.5 in 2019", table=TABLES[0])
    assert got["token_type_ids"][:, 1].max() == 2 and got["token_type_ids"][:, 2].max() == 3
    assert got["token_type_ids"][:, 4].max() > 0 and got["token_type_ids"][:, 6].max() > 0


def test_table_frame_forms(dirs):
    as_dict = ci.table_frame({"header": ["Year", "Value"], "rows": [["2019", "12.5"], ["2020"]]})
    as_text = ci.table_frame("TITLE | t\nYear | Value\n2019 | 12.5\n2020")
    pd.testing.assert_frame_equal(as_dict, as_text)
    assert list(as_dict.iloc[1]) == ["2020", ""]
    assert ci.table_frame("TITLE | t\nYear | Value").empty  # a header without rows
    assert ci.table_frame("").empty
    ours = ci.ClassifierTokenizer(dirs["tapas"], "tapas", L)
    with pytest.raises(ci.BadInput, match="needs a table"):
        ours("a claim")
    with pytest.raises(ci.BadInput, match="cannot encode the table"):
        ours(" ".join(["users"] * 200), table=TABLES[0])
    with pytest.raises(ValueError, match="family"):
        ci.ClassifierTokenizer(dirs["tapas"], "bert", L)
