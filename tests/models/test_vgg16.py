"""FigureQA's CNN+LSTM on VGG-16 features (chartjax/models/relation_network/vgg16.py): the
paper's sizes, and the VGG-16 stays frozen: its weights are no parameters, get no optimizer state
and no update, and come through a train step bit for bit while the head learns."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from chartjax import mesh as mesh_lib
from chartjax import state as state_lib
from chartjax import train as train_lib
from chartjax.interop import vgg16_weights
from chartjax.models.relation_network import vgg16
from chartjax.tasks.core import classification
from chartjax.tasks.core.task import Task
from tests.interop.vgg16_files import TINY_WIDTHS, random_weights, write_keras_h5


def test_paper_sizes():
    # pool5 of 320 x 480 is the paper's 512 x 10 x 15; four stride-1 convs keep 10 x 15 x 64.
    cfg = vgg16.VGG16Config()
    weights = [(jnp.zeros(k), jnp.zeros(b)) for k, b in vgg16.layer_shapes()]
    model = nnx.eval_shape(lambda: vgg16.VGG16CNNLSTM(cfg, weights, "caffe", rngs=nnx.Rngs(0)))
    frozen = nnx.state(model, vgg16.Frozen)
    assert sum(x.size for x in jax.tree.leaves(frozen)) == 14_714_688  # Keras's VGG16 notop
    assert not jax.tree.leaves(nnx.state(model.vgg, nnx.Param))
    assert model.img_fc.kernel.shape == (10 * 15 * 64, 512)
    assert [c.kernel.shape[-1] for c in model.convs] == [128, 128, 64, 64]
    assert model.f.fc1.kernel.shape == (512 + 2 * 256, 512)  # fc 512 ++ LSTM [c; h]
    # Trainable, by hand: head convs 3*3*(512*128 + 128*128 + 128*64 + 64*64) + 384 biases
    # = 848,256; BN scales and offsets 768; fc 9600*512 + 512 = 4,915,712; embedding 88*32 =
    # 2,816; LSTM 4*(32*256) + 4*(256*256 + 256) = 295,936; MLP 1024*512 + 512 + 512*512 + 512
    # + 512*2 + 2 = 788,482.
    assert sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param))) == 6_851_970
    batch = {
        "image": jax.ShapeDtypeStruct((2, 480, 480, 3), jnp.uint8),
        "question_tokens": jax.ShapeDtypeStruct((2, 24), jnp.int32),
        "question_length": jax.ShapeDtypeStruct((2,), jnp.int32),
    }
    feats = jax.eval_shape(lambda m, x: m.features(x), model, batch["image"])
    assert feats.shape == (2, 10, 15, 512)
    assert jax.eval_shape(lambda m, b: m(b, train=False), model, batch).shape == (2, 2)


@pytest.mark.slow
def test_frozen_through_a_train_step(tmp_path):
    weights = random_weights()
    path = str(tmp_path / "vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5")
    write_keras_h5(path, weights)
    cfg = vgg16.VGG16Config(
        weights_path=path,
        input_hw=(32, 32),
        widths=TINY_WIDTHS,
        head_channels=(4, 4, 4, 4),
        fc_dim=8,
        vocab_size=16,
        embed_dim=4,
        lstm_dim=4,
        f_dim=8,
    )
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    rules = mesh_lib.axis_rules("data_parallel")
    tx = optax.adam(1e-2)
    spec, init = state_lib.create(
        lambda rngs: vgg16_weights.build(cfg, rngs), tx, mesh, rules, seed=0
    )
    state = init()
    # The 13 convs are model_state, not params: the optimizer has no moments for them.
    assert "vgg" not in state["params"] and "vgg" in state["model_state"]
    mu = state["opt_state"][0].mu
    assert "vgg" not in mu and set(mu) == set(state["params"])
    got = state["model_state"]["vgg"]
    for i, (k, b) in enumerate(weights):
        np.testing.assert_array_equal(np.asarray(got["kernels"][i]), k)
        np.testing.assert_array_equal(np.asarray(got["biases"][i]), b)

    task = Task(
        name="t",
        source=None,
        features=None,
        loss=classification.softmax_xent_loss,
        predict=classification.argmax_predict,
        evaluate=None,
        model_inputs=(),
    )
    n = jax.device_count()
    rng = np.random.default_rng(0)
    batch = {
        "image": jnp.asarray(rng.integers(0, 256, (n, 24, 24, 3)), jnp.uint8),  # resized to 32
        "question_tokens": jnp.asarray(rng.integers(1, 16, (n, 6)), jnp.int32),
        "question_length": jnp.full((n,), 6, jnp.int32),
        "label": jnp.asarray(rng.integers(0, 2, (n,)), jnp.int32),
    }
    step = jax.jit(train_lib.make_train_step(spec.model_def, task, tx, lambda s: 1e-2))
    before = jax.tree.map(np.asarray, state)
    state, metrics = step(state, batch)
    assert np.isfinite(float(metrics["loss"])) and float(metrics["grad_norm"]) > 0
    after = state["model_state"]["vgg"]
    for i, (k, b) in enumerate(weights):
        np.testing.assert_array_equal(np.asarray(after["kernels"][i]), k)
        np.testing.assert_array_equal(np.asarray(after["biases"][i]), b)
    # The head did learn, and its BatchNorm statistics moved.
    assert not np.array_equal(
        np.asarray(state["params"]["img_fc"]["kernel"]), before["params"]["img_fc"]["kernel"]
    )
    assert not np.array_equal(
        np.asarray(state["model_state"]["norms"][0]["mean"]),
        before["model_state"]["norms"][0]["mean"],
    )
    assert vgg16_weights.PREPROCESSING["keras_h5"] == "caffe"


def test_missing_weights_path_is_refused():
    import pytest

    with pytest.raises(ValueError, match="VGG16Config.weights_path is required"):
        vgg16_weights.build(vgg16.VGG16Config())
