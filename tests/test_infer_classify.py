"""`chartjax-infer` on the DeBERTa, TAPAS and BART families, from HF checkpoint directories
alone (family, size, labels and tokenizer from the checkpoint's own files; no --vocab, no gin):

* `--task classify`: `scores` equal HF PyTorch's logits (fp32, within 1e-4) on the same claims
  and tables, batched with a padded last batch; `prediction` is the checkpoint's id2label name
  of the argmax; DeBERTa reads a text pair (`--pair_template`), TAPAS a table field
  (`--table_field`, linearized text or {header, rows}); a chartjax-format copy gives the same
  rows; an input TAPAS cannot encode stops the run, or is skipped and counted with --skip_bad;
* `--task text` on BART: the text of HF `generate` (greedy, num_beams 1, no n-gram blocking,
  the checkpoint's forced BOS/EOS), decoded by HF's tokenizer;
* a family that does not fit the task is refused."""

import json

import numpy as np
import pytest

from chartjax.testing import tiny_hf
from chartjax.tools import convert_checkpoint
from chartjax.tools import infer as infer_cli
from tests.data.tokenizer_texts import CLAIMS, TABLES

# Its fixtures build and compile models (or train a run) for every test: the whole file is slow.
pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

MAX_LEN = {"deberta": 48, "tapas": 96}
MAX_NEW = 8
# Claims x tables: numbers, unicode, empty cells; 7 rows at batch 3 (a padded last batch).
ROWS = [
    {"id": f"r{i}", "claim": CLAIMS[i % len(CLAIMS)], "table": TABLES[i % 4]} for i in range(6)
] + [
    {
        "id": "dict",
        "claim": "Coal is 33%.",
        "table": {"header": ["Source", "Share"], "rows": [["Coal", "33%"], ["Hydro", ""]]},
    }
]
TABLE_TEXT = {"dict": "Source | Share\nCoal | 33%\nHydro | "}


@pytest.fixture(scope="module")
def ckpts(tiny_hf_checkpoints):
    return tiny_hf_checkpoints


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    path = tmp_path_factory.mktemp("infer_rows") / "rows.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), "utf-8")
    return path


def run_infer(capsys, *argv) -> dict:
    infer_cli.main([str(a) for a in argv])
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def rows_of(out_dir) -> list[dict]:
    return [json.loads(line) for line in (out_dir / "predictions.jsonl").read_text().splitlines()]


def _table_text(row):
    return TABLE_TEXT.get(row["id"], row["table"])


def _hf_logits(family, path):
    """HF PyTorch on each row alone (no padding), as a user would run it."""
    from chartjax.data import classifier_inputs

    out = []
    if family == "deberta":
        tok = transformers.DebertaV2Tokenizer.from_pretrained(path)
        model = transformers.DebertaV2ForSequenceClassification.from_pretrained(path).eval()
        for r in ROWS:
            enc = tok(
                r["claim"],
                _table_text(r),
                truncation=True,
                max_length=MAX_LEN[family],
                return_tensors="pt",
            )
            with torch.no_grad():
                out.append(model(**enc).logits[0].numpy())
    else:
        tok = transformers.TapasTokenizer.from_pretrained(path)
        model = transformers.TapasForSequenceClassification.from_pretrained(path).eval()
        for r in ROWS:
            frame = classifier_inputs.table_frame(r["table"])
            enc = tok(
                table=frame,
                queries=[r["claim"]],
                truncation=True,
                max_length=MAX_LEN[family],
                return_tensors="pt",
            )
            with torch.no_grad():
                out.append(model(**enc).logits[0].numpy())
    return np.stack(out), [model.config.id2label[i] for i in range(model.config.num_labels)]


