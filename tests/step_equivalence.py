"""Shared by the sharding tests: run train steps of a model on a mesh under a rules preset."""

import os

import jax
import numpy as np

from chartjax import mesh as mesh_lib
from chartjax import optim
from chartjax import state as state_lib
from chartjax import train as train_lib
from chartjax.data import pipeline

TOL = dict(rtol=1e-5, atol=1e-5)  # fp32; sharded reductions reorder sums (DESIGN.md §4)


def run_steps(
    model_fn,
    task,
    devices,
    shape,
    preset,
    *,
    steps=2,
    batch_size=16,
    optimizer=("adam", 1e-2),
    same_batch=False,
    **optimizer_kwargs,
):
    """-> (losses, params, model_state, state spec) after `steps` jitted train steps;
    `optimizer_kwargs` go to optim.make_optimizer (e.g. accumulate_steps)."""
    mesh = mesh_lib.make_mesh(shape, devices=devices)
    rules = mesh_lib.axis_rules(preset)
    tx, sched = optim.make_optimizer(optimizer[0], lr=optimizer[1], **optimizer_kwargs)
    spec, init = state_lib.create(model_fn, tx, mesh, rules, seed=3)
    step = jax.jit(
        train_lib.make_train_step(spec.model_def, task, tx, sched),
        in_shardings=(spec.shardings, None),
        out_shardings=(spec.shardings, None),
    )
    state = init()
    losses = []
    # The feature map in a thread of this process: a loader worker process would cost each test
    # process a start-up (~5 s of CPU) and the loader is not what these tests compare.
    saved = os.environ.get("CHARTJAX_LOADER_WORKERS")
    os.environ["CHARTJAX_LOADER_WORKERS"] = "0"
    try:
        batches = pipeline.train_batches(task, batch_size, 0, 0, 0, 1)
    finally:
        if saved is None:
            del os.environ["CHARTJAX_LOADER_WORKERS"]
        else:
            os.environ["CHARTJAX_LOADER_WORKERS"] = saved
    first = next(batches)
    with mesh_lib.activate(mesh, rules):
        for k in range(steps):
            host = first if same_batch or k == 0 else next(batches)
            state, metrics = step(state, pipeline.to_global(host, mesh, rules, task.model_inputs))
            losses.append(float(metrics["loss"]))
    return losses, jax.device_get(state["params"]), jax.device_get(state["model_state"]), spec


def assert_same(result, reference):
    losses, params, model_state, _ = result
    ref_losses, ref_params, ref_ms, _ = reference
    np.testing.assert_allclose(losses, ref_losses, **TOL)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL), params, ref_params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL), model_state, ref_ms)


def sharded_leaves(spec) -> int:
    """How many parameters the preset actually splits over some mesh axis."""
    return sum(
        any(a is not None for a in s.spec) for s in jax.tree.leaves(spec.shardings["params"])
    )


PRESETS = [("data_parallel", (8, 1)), ("fsdp", (8, 1)), ("tensor_parallel", (4, 2))]
