"""tools/gpu/checks.py (issue 25, item 6): the GPU checks are runs of the product's CLIs with the
package's recipes; each check's bindings parse, and a check runs where TensorFlow cannot be
imported, logging what the device check reads (throughput and TFLOP/s)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys

import gin
import pytest

from chartjax import config as config_lib
from tests.tasks.conftest import ROOT
from tests.tasks.hide_tf import HIDE_TF


def _load(name):
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(ROOT, "tools", "gpu", f"{name}.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


checks = _load("checks")
wheels = _load("wheels")


@pytest.mark.parametrize("tiny", [True, False])
@pytest.mark.parametrize("check", sorted(checks.CHECKS))
def test_every_run_of_every_check_parses_through_gin(tmp_path, check, tiny):
    (tmp_path / "vocab").mkdir()
    (tmp_path / "vocab" / "spm.vocab").write_text("a\t0\nb\t0\n")
    runs = checks.steps(check, tiny, str(tmp_path))
    assert runs and all(r["tool"] in ("train", "evaluate") for r in runs)
    for r in runs:
        bindings = [b.replace("{stage1_checkpoint}", "/ckpt") for b in r["bindings"]]
        assert not any("{" in b and "}" in b and "'{" in b for b in bindings)
        gin.clear_config()
        try:  # an evaluation reads its run's config.gin: its bindings go on the train run's
            files = r["gin_file"] or runs[0]["gin_file"]
            config_lib.parse_gin(
                files, (runs[0]["bindings"] if not r["gin_file"] else []) + bindings
            )
            if check in checks.SCORED:
                assert gin.query_parameter("Pix2StructConfig.vocab_size") == 2  # the .vocab's lines
            if check in ("reading_lattice", "chartqa") and r["tool"] == "train":
                # the lattice's geometry: 576 x 416 charts halved onto 256 patches (276 with
                # the ChartQA question as the header: tasks/chartqa_lattice_toy.gin)
                patches = 276 if r["gin_file"] == ["tasks/chartqa_lattice_toy.gin"] else 256
                assert gin.query_parameter("Features.max_patches") == patches
        finally:
            gin.clear_config()


def test_the_device_call_installs_the_wheels_and_carries_the_data():
    data = os.path.join(ROOT, "runs", "gpu", "figureqa")
    call = checks.device_call("figureqa", data)
    assert call["carry"] == [".whl", "runs/gpu/figureqa"]
    assert call["command"].startswith("python3 -m pip install")
    assert "--target /tmp/site .whl/*.whl" in call["command"]
    assert call["command"].endswith(
        "python3 tools/gpu/checks.py run figureqa --data runs/gpu/figureqa --out $OUT/figureqa"
    )
    assert checks.device_call("memory_large", data)["carry"] == [".whl"]  # synthetic: no corpus


def test_the_carried_wheels_are_pinned_to_this_environment_or_the_host_range():
    pins = dict(p.split("==") if "==" in p else (p, None) for p in wheels.pins())
    assert pins["gin-config"] and pins["tensorflow-datasets"] and pins["array-record"]
    assert "flax>=0.12.9,<0.13" in pins  # JAX 0.11 on the host's Python 3.12
    assert not {"tensorflow", "tensorflow-cpu", "jax", "jaxlib"} & set(pins)


@pytest.mark.slow
@pytest.mark.parametrize(
    "check, name",
    [("memory_large", "pix2struct_large_full"), ("paligemma2_lora", "3b_448_lora_int8")],
)
def test_a_check_runs_without_tensorflow_and_logs_its_throughput(tmp_path, check, name):
    site = tmp_path / "hide_tf"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE_TF)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), ROOT]), JAX_PLATFORMS="cpu")
    # In the training process: spawned loader workers without TensorFlow are
    # tests/tasks/test_without_tensorflow.py's; this test is the check's runner and its log.
    env["CHARTJAX_LOADER_WORKERS"] = "0"
    env.pop("XLA_FLAGS", None)  # one device, as on the GPU host (the suite simulates 8)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "gpu", "checks.py"), "run", check]
        + ["--tiny", "--only", name, "--out", str(out), "--work", str(tmp_path / "work")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    log = (out / "log.txt").read_text() if (out / "log.txt").exists() else ""
    assert proc.returncode == 0, proc.stdout + proc.stderr + log[-3000:]
    result = json.loads((out / "result.json").read_text())
    (row,) = result["runs"]
    assert (row["name"], row["rc"], result["ok"]) == (name, 0, True)
    assert [m["step"] for m in row["train_metrics"]] == [1, 2]
    last = row["train_metrics"][-1]
    assert math.isfinite(last["loss"]) and last["examples_per_s"] > 0
    assert last["tflops_per_s_per_device"] > 0  # the synthetic task's lengths give the FLOPs
    assert "No module named 'tensorflow'" not in log


TABLES = [  # training tables, then held-out ones: a title, a header and number cells
    f"TITLE | Sales {i}\nYear | Sales\n2001 | {10 + i}\n2002 | {20 + 2 * i}" for i in range(12)
]


def test_a_reading_check_is_scored_against_the_constant_tables(tmp_path):
    """`score`: the held-out predictions `run` brought back, against the constant tables that
    `prepare` chose on the training tables (`write_baselines`): a model that writes each
    target exactly beats them beyond the CI; one that writes the best constant does not."""
    for split, tables in (("train", TABLES[:8]), ("heldout", TABLES[8:])):
        (tmp_path / f"raw_{split}" / "tables").mkdir(parents=True)
        for i, t in enumerate(tables):
            (tmp_path / f"raw_{split}" / "tables" / f"{i}.txt").write_text(t)
    data = tmp_path / "data"
    data.mkdir()
    base = checks.write_baselines(
        str(tmp_path / "raw_train"), str(tmp_path / "raw_heldout"), str(data / checks.BASELINES)
    )
    assert base == json.loads((data / checks.BASELINES).read_text())
    assert base["table"]["prediction"] in TABLES[:8]  # chosen on the training tables only
    best = max(base.values(), key=lambda b: b["rms_f1_no_title"])["prediction"]

    def result(name, predictions):
        step = tmp_path / name / "lattice" / "eval" / "train" / "step_40"
        step.mkdir(parents=True)
        rows = [{"prediction": p, "target": t} for p, t in zip(predictions, TABLES[8:])]
        (step / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return str(tmp_path / name)

    exact = checks.score("reading_lattice", str(data), result("exact", TABLES[8:]))
    run = exact["runs"]["lattice"]
    assert run["step"] == 40
    assert run["reads_values"]["rms_f1_no_title"] == 1.0 and run["reads_values"]["beats_constant"]
    assert run["number_cells"]["exact"] == 1.0 and run["number_cells"]["beats_constant"]
    assert json.loads((tmp_path / "exact" / "score.json").read_text()) == exact
    const = checks.score("reading_lattice", str(data), result("const", [best] * 4))
    run = const["runs"]["lattice"]
    assert run["reads_values"]["margin"] == 0.0 and not run["reads_values"]["beats_constant"]
    assert not run["number_cells"]["beats_constant"]
