"""Exports are complete checkpoints (issue 27 item 11): `chartjax-convert --to hf|chartjax` writes
the tokenizer and processor files, from --vocab or from the vocabulary the run's config.gin
names, so HF's Pix2StructProcessor / AutoTokenizer load the export alone and give chartjax's
ids, and chartjax reads its vocabulary without --vocab (tests/test_infer_exports.py runs
chartjax-infer on exports)."""

import json
import os
from unittest import mock

import gin
import numpy as np
import pytest
from flax import nnx

from chartjax import checkpoint as ckpt_lib
from chartjax import config as config_lib
from chartjax.data.vocab import Vocabulary
from chartjax.interop import formats, sentencepiece_json, t5x
from chartjax.models import t5 as t5_lib
from chartjax.models import tiny
from chartjax.models.t5 import pix2struct as p2s_lib
from chartjax.testing import tiny_hf
from chartjax.tools import convert_checkpoint, train_vocab

pytest.importorskip("safetensors")

VOCAB_SIZE = 400
_CORPUS = [
    "Generate underlying data table of the figure below:",
    "TITLE | Sales by year 2019 2020 2021 | Country | Value | Share of respondents",
    "the votes rose fell prices sales 0 1 2 3 4 5 6 7 8 9 10 % $ , . Yes No",
]
# Covered words, a DePlot table (newlines are byte pieces), spaces SentencePiece collapses,
# characters only byte fallback encodes, NFKC-folded ones, the empty text.
PROBES = [
    "Generate underlying data table of the figure below:",
    "TITLE | Sales by year\nYear | Value\n2019 | 10 %\n2020 | 12 %",
    "  the   votes  rose ",
    "héllo wörld 😀 東京",
    "ｆｕｌｌ width ① ﬁ",
    "a\tb\n\nc",
    "",
]
P2S_FILES = [
    "preprocessor_config.json",
    "special_tokens_map.json",
    "spiece.model",
    "tokenizer.json",
    "tokenizer_config.json",
]


