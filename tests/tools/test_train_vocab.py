"""tools/train_vocab.py: split_digits gives one piece per digit (the Pix2Struct learning check
reads printed values digit by digit, issue 15 item 5)."""

from __future__ import annotations

import json

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


# ---------------------------------------------------------------- chartjax-train-vocab --------


def test_the_console_script_is_declared():
    import tomllib
    from pathlib import Path

    with open(Path(__file__).resolve().parents[2] / "pyproject.toml", "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts["chartjax-train-vocab"] == "chartjax.tools.train_vocab:main"


def _main(capsys, *argv) -> tuple[int, str, str]:
    try:
        train_vocab.main([str(a) for a in argv])
        code = 0
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_size_the_corpus_cannot_give_is_one_line_with_the_limit(tmp_path, capsys):
    """SentencePiece's internal errors (trainer_interface.cc) become what to change: the
    minimum is 3 special ids + 256 byte pieces + the corpus's characters; the maximum is what
    the corpus yields."""
    from chartjax.data.vocab import Vocabulary

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Year | 2019 | 42.5\nThe chart shows sales by country\n")
    chars = len(set("Year|2019425Thechartshowssalesbycountry.") | {"▁"})
    out = tmp_path / "spm"

    code, _, err = _main(capsys, "--input", corpus, "--out", out, "--vocab_size", 100)
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith(
        f"chartjax-train-vocab: error: --vocab_size 100 is too small: this corpus needs at "
        f"least {259 + chars} pieces (3 special ids, 256 byte-fallback pieces and the {chars} "
        "characters --character_coverage 0.9999 keeps)"
    )

    code, _, err = _main(capsys, "--input", corpus, "--out", out, "--vocab_size", 1000)
    assert code == 2 and len(err.splitlines()) == 1
    most = int(err.split("it yields at most ")[1].split()[0])
    assert err.startswith("chartjax-train-vocab: error: --vocab_size 1000 is too large for")
    assert 259 + chars <= most < 1000

    code, stdout, err = _main(capsys, "--input", corpus, "--out", out, "--vocab_size", most)
    assert code == 0, err
    assert json.loads(stdout)["vocab_size"] == most == Vocabulary(f"{out}.model").vocab_size
    code, stdout, _ = _main(
        capsys, "--input", corpus, "--out", out, "--vocab_size", 1000, "--soft_vocab_limit"
    )
    assert code == 0 and json.loads(stdout)["vocab_size"] <= most  # what the corpus gives


def test_a_bad_jsonl_record_is_one_line(tmp_path, capsys):
    data = tmp_path / "data.jsonl"
    data.write_text('{"caption": "a chart"}\n{"title": "no caption"}\n')
    code, _, err = _main(capsys, "--input", data, "--field", "caption", "--out", tmp_path / "spm")
    assert (code, err) == (2, f"chartjax-train-vocab: error: {data}:2: missing field 'caption'\n")


def test_the_cli_splits_digits(tmp_path, capsys):
    corpus = tmp_path / "tables.txt"
    rng = np.random.default_rng(1)
    corpus.write_text("\n".join(f"Year | {rng.integers(1960, 2020)}" for _ in range(300)))
    out = tmp_path / "spm"
    argv = ["--input", corpus, "--out", out, "--vocab_size", 300, "--soft_vocab_limit"]
    code, stdout, _ = _main(capsys, *argv, "--split_digits")
    assert code == 0
    sp = spm.SentencePieceProcessor(model_file=json.loads(stdout)["model"])
    assert [p.lstrip("\u2581") for p in sp.encode("1987", out_type=str) if p != "\u2581"] == [
        "1",
        "9",
        "8",
        "7",
    ]


def test_gemma_layout_is_what_the_paligemma_processor_reads(tmp_path):
    """`--gemma` (a from-scratch PaliGemma's tokenizer: tasks/paligemma_chartqa_lattice_toy.gin):
    Gemma's special ids and `<image>` at 5, as chartjax's PaliGemma processor finds them."""
    from chartjax.data import paligemma_inputs

    texts = [f"What is the value of Smart TVs in {y}? {y % 97}.5" for y in range(1960, 2020)]
    model = train_vocab.train(
        texts, str(tmp_path / "gemma"), vocab_size=300, hard_vocab_limit=False, gemma=True
    )
    proc = paligemma_inputs.Processor.for_training(model, 16)
    ids = (proc.pad_id, proc.eos_id, proc.bos_id, proc.image_token_id)
    assert ids == (0, 1, 2, 5)
    assert proc.decode(proc.tokenizer.encode("value of Smart TVs")) == "value of Smart TVs"
    # "|" and "&" are not in the texts: byte pieces. The space after them survives decoding
    # (it was lost, and DePlot's parser split no predicted row on " | ").
    table = "TITLE | \n1960 | 61.3\nTVs & more | -1.5"
    assert proc.tokenizer.id_of("<0x7C>") in proc.tokenizer.encode(table)
    assert proc.decode(proc.tokenizer.encode(table)) == table
    assert len(proc.tokenizer) == spm.SentencePieceProcessor(model_file=model).get_piece_size() + (
        len(paligemma_inputs.EXTRA)
    )


def test_gemma_images_give_the_processor_their_pixel_mean_and_std(tmp_path, capsys):
    """`--gemma --images`: preprocessor_config.json beside the model holds the images' per-channel
    mean and std, and the training processor standardizes with them."""
    from PIL import Image

    from chartjax.data import paligemma_inputs

    a, b = (200, 0, 50), (100, 255, 150)  # means 150 / 127.5 / 100, stds 50 / 127.5 / 50
    for name, color in (("a", a), ("b", b)):
        Image.new("RGB", (8, 8), color).save(tmp_path / f"{name}.png")
    corpus = tmp_path / "q.txt"
    corpus.write_text("\n".join(f"What is the value in {y}? {y % 97}" for y in range(1960, 2020)))
    out = tmp_path / "vocab" / "gemma"
    argv = ["--input", corpus, "--out", out, "--vocab_size", 300, "--soft_vocab_limit"]
    code, _, err = _main(capsys, *argv, "--images", str(tmp_path / "a.png"), "--image_size", 8)
    assert code == 2
    assert "--images writes a PaliGemma image processor file: it needs --gemma" in err
    code, stdout, _ = _main(
        capsys, *argv, "--gemma", "--images", str(tmp_path / "*.png"), "--image_size", 8
    )
    assert code == 0
    written = json.loads((tmp_path / "vocab" / "preprocessor_config.json").read_text())
    assert json.loads(stdout)["processor"] == str(tmp_path / "vocab" / "preprocessor_config.json")
    np.testing.assert_allclose(written["image_mean"], np.array([150, 127.5, 100]) / 255, atol=1e-6)
    np.testing.assert_allclose(written["image_std"], np.array([50, 127.5, 50]) / 255, atol=1e-6)
    proc = paligemma_inputs.Processor.for_training(str(out) + ".model", 8)
    x = paligemma_inputs.pixels(Image.new("RGB", (8, 8), a), proc.images)
    np.testing.assert_allclose(x[0, 0], [1.0, -1.0, -1.0], atol=1e-4)
