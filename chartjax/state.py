"""The train state: NNX modules split into plain pytrees that jitted steps carry.

    state = {"step": int32, "params": {...}, "opt_state": optax state,
             "model_state": {...} (e.g. BatchNorm statistics), "rng": uint32[2]}

The graph definition and the RNG-stream variables stay outside the state: the step reseeds the
model's RNG streams from `fold_in(rng, step)`, so a resumed run draws the same dropout masks as
an uninterrupted one. NNX calls live here and in `chartjax/models/` only (docs/design.md §4).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from chartjax import models as _models  # noqa: F401  (turns off Flax's eager sharding)
from chartjax import sharding

ModelFn = Callable[[nnx.Rngs], nnx.Module]


@dataclasses.dataclass(frozen=True)
class ModelDef:
    """What is needed to turn state pytrees back into a module inside a jitted function."""

    graphdef: nnx.GraphDef
    rng_state: dict  # the module's RngState variables (reseeded every step)

    def merge(self, params, model_state, rng: jax.Array | None = None) -> nnx.Module:
        """The module; with `rng`, every RNG stream (dropout, ...) is reseeded from it."""
        rng_state = self.rng_state if rng is None else reseeded(self.rng_state, rng)
        return nnx.merge(self.graphdef, params, rng_state, model_state)


def _split(model: nnx.Module):
    graphdef, params, rngs, rest = nnx.split(model, nnx.Param, nnx.RngState, ...)
    return graphdef, params, rngs, rest


def split_model_state(model: nnx.Module) -> dict:
    """The mutable non-parameter, non-RNG variables (BatchNorm statistics, ...), as a dict."""
    return nnx.to_pure_dict(_split(model)[3])


def _logical(state: nnx.State):
    """Pure-dict tree of each variable's logical axis names (None when unannotated)."""

    def axes(v):
        names = v.get_metadata().get("out_sharding") if isinstance(v, nnx.Variable) else None
        return tuple(names) if names else None

    tree = jax.tree.map(axes, state, is_leaf=lambda x: isinstance(x, nnx.Variable))
    return nnx.to_pure_dict(tree) if isinstance(tree, nnx.State) else tree


def reseeded(rng_state: dict, rng: jax.Array) -> dict:
    """A copy of the RNG-stream variables with stream k keyed fold_in(rng, k), counts at 0.

    Built functionally (no in-place `nnx.reseed`), so it works inside any jax transform.
    """
    leaves, treedef = jax.tree_util.tree_flatten_with_path(rng_state)
    out, k = [], 0
    for path, leaf in leaves:
        # A Variable leaf's path ends in GetAttrKey("value"): its name is the part before it.
        # (Reading path[-1] alone matched nothing, and every step reused the dropout masks
        # drawn at model construction: issue 28, found by the HF training-parity check.)
        names = [getattr(p, "key", getattr(p, "name", None)) for p in path]
        name = names[-2] if len(names) > 1 and names[-1] == "value" else names[-1]
        if name == "key":
            out.append(jax.random.fold_in(_typed(rng), k))
            k += 1
        elif name == "count":
            out.append(jnp.zeros_like(leaf))
        else:
            out.append(leaf)
    return jax.tree_util.tree_unflatten(treedef, out)


def _typed(rng: jax.Array) -> jax.Array:
    return rng if jnp.issubdtype(rng.dtype, jax.dtypes.prng_key) else jax.random.wrap_key_data(rng)


@dataclasses.dataclass(frozen=True)
class StateSpec:
    model_def: ModelDef
    abstract: dict  # ShapeDtypeStructs of the state
    shardings: dict  # NamedShardings of the state


def create(
    model_fn: ModelFn, tx: optax.GradientTransformation, mesh: Mesh, rules, seed: int
) -> tuple[StateSpec, Callable[[], dict]]:
    """Shapes and shardings of the train state, and a jitted init producing it sharded.

    Follows big_vision: eval_shape(init) -> logical axes -> NamedShardings -> jit(init,
    out_shardings=...), so no parameter is ever materialized unsharded on one device.
    """

    def build():
        return _split(model_fn(rngs=nnx.Rngs(params=seed, dropout=seed + 1, default=seed + 2)))

    graphdef, a_params, _, a_rest = nnx.eval_shape(build)
    params_axes, rest_axes = _logical(a_params), _logical(a_rest)

    def init_state():
        _, params, _, rest = build()
        params = nnx.to_pure_dict(params)
        return {
            "step": jnp.zeros((), jnp.int32),
            "params": params,
            "opt_state": tx.init(params),
            "model_state": nnx.to_pure_dict(rest),
            "rng": jax.random.key_data(jax.random.key(seed)),
        }

    abstract = jax.eval_shape(init_state)
    opt_axes = optax.tree_map_params(
        tx,
        # A frozen parameter's place (chartjax/trainable.py) holds optax's leafless MaskedNode.
        lambda v, ax: v if isinstance(v, optax.MaskedNode) else ax,
        abstract["opt_state"],
        params_axes,
        transform_non_params=lambda _: None,
        is_leaf=lambda x: x is None or isinstance(x, tuple),
    )
    axes = {
        "step": None,
        "params": params_axes,
        "opt_state": opt_axes,
        "model_state": rest_axes,
        "rng": None,
    }
    shardings = sharding.tree_shardings(abstract, axes, mesh, rules)

    # RNG-stream variables are tiny; build them replicated and keep them out of the state.
    replicated = NamedSharding(mesh, PartitionSpec())
    rng_state = jax.jit(lambda: build()[2], out_shardings=replicated)()
    model_def = ModelDef(graphdef=graphdef, rng_state=rng_state)
    init = jax.jit(init_state, out_shardings=shardings)
    return StateSpec(model_def=model_def, abstract=abstract, shardings=shardings), init


def num_params(state: dict) -> int:
    return sum(int(x.size) for x in jax.tree.leaves(state["params"]))
