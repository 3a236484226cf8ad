"""`chartjax.load(...).predict(...)` (issue 27 item 12) predicts what chartjax-infer writes to
predictions.jsonl on the same inputs and settings, from a checkpoint and a run workdir (through
chartjax-infer's engine, whose every format tests/test_infer.py checks), and post-processes as the task does (DePlot tables as DataFrames). The tiny checkpoints,
vocabulary and images are tests/test_infer.py's."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

import chartjax
from tests import test_infer
from tests.test_infer import COMMON, IMAGE_FILES, IMAGE_IDS, rows_of, run_infer

# tests/test_infer.py's fixtures (module scope: built again for this module).
work, vocab_file, ckpts, images = (
    test_infer.work,
    test_infer.vocab_file,
    test_infer.ckpts,
    test_infer.images,
)
p2s, t5_model = test_infer.p2s, test_infer.t5_model

# chartjax-infer's COMMON flags as predict settings.
SETTINGS = dict(max_decode_len=test_infer.MAX_LEN, max_patches=test_infer.MAX_PATCHES)


def _infer_rows(capsys, tmp_path, *argv) -> list[dict]:
    out = tmp_path / "infer_out"
    run_infer(capsys, *argv, "--out", out, *COMMON)
    return rows_of(out)


def test_import_chartjax_stays_light():
    script = (
        "import sys, chartjax; load = chartjax.load; "
        "print(sorted(m for m in ('jax', 'flax', 'tensorflow') if m in sys.modules))"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=root, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


@pytest.fixture(scope="module")
def deplot_run(ckpts, vocab_file, tmp_path_factory) -> str:
    """The tiny Pix2Struct train run, its config.gin naming the vocabulary and the DePlot task,
    as a DePlot recipe's would."""
    run = tmp_path_factory.mktemp("api") / "run"
    shutil.copytree(ckpts["run"], run)
    with open(run / "config.gin", "a") as f:
        f.write(f"\nFeatures.vocab_file = '{vocab_file}'\ntrain.task = 'deplot'\n")
    return str(run)


@pytest.mark.slow
def test_deplot_predictions_equal_chartjax_infer_from_each_format(
    ckpts, deplot_run, vocab_file, images, tmp_path, capsys
):
    want = _infer_rows(
        capsys, tmp_path, "--task", "deplot", "--checkpoint", ckpts["t5x"], "--vocab",
        vocab_file, "--images", images,
    )  # fmt: skip
    want = [{k: v for k, v in r.items() if k != "table_file"} for r in want]
    paths = [os.path.join(images, IMAGE_FILES[i]) for i in IMAGE_IDS]
    # chartjax.load builds chartjax-infer's Engine: that every format gives the same rows is
    # tests/test_infer.py's (test_deplot_every_format_equals_direct_greedy); here a run (its
    # config.gin's settings) and a bare checkpoint (settings given).
    for path, options in [
        (deplot_run, {}),  # task and vocabulary from the run's config.gin
        (ckpts["t5x"], {"task": "deplot", "vocab": vocab_file}),
    ]:
        model = chartjax.load(path, dtype="float32", **options)
        assert model.task == "deplot"
        rows = model.predict_rows(paths, batch_size=2, **SETTINGS)
        assert [r["id"] for r in rows] == ["0", "1", "2"]
        assert [{**r, "id": w["id"]} for r, w in zip(rows, want)] == want, path

    # Images in memory (PIL, arrays, bytes) are the same pixels; one input gives one output.
    pil = [Image.open(p) for p in paths]
    same = [pil[0], np.asarray(pil[1].convert("RGB")), open(paths[2], "rb").read()]
    frames = model.predict(same, batch_size=2, **SETTINGS)
    assert [f.attrs["title"] for f in frames] == [w["table"]["title"] for w in want]
    for frame, w in zip(frames, want):
        width = frame.shape[1]
        assert [list(r) for r in frame.itertuples(index=False)] == [
            r + [""] * (width - len(r)) for r in w["table"]["rows"]
        ]
    one = model.predict_rows(pil[0], batch_size=2, **SETTINGS)
    assert isinstance(one, list) and one[0]["prediction"] == want[0]["prediction"]
    assert model.predict(paths[1], **SETTINGS).attrs["title"] == want[1]["table"]["title"]


