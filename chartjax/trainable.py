"""Which parameters train: freezing by name patterns, and LoRA's adapters-only default.

    trainable.freeze = ("^encoder[.]",)   # never updated (here: the whole encoder)
    trainable.train = ("norm",)           # only these train (with LoRA: besides the adapters)

Names are dotted parameter paths (`encoder.layers.0.attention.query.kernel`), matched with
`re.search`; a pattern that matches no parameter is refused, naming it. With nothing bound every
parameter trains, unless the model has LoRA adapters (chartjax/models/lora.py): then only the
adapters do.

Frozen parameters stay in the train state (checkpoints hold the whole model) but keep no
optimizer state: `wrap` routes them to `optax.set_to_zero` in an `optax.multi_transform`, so
weight decay and the optimizer's moments never see them. The train step does not differentiate
them (`stop_frozen`) and writes them back as they were (`keep_frozen`): bit-identical after any
number of steps. When everything trains nothing is wrapped, so the optimizer state (and older
checkpoints) keep their layout.

Integer parameters (int8 base kernels under LoRA, `LoraConfig.base_dtype`) and their scales are
frozen by nature: marking one to train is refused, and the train step's gradient of an integer
one is a zero of its own dtype (`zero_int_grads`), never computed.
"""

from __future__ import annotations

import re

import gin
import jax
import jax.numpy as jnp
import optax
from flax import nnx

from chartjax.config_checks import ConfigError
from chartjax.models import lora
from chartjax.models.quantize import SCALE

TRAIN, FREEZE = "train", "freeze"


def _paths(params: dict) -> list[str]:
    return [
        ".".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)
        for path, _ in jax.tree_util.tree_flatten_with_path(params)[0]
    ]


def _check_patterns(patterns, names: list[str], where: str) -> tuple[str, ...]:
    patterns = (patterns,) if isinstance(patterns, str) else tuple(patterns)
    for p in patterns:
        try:
            rx = re.compile(p)
        except re.error as e:
            raise ValueError(f"{where}: bad pattern {p!r} ({e})") from None
        if not any(rx.search(n) for n in names):
            raise ConfigError(  # a setting: one line from the CLIs (status 2)
                f"{where}: pattern {p!r} matches no parameter (names look like {names[0]!r})"
            )
    return patterns


@gin.configurable("trainable")
def patterns(train=(), freeze=()) -> dict:
    """The bound `trainable.train` / `trainable.freeze` (checked against the model in `labels`,
    outside gin, so a bad one is a one-line error)."""
    return {"train": train, "freeze": freeze}


def labels(params: dict, *, train=(), freeze=()) -> dict | None:
    """A tree like `params` of TRAIN / FREEZE (see the module docstring), or None when every
    parameter trains."""
    names = _paths(params)
    train = _check_patterns(train, names, "trainable.train")
    freeze = _check_patterns(freeze, names, "trainable.freeze")
    adapters = any(lora.is_adapter(n) for n in names)

    def label(name: str) -> str:
        if any(re.search(p, name) for p in freeze):
            return FREEZE
        if adapters and lora.is_adapter(name):
            return TRAIN
        if train or adapters:
            return TRAIN if any(re.search(p, name) for p in train) else FREEZE
        return TRAIN

    flat = [label(n) for n in names]
    for n, lab, x in zip(names, flat, jax.tree.leaves(params)):
        # An int8 kernel and its scale (models/quantize.py: their matmul has no gradient).
        if lab == TRAIN and (jnp.issubdtype(x.dtype, jnp.integer) or n.endswith(SCALE)):
            raise ConfigError(
                f"trainable: {n} belongs to a kernel stored as int8 (LoraConfig.base_dtype) "
                "and cannot train; leave it out of trainable.train"
            )
    if all(x == TRAIN for x in flat):
        return None
    if all(x == FREEZE for x in flat):
        raise ValueError("trainable: every parameter is frozen; nothing would train")
    return jax.tree.unflatten(jax.tree.structure(params), flat)


def model_labels(model_fn) -> dict | None:
    """`labels` of the parameters of `model_fn`'s model (built abstractly: nothing is
    initialised)."""
    model = nnx.eval_shape(lambda: model_fn(rngs=nnx.Rngs(0)))
    return labels(nnx.to_pure_dict(nnx.state(model, nnx.Param)), **patterns())


def wrap(tx: optax.GradientTransformation, tree: dict | None) -> optax.GradientTransformation:
    """`tx` for the trainable parameters only; frozen ones get zero updates and no state."""
    if tree is None:
        return tx
    return optax.multi_transform({TRAIN: tx, FREEZE: optax.set_to_zero()}, tree)


def stop_frozen(params: dict, tree: dict | None) -> dict:
    """Frozen leaves as constants: no weight gradient is computed for them."""
    if tree is None:
        return params
    return jax.tree.map(
        lambda p, lab: p if lab == TRAIN else jax.lax.stop_gradient(p), params, tree
    )


def zero_int_grads(grads: dict, params: dict) -> dict:
    """The gradient tree of `jax.grad(..., allow_int=True)` with each integer parameter's
    float0 placeholder replaced by zeros of the parameter's dtype, so that the optimizer (whose
    frozen branch ignores them) and `keep_frozen` see one tree of arrays."""
    return jax.tree.map(
        lambda g, p: jnp.zeros_like(p) if g.dtype == jax.dtypes.float0 else g, grads, params
    )


def keep_frozen(new: dict, old: dict, tree: dict | None) -> dict:
    """`new` with the frozen leaves taken from `old` unchanged (not `old + 0`, which would turn
    -0.0 into 0.0)."""
    if tree is None:
        return new
    return jax.tree.map(lambda n, o, lab: n if lab == TRAIN else o, new, old, tree)


def count(params: dict, tree: dict | None) -> int:
    """How many parameter values train."""
    if tree is None:
        return sum(int(x.size) for x in jax.tree.leaves(params))
    return sum(
        int(x.size)
        for x, lab in zip(jax.tree.leaves(params), jax.tree.leaves(tree))
        if lab == TRAIN
    )
