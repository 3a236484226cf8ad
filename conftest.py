"""Repository-wide pytest set-up: 8 simulated CPU devices for the sharding tests.

Must run before jax is imported anywhere, so it lives at the root and sets XLA_FLAGS.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Tests check numerics, not speed: skip most XLA optimizations to halve compile time
# (as Flax's example tests do). Subprocess tests inherit it through the environment.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
