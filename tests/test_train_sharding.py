"""A FigureQA-baseline train step on 8 simulated CPU devices equals the single-device step,
under every rules preset (fp32, atol/rtol 1e-5: sharded reductions reorder sums)."""

import jax
import pytest

from chartjax import mesh as mesh_lib
from chartjax.models import relation_network as rn
from chartjax.tasks.smoke import synthetic
from tests.step_equivalence import PRESETS, assert_same, run_steps, sharded_leaves

CFG = rn.RNConfig(
    kind="rn",
    vocab_size=32,
    image_size=16,
    conv_layers=2,
    conv_channels=8,
    embed_dim=8,
    lstm_dim=8,
    g_layers=3,
    g_dim=16,
    f_dim=16,
    dropout=0.25,
)
TASK = synthetic.make_task(image_size=16, vocab_size=32)


def _model_fn(rngs):
    return rn.build(CFG, rngs=rngs)


@pytest.fixture(scope="module")
def single_device():
    return run_steps(_model_fn, TASK, jax.devices()[:1], (1, 1), "data_parallel")


@pytest.mark.slow
@pytest.mark.parametrize("preset,shape", PRESETS)
@pytest.mark.multi_device
def test_sharded_step_equals_single_device(single_device, preset, shape):
    assert len(jax.devices()) == 8
    result = run_steps(_model_fn, TASK, jax.devices(), shape, preset)
    assert_same(result, single_device)
    # The preset really shards something (data_parallel: nothing).
    assert (sharded_leaves(result[3]) > 0) == (preset != "data_parallel")


def test_unknown_logical_axis_is_an_error():
    with pytest.raises(KeyError, match="unknown logical axis 'embd'"):
        mesh_lib.logical_to_spec(("embd",), mesh_lib.axis_rules("fsdp"))


def test_mesh_shape_errors():
    with pytest.raises(ValueError, match="does not divide"):
        mesh_lib.make_mesh((-1, 3))