@pytest.mark.slow
def test_text_predictions_equal_chartjax_infer(ckpts, vocab_file, tmp_path, capsys):
    rows = [
        {"id": "c1", "claim": "Votes rose.", "caption": "Votes 2019", "target": "Yes"},
        {"id": "c2", "claim": "Sales fell.", "caption": "Sales", "target": "No"},
        {"id": "c3", "claim": "Prices %", "caption": "Prices"},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    template = "claim: {claim} caption: {caption}"
    want = _infer_rows(
        capsys, tmp_path, "--task", "text", "--checkpoint", ckpts["t5_hf"], "--vocab",
        vocab_file, "--inputs", src, "--template", template, "--max_input_len", 16,
    )  # fmt: skip
    model = chartjax.load(ckpts["t5_hf"], vocab=vocab_file, dtype="float32")
    assert model.task == "text"  # a T5's default
    got = model.predict_rows(rows, template=template, batch_size=2, max_input_len=16, **SETTINGS)
    assert got == want
    texts = [template.format(**r) for r in rows]  # a text is the prompt itself
    assert model.predict(texts, batch_size=2, max_input_len=16, **SETTINGS) == [
        r["prediction"] for r in want
    ]


def test_errors_name_what_is_missing(ckpts, vocab_file):
    with pytest.raises(ValueError, match="give task="):
        chartjax.load(ckpts["t5x"], vocab=vocab_file)
    with pytest.raises(ValueError, match="carries no tokenizer files.*: give vocab="):
        chartjax.load(ckpts["t5x"], task="deplot")
    with pytest.raises(ValueError, match="needs a T5 / Flan-T5 or BART"):
        chartjax.load(ckpts["t5x"], task="text", vocab=vocab_file)
    model = chartjax.load(ckpts["t5x"], task="chartqa", vocab=vocab_file, dtype="float32")
    with pytest.raises(ValueError, match="needs fields \\['question'\\]"):
        model.predict("chart.png")
    with pytest.raises(TypeError, match="unknown predict settings \\['beams'\\]"):
        model.predict({"image": "chart.png", "question": "Q?"}, beams=2)


@pytest.mark.slow
def test_classifier_predictions_equal_chartjax_infer(tmp_path, capsys):
    pytest.importorskip("transformers")
    from chartjax.testing import tiny_hf

    ckpt = tiny_hf.tiny_checkpoint("deberta", str(tmp_path / "deberta"))
    rows = [
        {
            "id": "a",
            "claim": "Coal is the second-lowest source.",
            "table": "Year | Value\n2019 | 12.5",
        },
        {"id": "b", "claim": "Hydro contributes 36%.", "table": "Q1 | Q2\n1,200 | 3,400"},
    ]
    src = tmp_path / "claims.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    want = _infer_rows(
        capsys, tmp_path, "--task", "classify", "--checkpoint", ckpt, "--inputs", src,
        "--template", "{claim}", "--pair_template", "{table}", "--max_input_len", 32,
    )  # fmt: skip
    model = chartjax.load(ckpt, dtype="float32")
    assert model.task == "classify"  # a DeBERTa's default; its own tokenizer files
    options = dict(template="{claim}", pair_template="{table}", max_input_len=32, batch_size=2)
    assert model.predict_rows(rows, **options) == want
    assert model.predict(rows, **options) == [
        {"label": w["prediction"], "scores": w["scores"]} for w in want
    ]


@pytest.mark.slow
def test_one_model_gives_one_answer_with_the_checkpoints_own_settings(
    ckpts, deplot_run, vocab_file, images, tmp_path, capsys
):
    """chartjax-infer and chartjax.load take a run's max_patches (64) and max_decode_len (16)
    from its config.gin, and an HF export's max_patches from its preprocessor_config.json; a
    flag that overrides one says so (issue 44 item 17)."""
    from chartjax.tools import infer as infer_cli

    run = tmp_path / "run"
    shutil.copytree(deplot_run, run)
    with open(run / "config.gin", "a") as f:
        f.write("\nFeatures.max_patches = 64\nDecoding.max_decode_len = 16\n")
    deplot_run = str(run)
    common = ["--images", images, "--batch_size", "2", "--dtype", "float32"]
    summary = run_infer(capsys, "--task", "deplot", "--checkpoint", deplot_run, "--out",
                        tmp_path / "a", *common)  # fmt: skip
    assert (summary["settings"]["max_patches"], summary["settings"]["max_decode_len"]) == (64, 16)
    model = chartjax.load(deplot_run, dtype="float32")
    assert (model.settings["max_patches"], model.settings["max_decode_len"]) == (64, 16)
    paths = [os.path.join(images, IMAGE_FILES[i]) for i in IMAGE_IDS]
    got = [r["prediction"] for r in model.predict_rows(paths, batch_size=2)]
    assert got == [r["prediction"] for r in rows_of(tmp_path / "a")]

    argv = ["--task", "deplot", "--checkpoint", deplot_run, "--out", tmp_path / "b", *common,
            "--max_patches", "32"]  # fmt: skip
    infer_cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert "chartjax-infer: --max_patches 32 overrides 64 from its run's config.gin" in err
    with pytest.warns(UserWarning, match="max_decode_len 8 overrides 16 from its run's"):
        model.predict_rows(paths[:1], max_decode_len=8)

    export = tmp_path / "export"
    shutil.copytree(ckpts["hf"], export)
    (export / "preprocessor_config.json").write_text(json.dumps({"max_patches": 32}))
    summary = run_infer(capsys, "--task", "deplot", "--checkpoint", export, "--vocab", vocab_file,
                        "--out", tmp_path / "c", *common)  # fmt: skip
    assert summary["settings"]["max_patches"] == 32
    hf_model = chartjax.load(export, task="deplot", vocab=vocab_file, dtype="float32")
    assert hf_model.settings["max_patches"] == 32
    assert [r["prediction"] for r in hf_model.predict_rows(paths, batch_size=2)] == [
        r["prediction"] for r in rows_of(tmp_path / "c")
    ]


def test_bad_inputs_are_named_by_index_before_any_work(ckpts, vocab_file):
    """predict(["a.png", 42]), an empty array and a 20000x20000 array (39 s and 3.3 GB before a
    decompression-bomb error) are refused naming the input (issue 44 item 20)."""
    model = chartjax.load(ckpts["t5x"], task="deplot", vocab=vocab_file, dtype="float32")
    cases = [
        (["a.png", 42], "input 1: an image is a file path, PNG/JPEG bytes, a PIL image or a "
         "uint8 array, not int"),
        (np.zeros((0, 5, 3), np.uint8), "input 0: an empty image array (0, 5, 3)"),
        (np.zeros((4, 4, 2), np.uint8), "input 0: an image array is (H, W) or (H, W, 1|3|4)"),
        (np.broadcast_to(np.uint8(0), (20000, 20000)), "input 0: a 20000x20000 image "
         "(400,000,000 pixels) is over PIL's 89,478,485-pixel limit"),
    ]  # fmt: skip
    for inputs, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            model.predict(inputs)
