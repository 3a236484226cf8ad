"""tools/bench/step.py must import neither TensorFlow nor gin (it runs on the lent GPU machine,
which has neither): checked in a fresh interpreter, with the config and synthetic batch built.
Its patch-extraction worker (a child process, TF allowed) reports every timed chart image."""

import os
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

CODE = """
import sys
from chartjax.tools.bench import step as bench_step
import chartjax.models.decoding, chartjax.models.flops, chartjax.models.losses  # noqa
import chartjax.models.pix2struct, chartjax.models.t5, optax  # noqa
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


def test_bench_step_imports_no_tensorflow_or_gin():
    res = subprocess.run(
        [sys.executable, "-c", CODE],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        timeout=300,
    )
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-2000:]


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


def test_gemm_ceiling_is_the_best_measured_rate_and_gflops_use_it():
    from chartjax.tools.bench import step as bench_step

    a = bench_step._args(["--hidden", "32", "--mlp", "64", "--patches", "8", "--batch", "2"])
    a.gemm_reps = 1
    assert bench_step.gemm_shapes(a) == {"mlp": (16, 32, 64), "square1024": (1024, 1024, 1024)}
    g = bench_step.gemm_ceiling(a, with_torch=False)
    rates = {k: v for k, v in g.items() if k != "ceiling_gflops_per_s"}
    assert sorted(rates) == sorted(
        f"jax_{dt}_{shape}_gflops_per_s"
        for dt in ("float32", "bfloat16")
        for shape in ("mlp", "square1024")
    )
    assert g["ceiling_gflops_per_s"] == max(rates.values()) > 0
    # 2 examples/s x 3 GFLOP per example = 6 GFLOP/s, half of a 12 GFLOP/s ceiling.
    side = {"train_examples_per_s": 2.0, "train_flops_per_example": 3e9}
    assert bench_step._gflops(side, 12.0) == {
        "train_gflops_per_s": 6.0,
        "fraction_of_gemm_ceiling": 0.5,
    }
