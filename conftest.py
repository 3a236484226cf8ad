"""Repository-wide pytest set-up: 8 simulated CPU devices for the sharding tests (on one xdist
worker; the others simulate 1: tests/xdist_devices.py), and the tiny
HF checkpoints (DeBERTa, TAPAS, BART with their tokenizer files) several test folders share.

Must run before jax is imported anywhere, so it lives at the root and sets XLA_FLAGS.
"""

import os
import shutil
import tempfile

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# 8 devices on xdist's first worker (and without xdist), 1 on the others: tests/xdist_devices.py
# sends the files marked multi_device to the first.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
_DEVICES = 8 if _WORKER == "gw0" else 1
flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:
    os.environ["XLA_FLAGS"] = (
        flags + f" --xla_force_host_platform_device_count={_DEVICES}"
    ).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Tests check numerics, not speed: skip most XLA optimizations to halve compile time
# (as Flax's example tests do). Subprocess tests inherit it through the environment.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
# One persistent compilation cache for the whole run: the xdist workers and every chartjax-train
# / -eval / -infer subprocess they start compile the same tiny models again and again; with the
# cache each compiles once. The controlling process makes the folder before the workers start
# (they and their subprocesses inherit the environment) and removes it at the end;
# CHARTJAX_TEST_JAX_CACHE names a folder that outlives runs instead (faster local reruns; JAX's
# cache keys hold the versions, flags and backend).
_OWN_CACHE = None
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    if os.environ.get("CHARTJAX_TEST_JAX_CACHE"):
        os.environ["JAX_COMPILATION_CACHE_DIR"] = os.environ["CHARTJAX_TEST_JAX_CACHE"]
    else:
        _OWN_CACHE = tempfile.mkdtemp(prefix="chartjax-test-jax-cache-")
        os.environ["JAX_COMPILATION_CACHE_DIR"] = _OWN_CACHE
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")


# A `slow` test (a training run, several processes) costs about as much as this many others.
_SLOW_WEIGHT = 25


def pytest_collection_modifyitems(config, items):
    """The heaviest test files first. `make test` hands whole files to the two workers in
    collection order (`--dist loadfile --no-loadscope-reorder`); xdist's own order (most tests
    first) ran the few-test, many-process files last, one worker busy for minutes while the
    other idled. A file's weight: its slow tests x _SLOW_WEIGHT + its other tests. A stable
    sort: the tests of a file keep their order."""
    weight, first = {}, {}
    for i, item in enumerate(items):
        slow = item.get_closest_marker("slow") is not None
        weight[item.path] = weight.get(item.path, 0) + (_SLOW_WEIGHT if slow else 1)
        first.setdefault(item.path, i)
    items.sort(key=lambda item: (-weight[item.path], first[item.path]))


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown to pytest without xdist
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") == "loadfile":
        from tests.xdist_devices import DeviceScheduling

        return DeviceScheduling(config, log)
    return None


def pytest_runtest_setup(item):
    # A guard on the scheduler: a multi_device test must never meet a one-device worker.
    if item.get_closest_marker("multi_device"):
        import jax

        if jax.device_count() < 8:
            pytest.fail(f"{item.nodeid} needs 8 devices; {_WORKER} has {jax.device_count()}")


def pytest_unconfigure(config):
    if _OWN_CACHE is not None:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)


class _TinyHfCheckpoints(dict):
    """family -> directory, each written on first use."""

    def __init__(self, root):
        super().__init__()
        self.root = root

    def __missing__(self, family: str) -> str:
        from chartjax.testing import tiny_hf

        seed = 7 + ("deberta", "tapas", "bart").index(family)
        self[family] = tiny_hf.tiny_checkpoint(family, str(self.root / family), seed=seed)
        return self[family]


@pytest.fixture(scope="session")
def tiny_hf_checkpoints(tmp_path_factory):
    """Tiny random HF checkpoint directories (weights, config.json, the family's own tokenizer
    files) of "deberta" (v3), "tapas" and "bart", each written on first use, once per test
    process; read-only (copy one before changing it)."""
    return _TinyHfCheckpoints(tmp_path_factory.mktemp("tiny_hf"))
