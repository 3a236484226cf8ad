"""chartjax-infer end to end on tiny random models saved in every checkpoint format.

The reference for every prediction is a direct call of the decoder (greedy_decode / beam_search)
on features computed here from the same inputs, detokenized with the same vocabulary.
"""

from __future__ import annotations

import csv
import importlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from flax import nnx
from PIL import Image

from chartjax.data import patches, render, tables
from chartjax.data.images import decode_image_bytes
from chartjax.data.tables import DEPLOT_PROMPT
from chartjax.data.vocab import Vocabulary
from chartjax.inference import engine as infer
from chartjax.inference import output as infer_output
from chartjax.models import decoding, tiny
from chartjax.models import t5 as t5_lib
from chartjax.models.t5 import pix2struct as p2s_lib
from chartjax.tasks import catalog, deplot
from chartjax.tasks.chartcheck import FLAN_CLASS
from chartjax.tasks.chartcheck import MATCHA_CLASS as CHARTCHECK_PROMPT
from chartjax.tools import infer as infer_cli

ROOT = str(Path(__file__).resolve().parents[1])
VOCAB_SIZE = 400
MAX_LEN = 8  # decode length
MAX_PATCHES = 64  # tiny_pix2struct: 4x4 patches, 64 row/col positions
COMMON = [
    "--max_decode_len",
    str(MAX_LEN),
    "--max_patches",
    str(MAX_PATCHES),
    "--batch_size",
    "2",
    "--dtype",
    "float32",
]
_VOCAB_TEXT = [
    "Generate underlying data table of the figure below:",
    "The chart below has the following caption: Given the caption and the chart below, "
    "is the following claim true? Explain why? Yes No",
    "TITLE | Sales by year 2019 2020 2021 | Country | Value | Share of respondents",
    "claim: caption: table: the votes rose fell prices sales 0 1 2 3 4 5 6 7 8 9 10 % $ , .",
]


# ------------------------------------------------------------------------ fixtures ----------


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("infer")


@pytest.fixture(scope="module")
def vocab_file(work) -> str:
    from chartjax.tools import train_vocab

    return train_vocab.train(
        _VOCAB_TEXT * 8, str(work / "spm"), vocab_size=VOCAB_SIZE, hard_vocab_limit=False
    )


@pytest.fixture(scope="module")
def vocab(vocab_file) -> Vocabulary:
    return Vocabulary(vocab_file)


@pytest.fixture(scope="module")
def p2s():
    return p2s_lib.build(tiny.tiny_pix2struct(vocab_size=VOCAB_SIZE), 0)


@pytest.fixture(scope="module")
def t5_model():
    return t5_lib.build(tiny.tiny_t5(vocab_size=VOCAB_SIZE), 1)


@pytest.fixture(scope="module")
def ckpts(work, p2s, t5_model) -> dict[str, str]:
    """The tiny Pix2Struct in T5X (a folder of checkpoint_<step>/), HF, chartjax params and
    train-run form, and the tiny T5 in T5X and HF form."""
    import gin

    from chartjax import checkpoint as ckpt_lib
    from chartjax import config as config_lib
    from chartjax.interop import chartjax_ckpt, hf, t5x

    out = {
        "t5x": str(work / "p2s_t5x"),
        "hf": str(work / "p2s_hf"),
        "chartjax": str(work / "p2s_cj"),
        "run": str(work / "p2s_run"),
        "t5_t5x": str(work / "t5_t5x" / "checkpoint_2"),
        "t5_hf": str(work / "t5_hf"),
    }
    t5x.save(p2s, os.path.join(out["t5x"], "checkpoint_3"), step=3)
    hf.save(p2s, out["hf"])
    chartjax_ckpt.save(p2s, out["chartjax"])
    t5x.save(t5_model, out["t5_t5x"], step=2)
    hf.save(t5_model, out["t5_hf"])
    # A train run: <workdir>/config.gin as train() saves it + checkpoints/<step> (train state).
    gin.clear_config()
    try:
        config_lib.parse_gin(
            ["tasks/pix2struct_synthetic_smoke.gin"],
            [f"Pix2StructConfig.vocab_size = {VOCAB_SIZE}", "Pix2StructConfig.dtype = 'float32'"],
        )
        os.makedirs(out["run"])
        with open(os.path.join(out["run"], "config.gin"), "w") as f:
            f.write(gin.config_str())
    finally:
        gin.clear_config()
    ck = ckpt_lib.Checkpointer(out["run"])
    params = nnx.to_pure_dict(nnx.state(p2s, nnx.Param))
    ck.save(7, {"step": np.int32(7), "params": params}, {"step": 7}, force=True)
    ck.close()
    return out


