"""The locks of requirements/ (written by `make lock`, tools/lock.py; docs/environment.md).

Each lock satisfies pyproject.toml's ranges for its Python and extras (markers evaluated for that
Python), pins every requirement it does not say it leaves out, holds no machine-local path, and
docs/environment.md's table is the one the locks give. The accelerator locks hold jax's plugin
of the same version beside the CPU TensorFlow: what `pip install 'chartjax[cuda]'` /
`'chartjax[tpu]'` resolves to, checked on the resolve `make lock` made (no network here; the
newest resolve is `make test-latest`'s).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from chartjax.tools import lock as lock_tool

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
LOCKS = {lock.name: lock for lock in lock_tool.LOCKS}


def requirements(python: str, extras: tuple[str, ...]) -> list[Requirement]:
    """pyproject's requirements that apply on `python` with `extras`, markers evaluated."""
    texts = PROJECT["dependencies"] + [
        r for e in extras for r in PROJECT["optional-dependencies"][e]
    ]
    out = []
    for text in texts:
        req = Requirement(text)
        envs = [
            {"python_version": python, "python_full_version": f"{python}.0", "extra": e}
            for e in extras or ("",)
        ]
        if req.marker is None or any(req.marker.evaluate(env) for env in envs):
            out.append(req)
    return out


def lock_text(name: str) -> str:
    """The lock's text; a clone without it installs from the ranges (make install's
    fallback, with a warning), and the checks of that lock have nothing to check."""
    path = ROOT / "requirements" / LOCKS[name].file
    if not path.exists():
        pytest.skip(f"{path} is absent: make install fell back to pyproject.toml's ranges")
    return path.read_text()


def pins(name: str) -> dict[str, str]:
    return lock_tool.parse(lock_text(name))


def test_the_tested_lock_is_python_3_11_with_dev_hf_and_chartqapro():
    tested = [lock for lock in lock_tool.LOCKS if lock.status == lock_tool.TESTED]
    assert [(lock.python, lock.extras) for lock in tested] == [
        ("3.11", ("dev", "hf", "chartqapro"))
    ]
    assert lock_text("py3.11").startswith(
        "# chartjax dev+hf+chartqapro on Python 3.11: tested here.\n"
    )


@pytest.mark.parametrize("name", list(LOCKS))
def test_lock_satisfies_pyprojects_ranges(name):
    lock, got = LOCKS[name], pins(name)
    checked = 0
    for req in requirements(lock.python, lock.extras):
        key = canonicalize_name(req.name)
        if key in lock.drop:
            assert key not in got, f"{name} leaves {key} out but pins it"
            continue
        assert key in got, f"{name} lacks {req}"
        version = Version(got[key])
        # `torch==2.13.0` admits the local build `2.13.0+cpu` (PEP 440: no local label asked).
        assert req.specifier.contains(version, prereleases=True), (
            f"{name}: {key}=={version} not in {req}"
        )
        checked += 1
    assert checked >= 30 if "dev" in lock.extras else checked >= 25


@pytest.mark.parametrize("name", list(LOCKS))
def test_lock_holds_no_machine_local_path(name):
    text = lock_text(name)
    assert not re.search(r"file:|--find-links|-f |--index-url|(^|\s)/[a-z]", text, re.M), name
    assert "/tmp" not in text and str(ROOT) not in text


def test_the_cpu_torch_is_locked_for_3_11_and_none_for_3_12():
    assert pins("py3.11")["torch"] == "2.13.0+cpu"
    assert not any(k.startswith("nvidia-") or k == "triton" for k in pins("py3.11"))
    assert "torch" not in pins("py3.12")


@pytest.mark.parametrize("python", ["3.11", "3.12"])
@pytest.mark.parametrize("extra", ["cuda", "tpu"])
def test_accelerator_lock_pairs_jax_with_its_plugin_beside_cpu_tensorflow(python, extra):
    got = {k: Version(v) for k, v in pins(f"py{python}-{extra}").items()}
    jax = got["jax"]
    assert got["jaxlib"].release[:2] == jax.release[:2]
    assert jax < Version("0.11") if python == "3.11" else jax >= Version("0.11")
    assert "tensorflow-cpu" in got and "tensorflow" not in got  # accelerators are jax's alone
    if extra == "cuda":
        assert got["jax-cuda12-plugin"] == jax and "nvidia-cudnn-cu12" in got
    else:
        assert "libtpu" in got


def test_docs_table_is_the_one_the_locks_give():
    for name in LOCKS:
        lock_text(name)
    text = (ROOT / "docs" / "environment.md").read_text()
    table = text.split(lock_tool.BEGIN, 1)[1].split(lock_tool.END, 1)[0].strip()
    assert table == lock_tool.generated_table(ROOT / "requirements")


def test_tensorboard_is_the_viz_extra_not_a_core_dependency():
    # The events are written with tensorboardX (core); TensorBoard itself is for browsing them.
    core = {Requirement(r).name for r in PROJECT["dependencies"]}
    viz = {Requirement(r).name for r in PROJECT["optional-dependencies"]["viz"]}
    assert "tensorboard" in viz and "tensorboard" not in core and "tensorboardX" in core
