"""Logical-axis sharding helpers (t5x vocabulary), gin-free: models import this module.

A *rules* table maps each logical axis name (`batch, length, embed, mlp, heads, ...`) to a mesh
axis or None (replicated); `chartjax.mesh` holds the gin-selectable presets. `activate(mesh,
rules)` opens the rules context in which `constrain` puts sharding constraints on activations;
outside it `constrain` is a no-op, so models run unchanged in plain unit tests and on one device.
Imports jax only: the lent GPU machine has neither gin nor TensorFlow.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

Rules = tuple[tuple[str, str | None], ...]
Names = Sequence[str | None]

# (mesh, rules) of the innermost `activate`, part of jit's cache key: a step traced outside the
# context is traced again inside it, so a cached trace never lacks (or keeps) the constraints.
_ACTIVE = jax.make_user_context(default_value=None)


def logical_to_spec(logical: Names | None, rules: Rules) -> PartitionSpec:
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


def fits(spec: PartitionSpec, shape: Sequence[int], mesh: Mesh) -> bool:
    """Whether `spec` can shard an array of `shape`: rank and every split dimension divide."""
    if len(spec) > len(shape):
        return False
    for dim, axis in zip(shape, spec):
        if axis is not None and dim % mesh.shape[axis]:
            return False
    return True


def tree_shardings(abstract_tree, logical_tree, mesh: Mesh, rules: Rules):
    """NamedShardings for a pytree of arrays from a matching pytree of logical-axis tuples.

    A leaf whose logical axes do not fit its shape (wrong rank, e.g. Adafactor's factored
    moments, or a dimension the mesh axis does not divide) is replicated, and logged once.
    """

    def one(path, leaf, logical):
        spec = logical_to_spec(logical, rules)
        if not fits(spec, getattr(leaf, "shape", ()), mesh):
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


@contextlib.contextmanager
def activate(mesh: Mesh, rules: Rules):
    """Make `constrain` effective in the functions traced inside this context.

    The context is part of jit's cache key: a jitted step first called outside it is traced
    again when called inside it (and the other way round).
    """
    with _ACTIVE((mesh, tuple(tuple(r) for r in rules))):
        yield


def active() -> tuple[Mesh, Rules] | None:
    """The (mesh, rules) of the innermost `activate`, or None outside every context."""
    return _ACTIVE.value


def constrain(x: jax.Array, names: Names) -> jax.Array:
    """Sharding constraint on an activation by logical names; a no-op outside `activate`,
    and for a shape the rules cannot split (a batch of 1, an odd length)."""
    context = _ACTIVE.value
    if context is None:
        return x
    mesh, rules = context
    spec = logical_to_spec(names, rules)
    if not fits(spec, x.shape, mesh):
        return x
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))
