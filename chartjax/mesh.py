"""Device mesh, logical-axis rules presets and multi-host start-up (t5x vocabulary).

Parameters and activations carry *logical* axis names (`batch, length, embed, mlp, heads, kv,
joined_kv, vocab, relpos_buckets, abspos_buckets, patch`, plus `conv_in, conv_out` for the
FigureQA CNNs). A rules preset maps each logical name to a mesh axis of the `('data', 'model')`
mesh, or to None (replicated). Presets are chosen in `gin_configs/hardware/`.

This is the gin-configurable edge; the rules context and the constraint helpers live in the
gin-free `chartjax.sharding` (models import it) and are re-exported here for the loops.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import gin
import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding

from chartjax.sharding import activate, constrain, logical_to_spec, tree_shardings

__all__ = [
    "MESH_AXES",
    "RULES_PRESETS",
    "activate",
    "axis_rules",
    "batch_sharding",
    "constrain",
    "initialize_distributed",
    "logical_to_spec",
    "make_mesh",
    "tree_shardings",
]

MESH_AXES = ("data", "model")

_PARAM_AXES = (
    "embed",
    "mlp",
    "heads",
    "kv",
    "joined_kv",
    "vocab",
    "relpos_buckets",
    "abspos_buckets",
    "patch",
    "conv_in",
    "conv_out",
)

# Each preset names every logical axis explicitly so that a typo in a model shows up as
# "unknown logical axis" instead of silently replicating a large tensor.
RULES_PRESETS: dict[str, tuple[tuple[str, str | None], ...]] = {
    # Replicated parameters, batch split over every device.
    "data_parallel": (("batch", "data"),) + tuple((a, None) for a in _PARAM_AXES + ("length",)),
    # ZeRO-3 style: parameters (and optimizer state) split over `data` along their embed axis
    # (t5x's parameter_partitioning_dims=1); the batch is split over `data` too.
    "fsdp": (("batch", "data"), ("embed", "data"), ("conv_out", "data"))
    + tuple((a, None) for a in _PARAM_AXES + ("length",) if a not in ("embed", "conv_out")),
    # Megatron style: mlp/heads/vocab split over `model`, batch over `data`.
    "tensor_parallel": (
        ("batch", "data"),
        ("mlp", "model"),
        ("heads", "model"),
        ("joined_kv", "model"),
        ("vocab", "model"),
        ("conv_out", "model"),
    )
    + tuple(
        (a, None)
        for a in _PARAM_AXES + ("length",)
        if a not in ("mlp", "heads", "joined_kv", "vocab", "conv_out")
    ),
}


@gin.configurable
def make_mesh(
    shape: Sequence[int] = (-1, 1),
    axis_names: Sequence[str] = MESH_AXES,
    devices: Sequence[jax.Device] | None = None,
) -> Mesh:
    """A mesh over all (global) devices; one -1 in `shape` takes what is left."""
    devices = list(devices if devices is not None else jax.devices())
    shape = list(shape)
    if shape.count(-1) > 1:
        raise ValueError(f"mesh shape {shape}: at most one -1")
    known = int(np.prod([s for s in shape if s != -1]))
    if -1 in shape:
        if len(devices) % known:
            raise ValueError(f"mesh shape {shape} does not divide {len(devices)} devices")
        shape[shape.index(-1)] = len(devices) // known
    if int(np.prod(shape)) != len(devices):
        raise ValueError(
            f"mesh shape {shape} needs {int(np.prod(shape))} devices, have {len(devices)}"
        )
    # Auto axes: logical-rule code in the t5x/big_vision style assumes them (docs/design.md §4).
    return jax.make_mesh(
        tuple(shape), tuple(axis_names), devices=devices, axis_types=(AxisType.Auto,) * len(shape)
    )


@gin.configurable
def axis_rules(preset: str = "data_parallel") -> tuple[tuple[str, str | None], ...]:
    if preset not in RULES_PRESETS:
        raise ValueError(f"unknown rules preset {preset!r}; choose from {sorted(RULES_PRESETS)}")
    return RULES_PRESETS[preset]


def batch_sharding(mesh: Mesh, rules, ndim: int = 1) -> NamedSharding:
    """Sharding of an input batch: leading axis over `batch`, the rest replicated."""
    return NamedSharding(mesh, logical_to_spec(("batch",) + (None,) * (ndim - 1), rules))


@gin.configurable
def initialize_distributed(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> None:
    """Multi-host start-up through JAX's own runtime (no home-made cluster code).

    Arguments fall back to CHARTJAX_COORDINATOR / CHARTJAX_NUM_PROCESSES / CHARTJAX_PROCESS_ID;
    with none given this is a single-process run. On CPU, collectives go through gloo.
    """
    coordinator_address = coordinator_address or os.environ.get("CHARTJAX_COORDINATOR")
    if coordinator_address is None:
        return
    num_processes = num_processes or int(os.environ["CHARTJAX_NUM_PROCESSES"])
    if process_id is None:
        process_id = int(os.environ["CHARTJAX_PROCESS_ID"])
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=coordinator_address, num_processes=num_processes, process_id=process_id
    )
    logging.info(
        "process %d/%d joined %s", jax.process_index(), jax.process_count(), coordinator_address
    )
