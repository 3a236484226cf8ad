"""A train step on 8 simulated CPU devices equals the single-device step, under every preset.

Tolerance: fp32, atol/rtol 1e-5 (sharded reductions reorder sums; DESIGN.md §4).
"""

import jax
import numpy as np
import pytest
from flax import nnx

from chartjax import mesh as mesh_lib
from chartjax import optim
from chartjax import state as state_lib
from chartjax import train as train_lib
from chartjax.data import pipeline
from chartjax.models import relation_network as rn
from chartjax.tasks import synthetic

CFG = rn.RNConfig(kind="rn", vocab_size=32, image_size=16, conv_layers=2, conv_channels=8,
                  embed_dim=8, lstm_dim=8, g_layers=3, g_dim=16, f_dim=16, dropout=0.25)


def _model_fn(rngs: nnx.Rngs):
    return rn.build(CFG, rngs=rngs)


def _two_steps(devices, shape, preset):
    mesh = mesh_lib.make_mesh(shape, devices=devices)
    rules = mesh_lib.axis_rules(preset)
    task = synthetic.make_task(image_size=16, vocab_size=32)
    tx, sched = optim.make_optimizer("adam", lr=1e-2)
    spec, init = state_lib.create(_model_fn, tx, mesh, rules, seed=3)
    step = jax.jit(train_lib.make_train_step(spec.model_def, task, tx, sched),
                   in_shardings=(spec.shardings, None), out_shardings=(spec.shardings, None))
    state = init()
    losses = []
    batches = task.train_batches(16, 0, 0, 0, 1)
    with mesh_lib.activate(mesh, rules):
        for _ in range(2):
            batch = pipeline.to_global(next(batches), mesh, rules, task.model_inputs)
            state, metrics = step(state, batch)
            losses.append(float(metrics["loss"]))
    return losses, jax.device_get(state["params"]), jax.device_get(state["model_state"]), spec


@pytest.fixture(scope="module")
def single_device():
    return _two_steps(jax.devices()[:1], (1, 1), "data_parallel")


@pytest.mark.parametrize("preset,shape", [("data_parallel", (8, 1)), ("fsdp", (8, 1)),
                                          ("tensor_parallel", (4, 2))])
def test_sharded_step_equals_single_device(single_device, preset, shape):
    assert len(jax.devices()) == 8
    ref_losses, ref_params, ref_ms, _ = single_device
    losses, params, model_state, spec = _two_steps(jax.devices(), shape, preset)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-5)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5),
                 params, ref_params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5),
                 model_state, ref_ms)
    # The preset really shards something (not everything silently replicated).
    specs = [s.spec for s in jax.tree.leaves(spec.shardings["params"])]
    if preset != "data_parallel":
        assert any(any(a is not None for a in sp) for sp in specs), preset
    else:
        assert all(all(a is None for a in sp) for sp in specs)


def test_unknown_logical_axis_is_an_error():
    with pytest.raises(KeyError, match="unknown logical axis 'embd'"):
        mesh_lib.logical_to_spec(("embd",), mesh_lib.axis_rules("fsdp"))


def test_mesh_shape_errors():
    with pytest.raises(ValueError, match="does not divide"):
        mesh_lib.make_mesh((-1, 3))