@pytest.mark.parametrize("family", ["deberta", "tapas"])
def test_classify_scores_equal_hf(family, ckpts, inputs, tmp_path, capsys):
    field = ["--pair_template", "{table}"] if family == "deberta" else ["--table_field", "table"]
    args = ["--task", "classify", "--template", "{claim}", *field, "--inputs", inputs]
    common = ["--max_input_len", MAX_LEN[family], "--batch_size", 3, "--dtype", "float32"]
    summary = run_infer(
        capsys, *args, "--checkpoint", ckpts[family], "--out", tmp_path / "a", *common
    )
    assert summary["examples"] == len(ROWS) and summary["format"] == "hf"
    got = rows_of(tmp_path / "a")
    ref, names = _hf_logits(family, ckpts[family])
    scores = np.asarray([r["scores"] for r in got])
    assert [r["id"] for r in got] == [r["id"] for r in ROWS]
    np.testing.assert_allclose(scores, ref, atol=1e-4, rtol=0)
    assert np.ptp(ref, axis=0).max() > 0.05  # the logits depend on the input
    assert [r["prediction"] for r in got] == [names[i] for i in np.argmax(ref, -1)]
    assert names == list(tiny_hf.LABELS[family])
    if family == "deberta":
        return
    # The chartjax-format copy (labels and tokenizer files carried along) gives the same rows.
    convert_checkpoint.main(
        ["--from", "hf", "--to", "chartjax", ckpts[family], str(tmp_path / "cj")]
    )
    capsys.readouterr()
    run_infer(capsys, *args, "--checkpoint", tmp_path / "cj", "--out", tmp_path / "b", *common)
    again = rows_of(tmp_path / "b")
    assert [r["prediction"] for r in again] == [r["prediction"] for r in got]
    np.testing.assert_allclose([r["scores"] for r in again], scores, atol=1e-6)


def test_tapas_bad_input_stops_or_is_skipped(ckpts, tmp_path, capsys):
    rows = ROWS[:2] + [{"id": "long", "claim": " ".join(["users"] * 120), "table": TABLES[0]}]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = [
        "--task", "classify", "--checkpoint", ckpts["tapas"], "--inputs", src,
        "--template", "{claim}", "--table_field", "table", "--max_input_len", MAX_LEN["tapas"],
        "--dtype", "float32", "--out", tmp_path / "o",
    ]  # fmt: skip
    with pytest.raises(SystemExit):
        infer_cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert f"{src}:3" in err and "cannot encode the table" in err and "--skip_bad" in err
    summary = run_infer(capsys, *argv, "--skip_bad")
    assert summary["skipped"] == 1 and summary["examples"] == 2


def test_bart_text_equals_hf_generate(ckpts, inputs, tmp_path, capsys):
    path = ckpts["bart"]
    summary = run_infer(
        capsys,
        "--task", "text", "--checkpoint", path, "--inputs", inputs, "--template", "{claim}",
        "--max_input_len", 40, "--max_decode_len", MAX_NEW, "--batch_size", 3,
        "--dtype", "float32", "--out", tmp_path / "o",
    )  # fmt: skip
    assert summary["examples"] == len(ROWS)
    tok = transformers.BartTokenizer.from_pretrained(path)
    model = transformers.BartForConditionalGeneration.from_pretrained(path).eval()
    want = []
    for r in ROWS:
        enc = tok(r["claim"], truncation=True, max_length=40, return_tensors="pt")
        with torch.no_grad():
            out = model.generate(
                **enc, num_beams=1, do_sample=False, max_new_tokens=MAX_NEW, no_repeat_ngram_size=0
            )
        want.append(tok.decode(out[0], skip_special_tokens=True))
    got = [r["prediction"] for r in rows_of(tmp_path / "o")]
    assert got == want
    assert sum(bool(t.strip()) for t in want) >= 3  # the tiny model writes text


def test_family_must_fit_the_task(ckpts, inputs, tmp_path, capsys):
    base = ["--inputs", inputs, "--template", "{claim}", "--out", tmp_path / "o"]
    with pytest.raises(SystemExit):
        infer_cli.main(
            [str(a) for a in ["--task", "classify", "--checkpoint", ckpts["bart"], *base]]
        )
    err = capsys.readouterr().err
    assert "BART (text-to-text) model" in err and "--task classify" in err
    with pytest.raises(SystemExit):
        infer_cli.main(
            [str(a) for a in ["--task", "text", "--checkpoint", ckpts["deberta"], *base]]
        )
    err = capsys.readouterr().err
    assert "encoder classifier" in err and "--task classify" in err