@pytest.fixture(scope="module")
def spm_file(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("vocab") / "spm"
    return train_vocab.train(_CORPUS * 8, str(out), vocab_size=VOCAB_SIZE, hard_vocab_limit=False)


@pytest.fixture(scope="module")
def p2s_model():
    return p2s_lib.build(tiny.tiny_pix2struct(vocab_size=VOCAB_SIZE), 0)


@pytest.fixture(scope="module")
def p2s_t5x(tmp_path_factory, p2s_model) -> str:
    path = str(tmp_path_factory.mktemp("t5x") / "checkpoint_3")
    t5x.save(p2s_model, path, step=3)
    return path


def convert(capsys, *argv) -> dict:
    convert_checkpoint.main([str(a) for a in argv])
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def read_json(path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def run_workdir(path, p2s_model, bindings) -> str:
    """A train run's workdir: the tiny Pix2Struct smoke recipe's config.gin with `bindings`
    appended (the last binding wins, as in gin), and its parameters at step 5."""
    gin.clear_config()
    try:
        config_lib.parse_gin(
            ["tasks/pix2struct_synthetic_smoke.gin"],
            [f"Pix2StructConfig.vocab_size = {VOCAB_SIZE}", "Pix2StructConfig.dtype = 'float32'"],
        )
        os.makedirs(path)
        with open(os.path.join(path, "config.gin"), "w") as f:
            f.write(gin.config_str() + "\n" + "\n".join(bindings) + "\n")
    finally:
        gin.clear_config()
    ck = ckpt_lib.Checkpointer(str(path))
    params = nnx.to_pure_dict(nnx.state(p2s_model, nnx.Param))
    ck.save(5, {"step": np.int32(5), "params": params}, {"step": 5}, force=True)
    ck.close()
    return str(path)


def test_tokenizer_json_encodes_and_decodes_as_sentencepiece(spm_file):
    tok = sentencepiece_json.build(spm_file)
    vocab = Vocabulary(spm_file)
    assert vocab.byte_fallback
    for text in PROBES:
        ids = vocab.encode(text, add_eos=True)
        assert tok.encode(text).ids == ids, text
        assert tok.decode(ids, skip_special_tokens=True) == vocab.decode(ids), text


def test_pix2struct_export_loads_in_hf_processor_with_chartjax_ids(
    p2s_t5x, spm_file, tmp_path, capsys
):
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "deplot_hf"
    line = convert(
        capsys,
        *("--from", "t5x", "--to", "hf", p2s_t5x, out, "--vocab", spm_file),
        *("--is_vqa", "true", "--max_patches", "64"),
    )
    assert line["files"] == sorted([*P2S_FILES, "DejaVuSans.ttf"])  # is_vqa: its header font
    assert (out / "spiece.model").read_bytes() == open(spm_file, "rb").read()
    assert read_json(out / "config.json")["is_vqa"] is True

    processor = transformers.Pix2StructProcessor.from_pretrained(str(out))
    image = processor.image_processor
    assert (image.is_vqa, image.max_patches) == (True, 64)
    assert (image.patch_size["height"], image.patch_size["width"]) == (4, 4)
    vocab = Vocabulary(spm_file)
    auto = transformers.AutoTokenizer.from_pretrained(str(out))
    for tok in (processor.tokenizer, auto):
        assert len(tok) == vocab.vocab_size
        assert (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2)
        for text in PROBES:
            ids = vocab.encode(text, add_eos=True)
            assert tok(text).input_ids == ids, text
            assert tok.decode(ids, skip_special_tokens=True) == vocab.decode(ids), text
    model = transformers.Pix2StructForConditionalGeneration.from_pretrained(str(out))
    assert model.config.is_vqa is True
    # HF renders headers in Arial fetched from the Hub unless given a font file (issue 44 item
    # 23): the export carries one, and HF's own header renderer runs offline with it.
    from transformers.models.pix2struct import image_processing_pil_pix2struct as hf_image

    with mock.patch.dict(os.environ, {"HF_HUB_OFFLINE": "1"}):
        header = hf_image.render_text("Generate a table", font_path=str(out / "DejaVuSans.ttf"))
    assert header.size[0] > 0 and np.asarray(header).min() == 0  # black text was drawn


def test_t5_export_loads_in_auto_tokenizer_with_chartjax_ids(spm_file, tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    src = str(tmp_path / "t5" / "checkpoint_1")
    t5x.save(t5_lib.build(tiny.tiny_t5(vocab_size=VOCAB_SIZE), 0), src, step=1)
    out = tmp_path / "t5_hf"
    line = convert(capsys, "--from", "t5x", "--to", "hf", src, out, "--vocab", spm_file)
    assert line["files"] == [f for f in P2S_FILES if f != "preprocessor_config.json"]
    assert "processor_class" not in read_json(out / "tokenizer_config.json")
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    vocab = Vocabulary(spm_file)
    for text in PROBES:
        assert tok(text).input_ids == vocab.encode(text, add_eos=True), text


def test_a_run_export_carries_the_vocabulary_and_patches_of_its_config(
    spm_file, p2s_model, tmp_path, capsys
):
    workdir = run_workdir(
        tmp_path / "run",
        p2s_model,
        [
            f"Features.vocab_file = '{spm_file}'",
            "Features.max_patches = 96",
            "Features.modality = 'image'",
            "train.task = 'deplot'",
        ],
    )
    for dst in ("hf", "chartjax"):
        out = tmp_path / dst
        line = convert(capsys, "--from", "chartjax", "--to", dst, workdir, out)
        assert line["files"] == sorted([*P2S_FILES, "DejaVuSans.ttf"])  # DePlot: prompts
        pre = read_json(out / "preprocessor_config.json")
        assert (pre["is_vqa"], pre["max_patches"], pre["patch_size"]) == (
            True,
            96,
            {"height": 4, "width": 4},
        )
        # What chartjax-infer reads without --vocab: the SentencePiece model, not the
        # tokenizer.json (which chartjax.data.vocab would take for BART's BPE).
        assert formats.vocabulary(formats.locate(str(out))) == str(out / "spiece.model")
    assert read_json(tmp_path / "hf" / "config.json")["is_vqa"] is True
    # The run itself: the vocabulary its config.gin names.
    assert formats.vocabulary(formats.locate(workdir)) == spm_file


def test_flags_override_the_run_and_a_missing_vocabulary_is_named(
    spm_file, p2s_model, tmp_path, capsys
):
    gone = str(tmp_path / "gone.model")
    workdir = run_workdir(
        tmp_path / "run", p2s_model, [f"Features.vocab_file = '{gone}'", "train.task = 'deplot'"]
    )
    with pytest.raises(SystemExit):
        convert(capsys, "--from", "chartjax", "--to", "hf", workdir, tmp_path / "a")
    err = capsys.readouterr().err
    assert err.startswith("chartjax-convert: ") and f"names the vocabulary {gone}" in err
    assert not (tmp_path / "a").exists()
    out = tmp_path / "b"
    convert(
        capsys,
        *("--from", "chartjax", "--to", "hf", workdir, out, "--vocab", spm_file),
        *("--is_vqa", "false"),
    )
    pre = read_json(out / "preprocessor_config.json")
    assert (pre["is_vqa"], pre["max_patches"]) == (False, 2048)  # flag; HF's default


def test_an_export_without_a_known_vocabulary_says_so(p2s_t5x, tmp_path, capsys):
    out = tmp_path / "hf"
    convert_checkpoint.main(["--from", "t5x", "--to", "hf", p2s_t5x, str(out)])
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip())["files"] == ["preprocessor_config.json"]
    assert "names no vocabulary" in captured.err and "give --vocab" in captured.err
    assert read_json(out / "preprocessor_config.json")["is_vqa"] is False
    with pytest.raises(SystemExit):
        convert_checkpoint.main(
            ["--from", "t5x", "--to", "hf", p2s_t5x, str(tmp_path / "x"), "--vocab", "nope"]
        )
    assert "--vocab not found: nope" in capsys.readouterr().err


@pytest.mark.parametrize("family", ["bart", "deberta", "tapas"])
def test_hf_family_tokenizer_files_travel_through_chartjax(family, tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    src = tiny_hf.tiny_checkpoint(family, str(tmp_path / "src"))
    convert(capsys, "--from", "hf", "--to", "chartjax", src, tmp_path / "cj")
    convert(capsys, "--from", "chartjax", "--to", "hf", tmp_path / "cj", tmp_path / "hf")
    want = transformers.AutoTokenizer.from_pretrained(src)
    got = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    assert type(got) is type(want)
    for text in tiny_hf.TEXTS:
        assert got.convert_tokens_to_ids(got.tokenize(text)) == want.convert_tokens_to_ids(
            want.tokenize(text)
        )
