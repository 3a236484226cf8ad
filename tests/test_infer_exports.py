"""chartjax-infer without --vocab (issue 27 item 11): on an export of chartjax-convert, which
carries its tokenizer files, and on a train run, whose config.gin names its vocabulary. The
predictions equal those of the same checkpoint with --vocab; the tiny checkpoints and images are
tests/test_infer.py's."""

from __future__ import annotations

import shutil

import pytest

from chartjax.tools import convert_checkpoint
from tests import test_infer
from tests.test_infer import COMMON, IMAGE_IDS, rows_of, run_infer

# tests/test_infer.py's fixtures (module scope: built again for this module).
work, vocab_file, ckpts, images = (
    test_infer.work,
    test_infer.vocab_file,
    test_infer.ckpts,
    test_infer.images,
)
p2s, t5_model = test_infer.p2s, test_infer.t5_model

pytest.importorskip("safetensors")


def _deplot(capsys, checkpoint, images, out, *vocab) -> dict[str, str]:
    summary = run_infer(
        capsys, "--task", "deplot", "--checkpoint", checkpoint, "--images", images,
        "--out", out, *vocab, *COMMON,
    )  # fmt: skip
    assert summary["examples"] == len(IMAGE_IDS)
    return {r["id"]: r["prediction"] for r in rows_of(out)}


@pytest.fixture(scope="module")
def with_vocab(ckpts, vocab_file, images, tmp_path_factory) -> dict:
    """The predictions of the T5X checkpoint given --vocab (what the others must equal)."""
    import json

    from chartjax.tools import infer as infer_cli

    out = tmp_path_factory.mktemp("with_vocab") / "out"
    argv = ["--task", "deplot", "--checkpoint", ckpts["t5x"], "--images", images]
    infer_cli.main([str(a) for a in [*argv, "--out", out, "--vocab", vocab_file, *COMMON]])
    with open(out / "predictions.jsonl", encoding="utf-8") as f:
        return {r["id"]: r["prediction"] for r in map(json.loads, f)}


@pytest.mark.parametrize("fmt", ["hf", "chartjax"])
@pytest.mark.slow
def test_an_export_needs_no_vocab_flag(
    fmt, ckpts, vocab_file, images, with_vocab, tmp_path, capsys
):
    export = tmp_path / "export"
    convert_checkpoint.main(
        [
            "--from",
            "t5x",
            "--to",
            fmt,
            f"{ckpts['t5x']}/checkpoint_3",
            str(export),
            "--vocab",
            vocab_file,
        ]
    )
    assert (export / "spiece.model").is_file()
    assert _deplot(capsys, export, images, tmp_path / "out") == with_vocab


@pytest.mark.slow
def test_a_run_needs_no_vocab_flag_when_its_config_names_one(
    ckpts, vocab_file, images, with_vocab, tmp_path, capsys
):
    run = shutil.copytree(ckpts["run"], tmp_path / "run")
    with open(run / "config.gin", "a") as f:  # as a recipe binds it (%VOCAB resolved)
        f.write(f"\nFeatures.vocab_file = '{vocab_file}'\n")
    assert _deplot(capsys, run, images, tmp_path / "out") == with_vocab
    export = tmp_path / "export"  # and its export carries that vocabulary
    convert_checkpoint.main(["--from", "chartjax", "--to", "hf", str(run), str(export)])
    assert _deplot(capsys, export, images, tmp_path / "out2") == with_vocab
