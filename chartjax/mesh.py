"""Device mesh, logical-axis rules presets and sharding helpers (t5x vocabulary).

Parameters and activations carry *logical* axis names (`batch, length, embed, mlp, heads, kv,
joined_kv, vocab, relpos_buckets, abspos_buckets, patch`, plus `conv_in, conv_out` for the
FigureQA CNNs). A rules preset maps each logical name to a mesh axis of the `('data', 'model')`
mesh, or to None (replicated). Presets are chosen in `gin_configs/hardware/`.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
from collections.abc import Sequence

import gin
import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

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

_ACTIVE: contextvars.ContextVar[tuple[Mesh, tuple] | None] = contextvars.ContextVar(
    "chartjax_mesh", default=None
)


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
    # Auto axes: logical-rule code in the t5x/big_vision style assumes them (engineering §3.4).
    return jax.make_mesh(
        tuple(shape), tuple(axis_names), devices=devices, axis_types=(AxisType.Auto,) * len(shape)
    )


@gin.configurable
def axis_rules(preset: str = "data_parallel") -> tuple[tuple[str, str | None], ...]:
    if preset not in RULES_PRESETS:
        raise ValueError(f"unknown rules preset {preset!r}; choose from {sorted(RULES_PRESETS)}")
    return RULES_PRESETS[preset]


def logical_to_spec(logical: Sequence[str | None] | None, rules) -> PartitionSpec:
    """Map logical axis names to a PartitionSpec; a mesh axis is used at most once."""
    if not logical:
        return PartitionSpec()
    table = dict(rules)
    used, out = set(), []
    for name in logical:
        if name is None:
            out.append(None)
            continue
        if name not in table:
            raise KeyError(f"unknown logical axis {name!r}; rules know {sorted(table)}")
        axis = table[name]
        out.append(None if axis is None or axis in used else axis)
        if axis is not None:
            used.add(axis)
    return PartitionSpec(*out)


def _fits(spec: PartitionSpec, shape: Sequence[int], mesh: Mesh) -> bool:
    if len(spec) > len(shape):
        return False
    for dim, axis in zip(shape, spec):
        if axis is not None and dim % mesh.shape[axis]:
            return False
    return True


def tree_shardings(abstract_tree, logical_tree, mesh: Mesh, rules):
    """NamedShardings for a pytree of arrays from a matching pytree of logical-axis tuples.

    A leaf whose logical axes do not fit its shape (wrong rank, e.g. Adafactor's factored
    moments, or a dimension the mesh axis does not divide) is replicated, and logged once.
    """

    def one(path, leaf, logical):
        spec = logical_to_spec(logical, rules)
        if not _fits(spec, getattr(leaf, "shape", ()), mesh):
            logging.debug(
                "replicating %s: %s does not fit %s",
                jax.tree_util.keystr(path),
                spec,
                getattr(leaf, "shape", ()),
            )
            spec = PartitionSpec()
        return NamedSharding(mesh, spec)

    return jax.tree_util.tree_map_with_path(
        one,
        abstract_tree,
        logical_tree,
        # `type(x) is tuple`: optax's EmptyState() is an empty NamedTuple, a pytree node that
        # must stay a node (a sharding in its place breaks checkpoint restore's tree_map).
        is_leaf=lambda x: (
            x is None or (type(x) is tuple and all(isinstance(a, str | type(None)) for a in x))
        ),
    )


def batch_sharding(mesh: Mesh, rules, ndim: int = 1) -> NamedSharding:
    """Sharding of an input batch: leading axis over `batch`, the rest replicated."""
    return NamedSharding(mesh, logical_to_spec(("batch",) + (None,) * (ndim - 1), rules))


@contextlib.contextmanager
def activate(mesh: Mesh, rules):
    """Make `constrain` effective (inside train/eval steps traced under this context)."""
    token = _ACTIVE.set((mesh, tuple(rules)))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def constrain(x, logical_axes: Sequence[str | None]):
    """Sharding constraint on an activation by logical names; a no-op without a mesh."""
    active = _ACTIVE.get()
    if active is None:
        return x
    mesh, rules = active
    spec = logical_to_spec(logical_axes, rules)
    if not _fits(spec, x.shape, mesh):
        return x
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))


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
