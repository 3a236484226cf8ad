"""chartjax-train refuses an evaluation-only recipe (`recipe.kind = "eval"`) with a message that
says what to run instead, before it creates the workdir; run as the command runs, in a fresh
interpreter. deplot_statista_zero binds no `train.task`: the refusal comes before gin's
missing-binding error."""

import os
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_chartjax_train_refuses_an_evaluation_only_recipe(tmp_path):
    recipe = "deplot_statista_zero"
    workdir = tmp_path / "run"
    cmd = [
        sys.executable,
        "-c",
        "import sys; from chartjax.tools.train import main; sys.exit(main(sys.argv[1:]))",
        f"--gin_file=tasks/{recipe}.gin",
        f"--workdir={workdir}",
        "--gin_bindings=VOCAB = 'spm.model'",
    ]
    env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 1, out.stderr
    assert f"chartjax-train: tasks/{recipe}.gin is an evaluation-only recipe" in out.stderr
    assert f"chartjax-eval --gin_file=tasks/{recipe}.gin --workdir=<workdir>" in out.stderr
    assert "Traceback" not in out.stderr
    assert not workdir.exists()
