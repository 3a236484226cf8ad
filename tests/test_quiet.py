"""chartjax.quiet: TensorFlow's start-up banners hidden by default, shown with --verbose."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chartjax import quiet

ROOT = Path(__file__).resolve().parents[1]
CLIS = ["train", "evaluate", "infer", "score", "synth", "convert_checkpoint", "demo"]

# What importing tensorflow-cpu 2.21 printed on this machine, plus lines that must survive.
BANNERS = """\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1796167403.722135   13072 port.cc:153] oneDNN custom operations are on. You may see slightly different numerical results.
I0000 00:00:1796167403.787789   13072 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use available CPU instructions in performance-critical operations.
To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild TensorFlow with the appropriate compiler flags.
2024-05-01 12:00:00.123456: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on.
"""
KEPT = """\
W0000 00:00:1796167403.900000   13072 cuda_executor.cc:1] could not open file to read NUMA node
E0101 12:00:00.000000   13072 tpu.cc:7] TPU driver missing
/x/y.py:3: UserWarning: a warning that matters
plain text
"""


def test_strip_noise_drops_banners_and_keeps_warnings():
    assert quiet.strip_noise(BANNERS) == ""
    assert quiet.strip_noise(BANNERS + KEPT) == KEPT
    # a Python warning right after an INFO line is not taken for its continuation
    info = BANNERS.splitlines(keepends=True)[1]
    assert quiet.strip_noise(info + KEPT.splitlines(keepends=True)[2]) == KEPT.splitlines(True)[2]


def test_setup_strips_the_flag_and_sets_the_log_level(monkeypatch):
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    before = list(sys.meta_path)
    try:
        assert quiet.setup(["--task", "x", "--verbose"]) == ["--task", "x"]
        assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"
        assert quiet.setup(["--task", "x"]) == ["--task", "x"]
        assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"  # a value already set wins
    finally:
        sys.meta_path[:] = before


def test_filtered_stderr_restores_fd2(capfd):
    with quiet.filtered_stderr():
        os.write(2, BANNERS.encode() + KEPT.encode())
    os.write(2, b"after\n")
    assert capfd.readouterr().err == KEPT + "after\n"


@pytest.mark.slow  # imports TensorFlow in a process of its own
def test_verbose_shows_the_tensorflow_banners():
    # The quiet default is checked on a real chartjax-train run, the one
    # tests/test_eval_output.py makes (train imports tensorflow late, after etils has asked
    # importlib.util.find_spec("tensorflow")).
    code = "import sys; from chartjax import quiet; quiet.setup(sys.argv[1:]); import tensorflow"
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    proc = subprocess.run(
        [sys.executable, "-c", code, "--verbose"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    # Which banners TensorFlow prints depends on the CPU (oneDNN's needs AVX-512, absent from
    # some machines): at least one line the quiet filter drops must get through.
    shown = [ln for ln in proc.stderr.splitlines(keepends=True) if not quiet.strip_noise(ln)]
    assert [ln for ln in shown if ln.strip()], proc.stderr


@pytest.mark.parametrize("name", CLIS)
def test_each_cli_calls_setup_before_parsing(name):
    tree = ast.parse((ROOT / "tools" / f"{name}.py").read_text())
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    calls = [
        n
        for n in ast.walk(main)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "setup"
        and getattr(n.func.value, "id", None) == "quiet"
    ]
    assert calls, f"tools/{name}.py main() does not call quiet.setup"