def _image(path: str, shape, seed: int, mode="RGB"):
    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 256, (*shape, 4 if mode == "RGBA" else 3), dtype=np.uint8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.fromarray(arr, mode).save(path)


@pytest.fixture(scope="module")
def images(work) -> str:
    """ids B, a, sub/c (sorted); an RGBA image, an upper-case extension, a JPEG in a subfolder
    and a text file that is not an input."""
    d = str(work / "charts")
    _image(os.path.join(d, "a.png"), (40, 56), 0, "RGBA")
    _image(os.path.join(d, "B.PNG"), (30, 70), 1)
    _image(os.path.join(d, "sub", "c.jpg"), (50, 40), 2)
    with open(os.path.join(d, "notes.txt"), "w") as f:
        f.write("not an image")
    return d


IMAGE_IDS = ["B", "a", "sub/c"]
IMAGE_FILES = {"B": "B.PNG", "a": "a.png", "sub/c": "sub/c.jpg"}


def ref_features(data: bytes, prompt: str, font_size: int = 36) -> np.ndarray:
    image = decode_image_bytes(data)
    if prompt:
        image = render.render_header(image, prompt, font_size=font_size)
    return patches.preprocess_image(image, MAX_PATCHES, (4, 4), max_position_id=64)


def in_pairs(decode, feats) -> np.ndarray:
    """`decode` over batches of 2 (the last padded by repeating a row), as infer is run here
    with --batch_size 2: the same shapes reuse one compilation."""
    out = []
    for i in range(0, len(feats), 2):
        pair = list(feats[i : i + 2])
        n = len(pair)
        out.append(np.asarray(decode(np.stack(pair + pair[-1:] * (2 - n))))[:n])
    return np.concatenate(out)


def ref_greedy(model, vocab, feats) -> list[str]:
    tokens = in_pairs(
        lambda x: decoding.greedy_decode(
            model, {"encoder_input_tokens": x}, max_decode_len=MAX_LEN
        )[0],
        feats,
    )
    return vocab.decode_batch(tokens)


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def deplot_reference(p2s, vocab, images) -> dict[str, str]:
    feats = [
        ref_features(read_bytes(os.path.join(images, IMAGE_FILES[i])), DEPLOT_PROMPT)
        for i in IMAGE_IDS
    ]
    return dict(zip(IMAGE_IDS, ref_greedy(p2s, vocab, feats)))


