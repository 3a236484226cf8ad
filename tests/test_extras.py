"""The accelerator extras resolve, for Python 3.11 and 3.12, with the CPU TensorFlow of the input
pipeline: `pip install --dry-run --report` against PyPI, so a new jax, flax or TensorFlow release
that breaks `pip install 'chartjax[cuda]'` / `'chartjax[tpu]'` fails here.

pip evaluates environment markers with the running interpreter even under `--python-version`,
so the test evaluates pyproject's markers for the target Python itself and hands pip plain
requirements: the extra's plus the core array stack (jax, flax, optax, orbax-checkpoint,
tensorflow-cpu, tensorstore, numpy, scipy). The rest of the core (sdist-only packages such as
rouge-score) cannot resolve under `--only-binary`. Wheel metadata is read with HTTP range
requests (`--use-feature=fast-deps`), so the multi-GB CUDA wheels are not downloaded; without that
feature (a newer pip) the resolve falls back to downloading. Linux x86_64 wheels are asked for.
"""

import json
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PYTHONS = ("3.11", "3.12")
EXTRAS = ("cuda", "tpu")
STACK = {"jax", "flax", "optax", "orbax-checkpoint", "tensorflow-cpu", "tensorstore", "numpy"}
STACK |= {"scipy"}
PLATFORMS = [f"manylinux_2_{v}_x86_64" for v in range(17, 36)]
PLATFORMS += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]


def requirements(python: str, extra: str) -> list[str]:
    """pyproject's array stack and `extra` requirements that apply on `python`, markers
    evaluated and dropped."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = {"python_version": python, "python_full_version": f"{python}.0", "extra": extra}
    out = []
    for text in project["dependencies"] + project["optional-dependencies"][extra]:
        req = Requirement(text)
        if req.name not in STACK and text not in project["optional-dependencies"][extra]:
            continue
        if req.marker is None or req.marker.evaluate(env):
            req.marker = None
            out.append(str(req))
    return out


def resolve(python: str, extra: str) -> dict[str, Version]:
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q"]
    cmd += ["--python-version", python, "--only-binary=:all:", "--report", "-"]
    cmd += [f"--platform={p}" for p in PLATFORMS]
    reqs = requirements(python, extra)
    proc = subprocess.run(
        [*cmd, "--use-feature=fast-deps", *reqs], capture_output=True, text=True, timeout=300
    )
    if proc.returncode and "fast-deps" in proc.stderr and "invalid choice" in proc.stderr:
        proc = subprocess.run([*cmd, *reqs], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{python} [{extra}] {reqs}:\n{proc.stderr[-3000:]}"
    report = json.loads(proc.stdout)
    return {
        i["metadata"]["name"].lower().replace("_", "-"): Version(i["metadata"]["version"])
        for i in report["install"]
    }


@pytest.fixture(scope="module")
def resolved():
    combos = [(p, e) for p in PYTHONS for e in EXTRAS]
    with ThreadPoolExecutor(len(combos)) as pool:
        return dict(zip(combos, pool.map(lambda c: resolve(*c), combos)))


def test_markers_pick_the_jax_range_per_python():
    assert "jax<0.11,>=0.10" in requirements("3.11", "cuda")
    assert "jax<0.13,>=0.10" in requirements("3.12", "cuda")
    assert "jax[tpu]<0.13,>=0.10" in requirements("3.12", "tpu")
    assert "tensorflow-cpu<2.22,>=2.21" in requirements("3.11", "tpu")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"


@pytest.mark.parametrize("python", PYTHONS)
@pytest.mark.parametrize("extra", EXTRAS)
def test_extra_resolves_next_to_cpu_tensorflow(resolved, python, extra):
    got = resolved[(python, extra)]
    jax = got["jax"]
    assert got["jaxlib"].release[:2] == jax.release[:2]
    assert jax < Version("0.11") if python == "3.11" else jax >= Version("0.11")
    for name in ("flax", "optax", "orbax-checkpoint", "tensorflow-cpu"):
        assert name in got, name
    assert "tensorflow" not in got  # the CPU build only: the accelerators are jax's
    if extra == "cuda":
        assert got["jax-cuda12-plugin"] == jax and "nvidia-cudnn-cu12" in got
    else:
        assert "libtpu" in got


def test_tensorboard_is_the_viz_extra_not_a_core_dependency():
    # The events are written with tensorboardX (core); TensorBoard itself is for browsing them.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {Requirement(r).name for r in project["dependencies"]}
    viz = {Requirement(r).name for r in project["optional-dependencies"]["viz"]}
    assert "tensorboard" in viz and "tensorboard" not in core and "tensorboardX" in core
