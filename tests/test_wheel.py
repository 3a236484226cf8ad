"""The wheel installs the package as DESIGN.md §2 lays it out, and works outside the checkout.

Built without build isolation (setuptools from .venv) and installed with --no-deps into a fresh
virtualenv that sees .venv's site-packages through a path file (its .pth files are not run, so
the editable install of the checkout stays out), then used from a folder outside the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOT_SOURCE = (".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", "demo_out", "runs")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    # Built from a copy: setuptools' build/ folder would otherwise keep files the tree dropped.
    src = tmp_path_factory.mktemp("src") / "chartjax"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=out,
    )
    (found,) = out.glob("chartjax-*.whl")
    return found


@pytest.mark.slow
def test_wheel_holds_the_package_and_nothing_generic_at_top_level(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"chartjax", "tfds_builders"}, top
    assert "chartjax/tools/score.py" in names and "chartjax/tools/bench/harness.py" in names
    assert "chartjax/gin_configs/tasks/figureqa_rn.gin" in names
    assert "chartjax/gin_configs/hardware/data_parallel.gin" in names
    assert "chartjax/tools/paper_numbers.json" in names  # chartjax.tools.paper_tables reads it
    assert any(n.startswith("tfds_builders/figureqa/dummy_data/") for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "chartjax-score = chartjax.tools.score:main" in text
    assert "chartjax-train = chartjax.tools.train:main" in text


@pytest.mark.slow
def test_installed_wheel_runs_outside_the_checkout(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # .venv's packages, as a plain path entry: no .pth of .venv runs (no editable finder).
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    score = subprocess.run(
        [str(env_dir / "bin" / "chartjax-score"), "--help"],
        capture_output=True,
        text=True,
        cwd=outside,
        env=env,
        timeout=300,
    )
    assert score.returncode == 0, score.stderr
    assert "--task" in score.stdout and "chartqa" in score.stdout
    code = (
        "import chartjax, chartjax.config as c\n"
        "print(chartjax.__file__)\n"
        "print(c.find_gin_file('tasks/figureqa_rn.gin'))\n"
        "print(c.find_gin_file('gin_configs/hardware/fsdp.gin'))\n"
    )
    found = subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        cwd=outside,
        env=env,
        timeout=300,
    )
    assert found.returncode == 0, found.stderr
    package, recipe, preset = found.stdout.split()
    assert package.startswith(site) and not package.startswith(str(REPO))
    assert recipe == os.path.join(site, "chartjax", "gin_configs", "tasks", "figureqa_rn.gin")
    assert preset == os.path.join(site, "chartjax", "gin_configs", "hardware", "fsdp.gin")
