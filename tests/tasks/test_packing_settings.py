"""A packing row shorter than one example (issue 44 item 11) as chartjax-train meets it: refused
in one line with status 2 when the task is made, before any data is read, the model built or
the workdir made; it used to fail at the first batch, after the model was built."""

from __future__ import annotations

import gin
import pytest

from chartjax.tools import train as train_cli

TINY_T5 = [
    "T5Config.emb_dim = 32",
    "T5Config.num_heads = 4",
    "T5Config.head_dim = 8",
    "T5Config.mlp_dim = 64",
    "T5Config.num_encoder_layers = 1",
    "T5Config.num_decoder_layers = 1",
    "T5Config.vocab_size = 400",
    "INIT_PATH = None",
    "train.init_format = 'random'",
    "Features.max_input_len = 64",
    "Features.max_target_len = 32",
    "Features.pack = True",
]


@pytest.fixture(autouse=True)
def _clean_gin():
    gin.clear_config()
    yield
    gin.clear_config()


def _train(tmp_path, vocab_file, *bindings) -> int:
    argv = [
        "--gin_file=tasks/chart_info_task3_t5.gin",
        f"--workdir={tmp_path / 'run'}",
        f"--gin_bindings=VOCAB = '{vocab_file}'",
        f"--gin_bindings=DATA_DIR = '{tmp_path / 'not_built'}'",  # refused before it is read
    ]
    return train_cli.main(argv + [f"--gin_bindings={b}" for b in TINY_T5 + list(bindings)])


def test_a_packing_row_shorter_than_one_example_is_one_line(tmp_path, vocab_file, capsys):
    assert _train(tmp_path, vocab_file, "Features.pack_encoder_len = 8") == 2
    assert capsys.readouterr().err == (
        "chartjax-train: error: Features.pack_encoder_len = 8: a packing row shorter than one "
        "example, which may hold Features.max_input_len = 64; make it at least 64 or leave it "
        "unset (rows of 64)\n"
    )
    assert not (tmp_path / "run").exists()


def test_every_bad_packing_setting_is_named(tmp_path, vocab_file, capsys):
    status = _train(
        tmp_path,
        vocab_file,
        "Features.pack_decoder_len = 16",
        "Features.pack_encoder_len = -1",
        "Features.pack_open_rows = 0",
    )
    assert status == 2
    assert capsys.readouterr().err.splitlines() == [
        "chartjax-train: error: Features.pack_encoder_len = -1: must be a positive integer or None",
        "chartjax-train: error: Features.pack_decoder_len = 16: a packing row shorter than one "
        "example, which may hold Features.max_target_len = 32; make it at least 32 or leave it "
        "unset (rows of 32)",
        "chartjax-train: error: Features.pack_open_rows = 0: must be a positive integer",
    ]
    assert not (tmp_path / "run").exists()


def test_rows_as_long_as_an_example_are_accepted():
    from chartjax.tasks.core import seq2seq

    spec = seq2seq.Features(
        vocab_file="x", modality="text", max_input_len=64, pack=True, pack_encoder_len=64
    ).pack_spec(0)
    assert (spec.encoder_len, spec.decoder_len) == (64, 128)
    with pytest.raises(seq2seq.checks.ConfigError, match="max_patches = 2048 patches"):
        seq2seq.Features(vocab_file="x", pack=True, pack_encoder_len=1024)
