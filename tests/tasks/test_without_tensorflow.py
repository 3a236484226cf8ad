"""chartjax-train, chartjax-eval and chartjax-infer run where TensorFlow cannot be imported
(issue 25, item 2): a FigureQA RN and a Pix2Struct recipe train, evaluate and predict through
the loader's worker processes with `import tensorflow` failing in every process (the training
process and the spawned workers alike: a sitecustomize hides it, as if it were not installed).

Each command runs once, on the smoke recipes cut to 2 steps: the RN is evaluated by
chartjax-eval, the Pix2Struct by chartjax-train's final evaluation (decoding, the text
task's metrics) and then predicts with chartjax-infer."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from chartjax.metrics import prediction_files
from tests.tasks.conftest import ROOT
from tests.tasks.hide_tf import HIDE_TF

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    site = tmp_path_factory.mktemp("hide_tf")
    (site / "sitecustomize.py").write_text(HIDE_TF)
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join([str(site), ROOT])
    out["CHARTJAX_LOADER_WORKERS"] = "1"  # the feature maps in a spawned worker process
    out["JAX_PLATFORMS"] = "cpu"
    check = subprocess.run(
        [sys.executable, "-c", "import tensorflow"], env=out, capture_output=True, text=True
    )
    assert "No module named 'tensorflow'" in check.stderr  # the hiding works
    return out


def _run(env, module: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, f"{module}: {proc.stderr[-3000:]}"
    assert "tensorflow" not in proc.stderr.lower().replace("tensorflow_datasets", "")
    return proc.stdout


# runs/smoke.gin's run cut to 2 steps: enough to train, checkpoint and evaluate.
TWO_STEPS = [
    "train.num_train_steps = 2",
    "train.checkpoint_every = 2",
    "schedule.warmup_steps = 1",
    "schedule.total_steps = 2",
]


def test_relation_network_without_tensorflow(env, tmp_path, tfds_dir):
    data_dir = tfds_dir("figureqa")
    workdir = tmp_path / "rn"
    binding = f"--gin_bindings=figureqa_task.data_dir = '{data_dir}'"
    _run(
        env,
        "chartjax.tools.train",
        "--gin_file=tasks/figureqa_rn.gin",
        "--gin_file=runs/smoke.gin",
        f"--workdir={workdir}",
        binding,
        *[f"--gin_bindings={b}" for b in [*TWO_STEPS, "train.final_eval = False"]],
    )
    assert (workdir / "checkpoints" / "2").is_dir()
    _run(env, "chartjax.tools.evaluate", f"--workdir={workdir}", "--split=validation1", binding)
    (metrics,) = (workdir / "eval" / "validation1").glob("step_*/metrics.json")
    assert json.loads(metrics.read_text())["num_examples"] == 2  # the dummy validation1


def test_pix2struct_train_eval_and_infer_without_tensorflow(env, tmp_path, vocab_file, tfds_dir):
    from chartjax.data import sources

    data_dir = tfds_dir("chartcheck")
    tables = tmp_path / "tables.jsonl"
    bdir = sources.tfds_builder_dir("chartcheck", data_dir)
    ids = [
        i
        for s in ("train", "validation")
        for i in sources.TfdsSource("chartcheck", directory=bdir).ids(s)
    ]
    prediction_files.write_jsonl(
        tables, [{"id": i, "prediction": "TITLE | t <0x0A> a | 1"} for i in ids]
    )
    workdir = tmp_path / "matcha"
    bindings = [
        f"VOCAB = '{vocab_file}'",
        f"DATA_DIR = '{data_dir}'",
        f"TABLES = '{tables}'",
        "Pix2StructConfig.vocab_size = 400",
        *TWO_STEPS,
    ]
    _run(
        env,
        "chartjax.tools.train",
        "--gin_file=tasks/chartcheck_matcha_finetune_class.gin",
        "--gin_file=runs/smoke.gin",
        f"--workdir={workdir}",
        *[f"--gin_bindings={b}" for b in bindings],
    )
    assert (workdir / "checkpoints" / "2").is_dir()
    # The final evaluation, in the training process (chartjax-eval: the RN test above).
    (metrics,) = (workdir / "eval").glob("validation*/step_2/metrics.json")
    assert json.loads(metrics.read_text())["num_examples"] >= 1
    out = tmp_path / "infer"
    _run(
        env,
        "chartjax.tools.infer",
        "--task=chartcheck",
        f"--checkpoint={workdir}",
        "--tfds=chartcheck:validation",
        f"--data_dir={data_dir}",
        f"--out={out}",
        "--max_decode_len=4",
        "--max_patches=64",
    )
    rows = prediction_files.read_jsonl(str(out / "predictions.jsonl"))
    assert len(rows) >= 1 and all(isinstance(r["prediction"], str) for r in rows)