def run_infer(capsys, *argv) -> dict:
    infer_cli.main([str(a) for a in argv])
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def fail_infer(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as e:
        infer_cli.main([str(a) for a in argv])
    assert e.value.code == 1
    return capsys.readouterr().err


def rows_of(out_dir) -> list[dict]:
    with open(os.path.join(out_dir, "predictions.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# ------------------------------------------------------------------------ tests -------------


@pytest.mark.parametrize("fmt", ["t5x", "hf", "chartjax", "run"])
@pytest.mark.slow
def test_deplot_every_format_equals_direct_greedy(
    fmt, ckpts, vocab_file, images, deplot_reference, tmp_path, capsys
):
    out = tmp_path / "out"
    summary = run_infer(
        capsys,
        "--task",
        "deplot",
        "--checkpoint",
        ckpts[fmt],
        "--vocab",
        vocab_file,
        "--images",
        images,
        "--out",
        out,
        *COMMON,
    )
    assert summary["format"] == ("chartjax" if fmt == "run" else fmt)
    if fmt == "t5x":  # the folder's checkpoint_<step> subfolder was found
        assert summary["checkpoint"].endswith("checkpoint_3")
    if fmt == "run":  # the workdir's latest step
        assert summary["checkpoint"].endswith(os.path.join("checkpoints", "7"))
    assert (summary["examples"], summary["skipped"]) == (3, 0)
    rows = rows_of(out)
    assert [r["id"] for r in rows] == IMAGE_IDS
    assert {r["id"]: r["prediction"] for r in rows} == deplot_reference
    for r in rows:
        assert r["input"] == DEPLOT_PROMPT and "target" not in r
        table = tables.parse(r["prediction"])
        assert r["table"] == {
            "title": table.title,
            "header": list(table.header),
            "rows": [list(x) for x in table.rows],
        }
        with open(out / r["table_file"], newline="", encoding="utf-8") as f:
            got = list(csv.reader(f))
        assert got == ([list(table.header)] if table.header else []) + [list(x) for x in table.rows]
    assert rows[2]["table_file"] == "tables/sub/c.csv"


def test_table_files_from_a_known_prediction(tmp_path):
    text = "TITLE | Sales\nYear | Value\n2019 | 10\n2020 | 2,5"
    used: set[str] = set()
    ex = infer_inputs_example("test_two:198 qq")
    row = infer.make_row(ex, text, catalog.inference("deplot"), str(tmp_path), used)
    assert row["table"] == {
        "title": "Sales",
        "header": ["Year", "Value"],
        "rows": [["2019", "10"], ["2020", "2,5"]],
    }
    assert row["table_file"] == "tables/test_two_198_qq.csv"
    with open(tmp_path / row["table_file"], newline="", encoding="utf-8") as f:
        assert list(csv.reader(f)) == [["Year", "Value"], ["2019", "10"], ["2020", "2,5"]]
    with open(tmp_path / row["table_file"], newline="", encoding="utf-8") as f:
        assert f.read() == 'Year,Value\r\n2019,10\r\n2020,"2,5"\r\n'
    assert deplot.table_file("pew/two_col-1440", used) == "tables/pew/two_col-1440.csv"
    assert deplot.table_file("../x", used) == "tables/_/x.csv"
    assert deplot.table_file("test_two:198 qq", used) == "tables/test_two_198_qq~2.csv"


def test_out_must_be_new_or_empty_and_overwrite_clears_only_our_files(tmp_path, capsys):
    out = tmp_path / "out"
    infer_output.prepare_out(str(out), ["tables"], overwrite=False)  # new: fine, nothing created
    assert not out.exists()
    out.mkdir()
    infer_output.prepare_out(str(out), ["tables"], overwrite=False)  # empty: fine
    (out / "tables" / "sub").mkdir(parents=True)
    (out / "tables" / "sub" / "old.csv").write_text("x\n")
    (out / "predictions.jsonl").write_text("{}\n")
    (out / "notes.txt").write_text("mine")
    # The CLI refuses before it reads the checkpoint (which does not exist here).
    cli = ["--task", "deplot", "--checkpoint", tmp_path / "none", "--vocab", tmp_path / "none"]
    cli += ["--images", tmp_path]
    err = fail_infer(capsys, *cli, "--out", out)
    assert f"--out {out} is not empty (notes.txt, predictions.jsonl, tables)" in err
    assert "--overwrite" in err and (out / "tables" / "sub" / "old.csv").exists()
    infer_output.prepare_out(str(out), ["tables"], overwrite=True)
    assert sorted(os.listdir(out)) == ["notes.txt"]
    (tmp_path / "file").write_text("")
    with pytest.raises(infer.InputError, match="is a file, not a folder"):
        infer_output.prepare_out(str(tmp_path / "file"), [], overwrite=True)


def test_overwrite_leaves_no_stale_table(ckpts, vocab_file, images, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["--task", "deplot", "--checkpoint", ckpts["hf"], "--vocab", vocab_file, *COMMON]
    run_infer(capsys, *args, "--images", images, "--out", out)
    assert len(list((out / "tables").rglob("*.csv"))) == 3
    (out / "notes.txt").write_text("mine")
    assert "is not empty" in fail_infer(capsys, *args, "--images", images, "--out", out)
    run_infer(capsys, *args, "--images", os.path.join(images, "sub"), "--out", out, "--overwrite")
    rows = rows_of(out)
    assert len(rows) == 1
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.csv")) == [
        rows[0]["table_file"]
    ]
    assert (out / "notes.txt").read_text() == "mine"


def test_tfds_spec_and_image_listing(images):
    from chartjax.inference.inputs import InputError, image_files, parse_tfds_spec

    assert parse_tfds_spec("chartcheck:test_two") == ("chartcheck", "test_two")
    assert parse_tfds_spec("chart_to_text/pew:test[:10]") == ("chart_to_text/pew", "test[:10]")
    with pytest.raises(InputError, match="NAME"):
        parse_tfds_spec("chartcheck")
    found = image_files([images])
    assert [i for i, _ in found] == IMAGE_IDS  # notes.txt is not an image
    with pytest.raises(InputError, match="two inputs have the id 'a'"):
        image_files([images, os.path.join(images, "a.png")])


def infer_inputs_example(id_):
    from chartjax.inference.inputs import Example

    return Example(id=id_, prompt=DEPLOT_PROMPT, source="x")


def test_corrupt_image_stops_or_is_skipped(
    ckpts, vocab_file, images, deplot_reference, tmp_path, capsys
):
    d = tmp_path / "charts"
    d.mkdir()
    shutil.copy(os.path.join(images, "a.png"), d / "a.png")
    shutil.copy(os.path.join(images, "B.PNG"), d / "B.PNG")
    good = read_bytes(os.path.join(images, "a.png"))
    (d / "bad.png").write_bytes(good[: len(good) // 3])  # truncated PNG
    args = [
        "--task",
        "deplot",
        "--checkpoint",
        ckpts["hf"],
        "--vocab",
        vocab_file,
        "--images",
        d,
        *COMMON,
    ]
    err = fail_infer(capsys, *args, "--out", tmp_path / "o1")
    assert str(d / "bad.png") in err and "--skip_bad" in err
    assert "infer deplot: " in err and "/3 [" in err  # the progress bar over the inputs
    # Stopped before any input was done (one batch): --out is left as it was.
    assert not (tmp_path / "o1").exists()

    summary = run_infer(capsys, *args, "--out", tmp_path / "o2", "--skip_bad")
    assert (summary["examples"], summary["skipped"]) == (2, 1)
    rows = rows_of(tmp_path / "o2")
    assert {r["id"]: r["prediction"] for r in rows} == {k: deplot_reference[k] for k in ("B", "a")}


def test_bad_vocab_format_and_family(ckpts, vocab_file, images, tmp_path, capsys):
    base = ["--images", images, "--out", tmp_path / "o", *COMMON]
    missing = tmp_path / "nope.model"
    err = fail_infer(
        capsys, "--task", "deplot", "--checkpoint", ckpts["hf"], "--vocab", missing, *base
    )
    assert f"vocabulary file not found: {missing}" in err
    # A T5 for an image task, a Pix2Struct for text.
    err = fail_infer(
        capsys, "--task", "deplot", "--checkpoint", ckpts["t5_hf"], "--vocab", vocab_file, *base
    )
    assert "T5 (text-to-text) model" in err and "--task deplot" in err
    err = fail_infer(
        capsys,
        "--task",
        "text",
        "--checkpoint",
        ckpts["hf"],
        "--vocab",
        vocab_file,
        "--inputs",
        tmp_path / "x.jsonl",
        "--template",
        "{claim}",
        "--out",
        tmp_path / "o",
    )
    assert "Pix2Struct-family image model" in err and "--task text" in err
    # Unknown format, and a format that does not match.
    (tmp_path / "empty").mkdir()
    err = fail_infer(
        capsys, "--task", "deplot", "--checkpoint", tmp_path / "empty", "--vocab", vocab_file, *base
    )
    assert "unknown checkpoint format" in err and "`checkpoint` msgpack" in err
    assert "model.safetensors" in err and "params/" in err
    err = fail_infer(
        capsys,
        "--task",
        "deplot",
        "--checkpoint",
        ckpts["hf"],
        "--format",
        "t5x",
        "--vocab",
        vocab_file,
        *base,
    )
    assert "is not a t5x checkpoint" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_text_task_from_jsonl(ckpts, t5_model, vocab, vocab_file, tmp_path, capsys):
    rows = [
        {
            "id": "c1",
            "claim": "Votes rose.",
            "caption": "Votes",
            "table": {"title": "Votes", "header": ["Year", "Votes"], "rows": [["2019", "10"]]},
            "target": "The points go up.",
        },
        {
            "id": "c2",
            "claim": "Sales fell.",
            "caption": "Sales 2020",
            "table": "A | B\n1 | 2",
            "target": "They rose.",
        },
        {"id": "c3", "claim": "Prices %", "caption": "Prices", "table": "", "target": "No."},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    template = FLAN_CLASS  # named template "chartcheck_flan_class": the task module's prompt
    summary = run_infer(
        capsys,
        "--task",
        "text",
        "--checkpoint",
        ckpts["t5_t5x"],
        "--vocab",
        vocab_file,
        "--inputs",
        src,
        "--template",
        "chartcheck_flan_class",
        "--out",
        tmp_path / "o",
        "--max_input_len",
        32,
        *COMMON,
    )
    assert summary["format"] == "t5x" and summary["examples"] == 3
    prompts = [
        template.format(
            claim=r["claim"],
            caption=r["caption"],
            table=r["table"]
            if isinstance(r["table"], str)
            else "TITLE | Votes\nYear | Votes\n2019 | 10",
        )
        for r in rows
    ]
    ids = vocab.encode_batch(prompts, max_len=32, add_eos=True)
    tokens = in_pairs(
        lambda x: decoding.greedy_decode(
            t5_model, {"encoder_input_tokens": x}, max_decode_len=MAX_LEN
        )[0],
        list(ids),
    )
    got = rows_of(tmp_path / "o")
    assert [r["prediction"] for r in got] == vocab.decode_batch(tokens)
    assert [r["input"] for r in got] == prompts
    assert [r["target"] for r in got] == [r["target"] for r in rows]
    assert summary["truncated_inputs"] == sum(len(vocab.encode(p)) + 1 > 32 for p in prompts)
    # A row without a template field names the file and line.
    src.write_text(json.dumps({"id": "x", "claim": "c"}) + "\n", encoding="utf-8")
    err = fail_infer(
        capsys,
        "--task",
        "text",
        "--checkpoint",
        ckpts["t5_t5x"],
        "--vocab",
        vocab_file,
        "--inputs",
        src,
        "--template",
        "{claim} / {caption}",
        "--out",
        tmp_path / "o2",
        *COMMON,
    )
    assert f"{src}:1: no field 'caption'" in err


def _build_chartcheck(data_dir: str) -> None:
    import tensorflow_datasets as tfds

    mod = importlib.import_module("tfds_builders.chartcheck.chartcheck")
    builder = mod.Builder(data_dir=data_dir)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            manual_dir=os.path.join(ROOT, "tfds_builders", "chartcheck", "dummy_data")
        )
    )


def test_chartcheck_tfds_split(ckpts, p2s, vocab, vocab_file, tmp_path, capsys):
    from chartjax.data import sources, tfds_records

    data_dir = str(tmp_path / "tfds")
    _build_chartcheck(data_dir)
    builder_dir = sources.tfds_builder_dir("chartcheck", data_dir)
    builder = tfds_records.builder(builder_dir)
    label_feature = tfds_records.flat_features(builder.info.features)["label"]
    want = []
    for ex in tfds_records.split_examples(builder_dir, "test_two"):  # a claim per example
        prompt = CHARTCHECK_PROMPT.format(
            caption=ex["caption"].decode(), claim=ex["claim"].decode()
        )
        label = label_feature.int2str(int(ex["label"]))
        want.append(
            (
                ex["id"].decode(),
                prompt,
                {"supports": "Yes", "refutes": "No"}[label],
                ref_features(ex["image"], prompt, font_size=12),
            )
        )
    assert len(want) > builder.info.splits["test_two"].num_examples  # a chart with 2 claims
    summary = run_infer(
        capsys,
        "--task",
        "chartcheck",
        "--checkpoint",
        ckpts["chartjax"],
        "--vocab",
        vocab_file,
        "--tfds",
        "chartcheck:test_two",
        "--data_dir",
        data_dir,
        "--out",
        tmp_path / "o",
        "--header_font_size",
        12,
        *COMMON,
    )
    assert summary["examples"] == len(want)
    rows = rows_of(tmp_path / "o")
    assert [(r["id"], r["target"]) for r in rows] == [(w[0], w[2]) for w in want]
    assert [r["input"] for r in rows] == [w[1][:300] for w in want]
    assert [r["prediction"] for r in rows] == ref_greedy(p2s, vocab, [w[3] for w in want])


@pytest.mark.slow
def test_beam_search_returns_top_beam(ckpts, p2s, vocab, vocab_file, images, tmp_path, capsys):
    header = "Which year had the most sales?"
    run_infer(
        capsys,
        "--task",
        "chartqa",
        "--checkpoint",
        ckpts["t5x"],
        "--vocab",
        vocab_file,
        "--images",
        images,
        "--header",
        header,
        "--beam_size",
        2,
        "--out",
        tmp_path / "o",
        *COMMON,
    )
    feats = [
        ref_features(read_bytes(os.path.join(images, IMAGE_FILES[i])), header) for i in IMAGE_IDS
    ]
    tokens = in_pairs(
        lambda x: decoding.beam_search(
            p2s, {"encoder_input_tokens": x}, max_decode_len=MAX_LEN, num_beams=2, alpha=0.6
        )[0],
        feats,
    )
    want = vocab.decode_batch(tokens[:, 0])
    rows = rows_of(tmp_path / "o")
    assert [r["prediction"] for r in rows] == want
    assert all(r["input"] == header for r in rows)


def test_chartqa_from_jsonl_with_images(ckpts, p2s, vocab, vocab_file, images, tmp_path, capsys):
    src = tmp_path / "qa.jsonl"
    rows = [
        {
            "id": "q1",
            "image": os.path.relpath(os.path.join(images, "a.png"), tmp_path),
            "query": "What is the maximum?",
            "answer": "10",
        },  # ChartQA's own key
        {
            "id": "q2",
            "image": os.path.join(images, "sub", "c.jpg"),
            "question": "Which year is lowest?",
            "answer": "2019",
        },
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run_infer(
        capsys,
        "--task",
        "chartqa",
        "--checkpoint",
        ckpts["hf"],
        "--vocab",
        vocab_file,
        "--inputs",
        src,
        "--target_field",
        "answer",
        "--out",
        tmp_path / "o",
        *COMMON,
    )
    questions = ["What is the maximum?", "Which year is lowest?"]
    feats = [
        ref_features(read_bytes(os.path.join(images, f)), q)
        for f, q in zip(("a.png", "sub/c.jpg"), questions)
    ]
    got = rows_of(tmp_path / "o")
    assert [(r["id"], r["input"], r["target"]) for r in got] == [
        ("q1", questions[0], "10"),
        ("q2", questions[1], "2019"),
    ]
    assert [r["prediction"] for r in got] == ref_greedy(p2s, vocab, feats)
