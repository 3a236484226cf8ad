"""The train state and jitted step of chartjax.train, for one device without gin or TensorFlow.

chartjax/train.py and chartjax/mesh.py import gin, which the lent GPU machine lacks, so the
GPU learning scripts (t5_learning.py, figureqa_learning.py) build the same state dict
(`step, params, opt_state, model_state, rng`, chartjax/state.py) unsharded on the default
device and step it with the same function as `chartjax.train.make_train_step`: dropout
reseeded from fold_in(rng, step), BatchNorm statistics carried in `model_state`.
tests/tools/test_gpu_scripts.py checks one step against chartjax.train's on the same state.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from chartjax import state as state_lib


def init(model_fn, tx: optax.GradientTransformation, seed: int):
    """(ModelDef, state) of `model_fn(rngs=...)` as chartjax.state.create seeds it."""
    model = model_fn(rngs=nnx.Rngs(params=seed, dropout=seed + 1, default=seed + 2))
    graphdef, params, rng_state, rest = nnx.split(model, nnx.Param, nnx.RngState, ...)
    params = nnx.to_pure_dict(params)
    state = {
        "step": jnp.zeros((), jnp.int32),
        "params": params,
        "opt_state": tx.init(params),
        "model_state": nnx.to_pure_dict(rest),
        "rng": jax.random.key_data(jax.random.key(seed)),
    }
    return state_lib.ModelDef(graphdef=graphdef, rng_state=rng_state), state


def make_step(model_def: state_lib.ModelDef, loss, tx: optax.GradientTransformation):
    """jit(state, batch) -> (state, metrics); `loss(model, batch, train=True)` -> (loss, aux)."""

    def step(state, batch):
        rng = jax.random.fold_in(jax.random.wrap_key_data(state["rng"]), state["step"])

        def loss_fn(params):
            model = model_def.merge(params, state["model_state"], rng)
            value, aux = loss(model, batch, train=True)
            return value, (aux, state_lib.split_model_state(model))

        (value, (aux, model_state)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            state["params"]
        )
        updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
        new_state = {
            "step": state["step"] + 1,
            "params": optax.apply_updates(state["params"], updates),
            "opt_state": opt_state,
            "model_state": model_state,
            "rng": state["rng"],
        }
        return new_state, {"loss": value, "grad_norm": optax.global_norm(grads), **aux}

    return jax.jit(step, donate_argnums=0)


def model_at(model_def: state_lib.ModelDef, state: dict) -> nnx.Module:
    """The module of `state` for evaluation (no RNG reseeding: eval runs deterministic)."""
    return model_def.merge(state["params"], state["model_state"])
