"""What chartjax-train and chartjax-eval show at the end of an evaluation (issue 44 item 24), as
the commands run: the progress bar ends at 100% with every batch counted (it stopped at 50%,
1/2, on a two-batch split); chartjax-train says where each report.html went; chartjax-eval
prints a readable line a split, not a dict; a sliced split's folder needs no quoting in a shell
or a file:// link (`eval/validation_50pct_/`, not `eval/validation[50%:]/`), and runs written
before under the old names still read.

The run is a real `chartjax-train` process, which also checks chartjax.quiet's default on it
(tests/test_quiet.py has the rest): no TensorFlow start-up banner reaches its stderr."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import gin
import pytest

from chartjax import evaluate as eval_lib
from chartjax import plots, quiet
from chartjax.tools import evaluate as eval_cli
from chartjax.tools import paper_tables

ROOT = Path(__file__).resolve().parents[1]

TINY = [
    "RNConfig.image_size=16",
    "synthetic_task.image_size=16",
    "synthetic_task.num_eval=16",  # two batches of 8
    "RNConfig.conv_layers=2",
    "RNConfig.conv_channels=8",
    "RNConfig.g_dim=16",
    "RNConfig.f_dim=16",
    "RNConfig.g_layers=2",  # few arrays: fewer files at each checkpoint
    "RNConfig.lstm_dim=8",
    "RNConfig.embed_dim=8",
    "train.global_batch_size=8",
    "evaluate.eval_batch_size=8",
    "train.num_train_steps=2",
    "train.log_every=1",
    "train.checkpoint_every=2",
]


def _last_frame(stderr: str, desc: str) -> str:
    """The last state of the tqdm bar `desc` (frames are separated by carriage returns)."""
    frames = [f for f in re.split(r"[\r\n]", stderr) if f.startswith(f"{desc}:")]
    assert frames, stderr
    return frames[-1]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny Relation Network trained by a `chartjax-train` process with its progress bars on
    (stdout and stderr as a terminal would get them) and TF_CPP_MIN_LOG_LEVEL unset."""
    workdir = tmp_path_factory.mktemp("eval_output") / "run"
    cmd = [
        sys.executable,
        "-c",
        "import sys; from chartjax.tools.train import main; sys.exit(main(sys.argv[1:]))",
        "--gin_file=tasks/synthetic_rn.gin",
        f"--workdir={workdir}",
        *[f"--gin_bindings={b}" for b in TINY],
    ]
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    # One device: the 8 the suite simulates would only make the run's compile and save longer.
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    return workdir, proc.returncode, proc.stdout, proc.stderr


@pytest.mark.slow  # the chartjax-train process
def test_train_ends_saying_where_the_report_went(run):
    workdir, status, out, err = run
    assert status == 0, err[-2000:]
    report = workdir / "eval" / "validation" / "step_2" / "report.html"
    assert report.read_text().count('data-match="') == 16  # a row a validation example
    assert out == f"validation report: {report}\n"
    last = _last_frame(err, "eval validation")
    assert "100%" in last and " 2/2 " in last, last


@pytest.mark.slow  # the chartjax-train process
def test_train_is_quiet(run):
    """No start-up banner on stderr (chartjax.quiet's default, on a real command: train imports
    tensorflow late, after etils has asked importlib.util.find_spec("tensorflow")), and
    chartjax's own log lines kept."""
    _, status, _, err = run
    assert status == 0, err[-2000:]
    assert "absl::InitializeLog" not in err and "oneDNN" not in err
    assert quiet.strip_noise(err) == err  # no C++ INFO line left
    assert " INFO stopped at step 2" in err


@pytest.mark.slow  # the chartjax-train process
def test_eval_of_a_slice_is_readable_and_its_folder_shell_safe(run, capsys):
    workdir, status, _, _ = run
    assert status == 0
    gin.clear_config()
    try:
        assert eval_cli.main([f"--workdir={workdir}", "--split=validation[50%:]"]) == 0
    finally:
        gin.clear_config()
    captured = capsys.readouterr()
    folder = workdir / "eval" / "validation_50pct_" / "step_2"
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["split"] == "validation[50%:]"
    assert not (workdir / "eval" / "validation[50%:]").exists()
    summary = ", ".join(f"{k}={v:.4f}" for k, v in metrics["metrics"].items())
    assert captured.out == f"validation[50%:]: {summary}\n  {folder / 'report.html'}\n"
    last = _last_frame(captured.err, "eval validation[50%:]")
    assert "100%" in last and " 2/2 " in last, last


def test_split_folders_need_no_quoting():
    assert eval_lib.split_folder("validation1") == "validation1"
    assert eval_lib.split_folder("train[95%:]") == "train_95pct_"
    assert eval_lib.split_folder("train[:95%]") == "train__95pct"
    assert eval_lib.split_folder("train[-1:]") == "train_-1_"
    assert (
        eval_lib.split_folder("validation1[:10%]+validation2") == "validation1__10pct+validation2"
    )
    assert eval_lib.split_folder("a b/c") == "a_b_c"


def test_runs_written_under_the_old_folder_names_still_read(tmp_path):
    """The readers take the split from metrics.json, so `eval/train[95%:]/` of an older run and
    `eval/train_95pct_/` of a newer one are the same split."""
    for folder, step in (("train[95%:]", 1), ("train_95pct_", 2)):
        d = tmp_path / "eval" / folder / f"step_{step}"
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(
            json.dumps({"split": "train[95%:]", "step": step, "metrics": {"accuracy": step / 4}})
        )
    assert plots.read_eval_metrics(str(tmp_path)) == {
        "train[95%:]": [(1, {"accuracy": 0.25}), (2, {"accuracy": 0.5})]
    }
    assert paper_tables.read_run(str(tmp_path))["train[95%:]"]["step"] == 2
