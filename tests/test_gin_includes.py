"""Gin includes resolve to chartjax's gin_configs/ whatever folders the working directory has
(issue 27 item 1): a cwd `runs/` folder made `include 'runs/figureqa_adam.gin'` crash in gin's
package-resource lookup (TypeError) under `python -c` / `python -m`, whose sys.path holds the
cwd; a cwd `tasks/x.gin` could stand in for a shipped file included by name. A user's own
`--gin_file` (and the user files it includes by cwd-relative path) still works.

Run in a fresh interpreter from a temporary cwd, as `python -m chartjax.tools.*` runs."""

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, sys, gin
from chartjax import config
config.parse_gin(sys.argv[1:])
print(json.dumps({k: gin.query_parameter(k) for k in (
    "train.num_train_steps", "make_optimizer.name", "RNConfig.image_size", "recipe.gin_files")}))
"""


def _parse(cwd, *files):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *files],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_includes_resolve_to_gin_configs_from_a_cwd_with_the_same_folders(tmp_path):
    for folder in ("runs", "tasks", "models"):
        (tmp_path / folder).mkdir()
    # Decoys named as shipped files: gin would fail on their text if it read them.
    for name in ("runs/figureqa_adam.gin", "models/relation_network.gin"):
        (tmp_path / name).write_text("this is not gin\n")
    # A user's own recipe in runs/, including a shipped recipe and a file of the user's.
    (tmp_path / "models" / "mine.gin").write_text("RNConfig.image_size = 48\n")
    (tmp_path / "runs" / "mine.gin").write_text(
        "include 'tasks/figureqa_demo_rn.gin'\n"
        "include 'models/mine.gin'\n"
        "train.num_train_steps = 7\n"
    )

    got = _parse(tmp_path, "tasks/figureqa_demo_rn.gin")
    assert got["train.num_train_steps"] == 1200 and got["make_optimizer.name"] == "adam"
    assert got["RNConfig.image_size"] == 64

    got = _parse(tmp_path, "runs/mine.gin")
    assert got["train.num_train_steps"] == 7 and got["make_optimizer.name"] == "adam"
    assert got["RNConfig.image_size"] == 48
    assert got["recipe.gin_files"] == ["runs/mine.gin"]
