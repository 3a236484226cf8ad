"""tools/bench/step.py must import neither TensorFlow nor gin (it runs on the lent GPU machine,
which has neither): checked in a fresh interpreter, with the config and synthetic batch built.
Its patch-extraction worker (a child process, TF allowed) reports every timed chart image."""

import os
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

CODE = """
import sys
from chartjax.tools.bench import step as bench_step
import chartjax.models.decoding, chartjax.models.flops, chartjax.models.losses  # noqa
import chartjax.models.t5.pix2struct, chartjax.models.t5, optax  # noqa
a = bench_step._args(["--model", "pix2struct", "--hidden", "32", "--heads", "4", "--patches",
                      "10", "--batch", "2"])
cfg = bench_step._config(a)
b = bench_step._batch(a, cfg)
assert b["encoder_input_tokens"].shape == (2, 10, 2 + 768), b["encoder_input_tokens"].shape
assert b["encoder_input_tokens"][0, :, 0].min() >= 1  # every patch valid (row id > 0)
assert cfg.head_dim == 8 and cfg.dtype == "bfloat16"
bad = [m for m in ("tensorflow", "gin") if m in sys.modules]
assert not bad, bad
print("ok")
"""


def _run_alone(code: str) -> None:
    """`code` in a fresh interpreter (nothing of this process's imports), ending in "ok"."""
    res = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        timeout=300,
    )
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-2000:]


@pytest.mark.slow
def test_bench_step_imports_no_tensorflow_or_gin():
    _run_alone(CODE)


def test_patch_worker_times_every_chart_image():
    from chartjax.tools.bench import step as bench_step

    keys = list(bench_step.PATCH_IMAGES)
    imgs = {key: np.full((30 + i, 40, 3), 200, np.uint8) for i, key in enumerate(keys)}
    a = bench_step._args(["--patch-images", "2", "--patch-max", "16"])
    out = bench_step.bench_patches(a, imgs)
    assert sorted(out) == sorted(f"patch_images_per_s{k}" for k in keys), out
    assert all(v > 0 for v in out.values())


def test_only_patches_times_the_patch_worker_alone_with_its_resize_threads(monkeypatch, capsys):
    from chartjax.tools.bench import step as bench_step

    small = lambda dpi=100: np.full((dpi // 4, 40, 3), 200, np.uint8)  # noqa: E731
    monkeypatch.setattr(bench_step, "_chart_image", small)
    argv = ["--only-patches", "--patch-images", "2", "--patch-max", "16", "--resize-threads", "1"]
    results = bench_step.main([*argv, "--malloc", "default"])["results"]
    assert results["resize_threads"] == 1
    keys = sorted(f"patch_images_per_s{k}" for k in bench_step.PATCH_IMAGES)
    assert sorted(results["chartjax"]) == keys and not results["hf"], results
    assert "ratios_chartjax_over_hf" not in results


PALIGEMMA = """
import sys
import numpy as np
from chartjax.tools.bench import step as bench_step
import chartjax.models.paligemma.decoding  # noqa: F401
a = bench_step._args(["--model", "paligemma", "--hidden", "32", "--heads", "4", "--vocab", "256",
                      "--image-size", "28", "--patch", "14", "--prefix", "5", "--targets", "3",
                      "--batch", "2", "--dtype", "float32"])
assert a.skip_patches  # Pix2Struct's patch extraction is not PaliGemma's
cfg = bench_step._config(a)
b = bench_step._batch(a, cfg)
n = cfg.num_image_tokens
assert n == 4 and cfg.image_token_id == 255 and cfg.vision_emb_dim == 32
assert b["pixel_values"].shape == (2, 3, 28, 28)  # NCHW, HF's layout
assert b["input_ids"].shape == (2, n + 5) and b["train_ids"].shape == (2, n + 5 + 3)
assert (b["input_ids"][:, :n] == 255).all() and (b["input_ids"][:, n] == cfg.bos_id).all()
assert (b["train_ids"][:, : n + 5] == b["input_ids"]).all()
assert (b["train_types"] == [0] * (n + 5) + [1] * 3).all()  # the suffix alone has the loss
bad = [m for m in ("tensorflow", "gin") if m in sys.modules]
assert not bad, bad
print("ok")
"""


def test_paligemma_shapes_lay_out_the_processors_prompt_without_gin():
    _run_alone(PALIGEMMA)
