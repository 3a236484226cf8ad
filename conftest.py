"""Repository-wide pytest set-up: 8 simulated CPU devices for the sharding tests, and the tiny
HF checkpoints (DeBERTa, TAPAS, BART with their tokenizer files) several test folders share.

Must run before jax is imported anywhere, so it lives at the root and sets XLA_FLAGS.
"""

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Tests check numerics, not speed: skip most XLA optimizations to halve compile time
# (as Flax's example tests do). Subprocess tests inherit it through the environment.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")


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
