"""The vocabulary is checked against the model's embedding rows (issue 27 item 3): a 500-piece
SentencePiece model with `vocab_size = 50244` trained at loss ln(50244) and predicted " ⁇ ".

chartjax-train and chartjax-eval refuse it in one line, exit status 2, before anything is built
or written (config.check_run_vocabulary, from parse_flags); chartjax-infer refuses it against
the checkpoint's config. More pieces than rows is always an error; more rows than
2 x pieces + 128 (the official checkpoints pad 32000 -> 32128 and 50000 -> 50244) unless
`vocabulary_check.allow_unused_ids = True`."""

import os

import gin
import numpy as np
import pytest
from PIL import Image

from chartjax import config as config_lib
from chartjax.tools import evaluate as eval_cli
from chartjax.tools import infer as infer_cli
from chartjax.tools import train as train_cli

RECIPE = "--gin_file=tasks/chartcheck_matcha_finetune_class.gin"  # Pix2Struct, 50244 rows
TEXT = [
    "Is the claim true? The chart shows sales by year 2019 2020 2021 in millions of dollars.",
    "TITLE | Share of respondents <0x0A> Country | Value <0x0A> France | 20% <0x0A> Spain | 35%",
]


@pytest.fixture(autouse=True)
def _clean_gin():
    gin.clear_config()
    yield
    gin.clear_config()


@pytest.fixture(scope="module")
def small_vocab(tmp_path_factory):
    """A SentencePiece model of a few hundred pieces, and its piece count."""
    import sentencepiece as spm

    from chartjax.tools import train_vocab

    d = tmp_path_factory.mktemp("vocab")
    path = train_vocab.train(TEXT * 20, str(d / "small"), vocab_size=400, hard_vocab_limit=False)
    return path, spm.SentencePieceProcessor(model_file=path).get_piece_size()


@pytest.mark.parametrize(
    "pieces,rows,ok",
    [
        (32000, 32128, True),  # T5 v1.1: cc_all.32000.100extra padded to a multiple of 128
        (50000, 50244, True),  # Pix2Struct
        (300, 728, True),  # 2 x 300 + 128
        (300, 729, False),
        (500, 50244, False),  # the run
        (400, 400, True),
        (401, 400, False),  # an id without a row
    ],
)
def test_the_rule(pieces, rows, ok):
    if ok:
        config_lib.check_vocabulary(pieces, rows, vocab="v", model="m")
    else:
        with pytest.raises(config_lib.ConfigError):
            config_lib.check_vocabulary(pieces, rows, vocab="v", model="m")
    if pieces <= rows:  # the binding allows any padding, never a missing row
        config_lib.check_vocabulary(pieces, rows, vocab="v", model="m", allow_unused_ids=True)
    else:
        with pytest.raises(config_lib.ConfigError, match="have no embedding"):
            config_lib.check_vocabulary(pieces, rows, vocab="v", model="m", allow_unused_ids=True)


@pytest.mark.parametrize("main,name", [(train_cli.main, "train"), (eval_cli.main, "eval")])
def test_train_and_eval_refuse_a_vocabulary_far_smaller_than_the_model(
    main, name, small_vocab, tmp_path, capsys
):
    vocab, pieces = small_vocab
    workdir = tmp_path / "run"
    status = main([RECIPE, f"--workdir={workdir}", f"--gin_bindings=VOCAB = '{vocab}'"])
    assert status == 2
    assert capsys.readouterr().err == (
        f"chartjax-{name}: error: Pix2StructConfig.vocab_size = 50244, but the vocabulary "
        f"{vocab} has only {pieces} pieces: {50244 - pieces} ids would never be targets "
        "(training starts at loss ln(50244) and predicts UNK); use the model's own vocabulary "
        f"or size the model to it (at most 2 x {pieces} + 128 = {2 * pieces + 128} rows), or "
        "bind vocabulary_check.allow_unused_ids = True\n"
    )
    assert not workdir.exists()


def test_more_pieces_than_rows_is_refused_and_the_binding_allows_padding(
    small_vocab, tmp_path, capsys
):
    vocab, pieces = small_vocab
    workdir = f"--workdir={tmp_path / 'run'}"
    status = train_cli.main(
        [
            RECIPE,
            workdir,
            f"--gin_bindings=VOCAB = '{vocab}'",
            "--gin_bindings=Pix2StructConfig.vocab_size = 256",
        ]
    )
    assert status == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "chartjax-train: error: Pix2StructConfig.vocab_size = 256, but the vocabulary "
        f"{vocab} has {pieces} pieces: ids 256 to {pieces - 1} have no embedding"
    )
    assert len(err.splitlines()) == 1
    gin.clear_config()
    # The recipe also requires INIT_PATH (parse_flags refuses it unbound); not read here.
    init = "INIT_PATH = '/ckpt/matcha'"
    bindings = [f"VOCAB = '{vocab}'", init, "vocabulary_check.allow_unused_ids = True"]
    config_lib.parse_flags([RECIPE, workdir, *(f"--gin_bindings={b}" for b in bindings)])
    gin.clear_config()
    bindings = [f"VOCAB = '{vocab}'", init, f"Pix2StructConfig.vocab_size = {2 * pieces + 128}"]
    config_lib.parse_flags([RECIPE, workdir, *(f"--gin_bindings={b}" for b in bindings)])


def test_infer_refuses_a_vocabulary_that_is_not_the_checkpoints(small_vocab, tmp_path, capsys):
    from chartjax.interop import chartjax_ckpt
    from chartjax.models import tiny
    from chartjax.models.t5 import pix2struct

    vocab, pieces = small_vocab
    ckpt = tmp_path / "ckpt"
    chartjax_ckpt.save(pix2struct.build(tiny.tiny_pix2struct(vocab_size=5000), 0), str(ckpt))
    images = tmp_path / "charts"
    images.mkdir()
    Image.fromarray(np.full((32, 48, 3), 200, np.uint8)).save(images / "a.png")
    args = ["--task", "deplot", "--checkpoint", str(ckpt), "--vocab", vocab]
    with pytest.raises(SystemExit) as e:
        infer_cli.main([*args, "--images", str(images), "--out", str(tmp_path / "out")])
    assert e.value.code != 0
    err = capsys.readouterr().err
    assert (
        f"the checkpoint's Pix2StructConfig.vocab_size = 5000, but the vocabulary {vocab} has "
        f"only {pieces} pieces: {5000 - pieces} ids would never be targets" in err
    )
    assert err.rstrip().endswith("not this checkpoint's vocabulary: give its own with --vocab")
    assert len(err.splitlines()) == 1
    assert not os.path.exists(tmp_path / "out" / "predictions.jsonl")


def test_infer_takes_the_runs_own_allowance(tmp_path):
    """A run trained with the binding is inferred with it: read from its config.gin."""
    from chartjax.inference import engine
    from chartjax.interop import formats

    run = tmp_path / "run"
    (run / "checkpoints" / "3" / "state").mkdir(parents=True)
    (run / "config.gin").write_text("vocabulary_check.allow_unused_ids = False\n")
    assert not engine.allows_unused_ids(formats.locate(str(run)))
    (run / "config.gin").write_text("vocabulary_check.allow_unused_ids = True\n")
    assert engine.allows_unused_ids(formats.locate(str(run)))
