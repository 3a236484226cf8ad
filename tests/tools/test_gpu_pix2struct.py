"""tools/gpu/pix2struct_learning.py: its TF-free parts equal the package's TF ones, and a 2-step
CPU run in a process where tensorflow and gin cannot be imported prints the promised JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from chartjax.data import render
from chartjax.synth import chart_info as ci
from tools.gpu import pix2struct_learning as gpu

ROOT = Path(__file__).resolve().parents[2]
CORPUS = dict(types=("Grouped vertical bar",), size=(480, 360), max_categories=3, max_series=1)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("gpu_data")
    ci.generate(str(root / "train"), 6, seed=1, value_labels=12, max_topics=2, **CORPUS)
    ci.generate(str(root / "heldout"), 3, seed=2, value_labels=12, max_topics=2, **CORPUS)
    return root


def test_jax_patches_equal_the_tf_patches(data):
    from chartjax.data import patches as tf_patches

    _, images, _ = gpu.load_corpus(str(data / "train"), limit=2)
    # 1024 patches without the header: the chart grows (plain bilinear in TF); 64 with the
    # header: it shrinks (antialiased)
    for header, max_patches in ((False, 1024), (True, 64)):
        x = gpu.with_header(images, gpu.PROMPT if header else "", render.default_font_path())
        got = np.asarray(gpu.patches(x, max_patches))
        want = np.stack([tf_patches.preprocess_image(im, max_patches) for im in x])
        assert got.shape == want.shape == (2, max_patches, 2 + 768)
        np.testing.assert_array_equal(got[..., :2], want[..., :2])  # ids and padding
        # float32 rounding of the resize weights (as data/patches.py's own two paths)
        np.testing.assert_allclose(got, want, atol=5e-4, rtol=0)
    assert gpu.patch_grid(360, 480, 64) == (6, 9) and gpu.patch_grid(754, 938, 1024) == (28, 35)


def test_targets_are_the_generator_tables(data):
    ids, images, targets = gpu.load_corpus(str(data / "train"))
    assert ids == [str(i) for i in range(6)] and all(im.shape == (360, 480, 3) for im in images)
    checked = 0
    for stem, target in zip(ids, targets):
        doc = json.loads((data / "train" / "json_gt" / f"{stem}.json").read_text())
        roles = [r["role"] for r in doc["task3"]["output"]["text_roles"]]
        if roles.count("chart_title") == 1 and roles.count("axis_title") == 2:
            # the derivation equals the generator's table whenever the titles are drawn
            assert target == (data / "train" / "tables" / f"{stem}.txt").read_text(), stem
            checked += 1
    assert checked >= 2


def test_char_vocab_round_trip_and_edit_distance():
    import editdistance

    vocab = gpu.CharVocab(["TITLE | GDP\nYear | 12.5", "ab"])
    ids = vocab.encode("Year | 12.5", 16)
    assert ids.shape == (16,) and ids[11] == gpu.EOS and not ids[12:].any()
    assert vocab.decode(ids) == "Year | 12.5"
    assert vocab.decode(vocab.encode("Zq", 8)) == "\ufffd\ufffd"  # unseen characters
    assert vocab.decode(vocab.encode("abab", 3)) == "ab"  # cut, EOS kept
    rng = np.random.default_rng(0)
    for _ in range(200):
        a, b = ("".join(rng.choice(list("ab1 |"), rng.integers(0, 9))) for _ in range(2))
        assert gpu.levenshtein(a, b) == editdistance.eval(a, b), (a, b)


def test_two_step_cpu_run_without_tensorflow_or_gin(data, tmp_path):
    block = tmp_path / "block"
    block.mkdir()
    block.joinpath("sitecustomize.py").write_text(
        "import sys\nfor m in ('tensorflow', 'gin', 'tensorflow_datasets', 'sentencepiece'):\n"
        "    sys.modules[m] = None  # any import of them raises ImportError\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{block}{os.pathsep}{ROOT}", "JAX_PLATFORMS": "cpu"}
    out = tmp_path / "out"
    argv = ["--data", str(data), "--out", str(out), "--font", render.default_font_path()]
    argv += ["--steps", "2", "--batch", "2", "--max_patches", "64", "--emb_dim", "32"]
    argv += ["--heads", "2", "--mlp_dim", "64", "--layers", "1", "--max_target_len", "96"]
    argv += ["--eval_every", "1", "--eval_batch", "2", "--dtype", "float32", "--warmup", "1"]
    script = ROOT / "tools" / "gpu" / "pix2struct_learning.py"
    proc = subprocess.run(
        [sys.executable, str(script), *argv],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == json.loads((out / "result.json").read_text())
    assert result["steps"] == 2 and [p["step"] for p in result["curve"]] == [1, 2]
    for point in result["curve"]:
        for key in ("rms_precision", "rms_recall", "rms_f1", "rnss", "rms_f1_no_title"):
            assert 0.0 <= point[key] <= 1.0, key
    assert result["final"] == result["curve"][-1]
    assert set(result["constant_baselines"]) == {"table", "title_only", "table_no_title"}
    reads = result["reads_values"]
    assert reads["rms_f1_no_title"] == pytest.approx(result["final"]["rms_f1_no_title"])
    lo, hi = reads["margin_ci95"]
    assert lo <= reads["margin"] <= hi and reads["beats_constant"] == (lo > 0)
    assert result["data"]["train_charts"] == 6 and result["data"]["heldout_charts"] == 3
    assert result["data"]["image_shape"][2] == 3 and result["device"].lower().startswith("cpu")
    assert [x[0] for x in result["train_loss"]] == [1, 2]
    assert all(np.isfinite(x[1]) and x[1] > 0 for x in result["train_loss"])
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["0", "1", "2"]


def _png(rows: np.ndarray, filters: list[int], channels: int) -> bytes:
    """A PNG of uint8 `rows` [H, W*C] with the given filter type per row (Avg and None only:
    the test's own encoder, so the decoder meets a filter PIL does not write)."""
    import struct
    import zlib

    h, wc = rows.shape
    out = []
    for y, kind in enumerate(filters):
        line = rows[y].astype(np.int32)
        if kind == 3:
            up = rows[y - 1].astype(np.int32) if y else np.zeros(wc, np.int32)
            left = np.concatenate([np.zeros(channels, np.int32), line[:-channels]])
            line = (line - (left + up) // 2) & 255
        out.append(bytes([kind]) + line.astype(np.uint8).tobytes())

    def chunk(kind, body):
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    head = struct.pack(">IIBBBBB", wc // channels, h, 8, {3: 2, 4: 6}[channels], 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", head)
        + chunk(b"IDAT", zlib.compress(b"".join(out)))
        + chunk(b"IEND", b"")
    )


def test_png_decoder_for_a_machine_without_pil(data, tmp_path):
    from PIL import Image

    # the generator's PNG (filter Up on every row, RGBA, opaque)
    path = data / "train" / "png" / "0.png"
    want = np.asarray(Image.open(path).convert("RGB"))
    np.testing.assert_array_equal(gpu.decode_png(str(path)), want)
    # PIL's own PNGs use Sub, Up and Paeth (adaptive filtering)
    rng = np.random.default_rng(0)
    img = (np.add.outer(np.arange(30), np.arange(40))[..., None] * [3, 5, 7] % 256).astype(np.uint8)
    img[5:10, 5:20] = rng.integers(0, 256, (5, 15, 3))
    Image.fromarray(img).save(tmp_path / "pil.png")
    np.testing.assert_array_equal(gpu.decode_png(str(tmp_path / "pil.png")), img)
    # Avg and None rows, and alpha composited on white: (c*a + 255*(255-a)) / 255, rounded
    rgba = rng.integers(0, 256, (6, 5, 4)).astype(np.uint8)
    rgba[..., 3] = [[255, 0, 128, 64, 255]] * 6
    (tmp_path / "avg.png").write_bytes(_png(rgba.reshape(6, 20), [3, 0, 3, 3, 0, 3], 4))
    a = rgba[..., 3:].astype(int)
    blend = (rgba[..., :3].astype(int) * a + 255 * (255 - a) + 127) // 255
    np.testing.assert_array_equal(gpu.decode_png(str(tmp_path / "avg.png")), blend)
    with pytest.raises(ValueError, match="not a PNG"):
        (tmp_path / "x.png").write_bytes(b"GIF89a")
        gpu.decode_png(str(tmp_path / "x.png"))
