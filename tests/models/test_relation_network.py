"""FigureQA baselines: output shapes, object grid, and the decomposed first g layer."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from chartjax.models import relation_network as rn


def _batch(b=3, size=32):
    return {
        "image": jnp.asarray(
            np.random.default_rng(0).integers(0, 256, (b, size, size, 3)), jnp.uint8
        ),
        "question_tokens": jnp.asarray([[1, 5, 6, 2, 0, 0]] * b, jnp.int32),
        "question_length": jnp.asarray([4] * b, jnp.int32),
    }


@pytest.mark.parametrize("kind", ["rn", "cnn_lstm", "text_only"])
def test_output_shapes(kind):
    cfg = rn.RNConfig(kind=kind, vocab_size=16, image_size=32, conv_layers=3)
    # Shapes only (traced, not run, as test_paper_sizes): every kind runs for real in the
    # FigureQA recipes' train steps (tests/tasks/test_figureqa.py) and the numerics tests.
    model = nnx.eval_shape(lambda: rn.build(cfg, rngs=nnx.Rngs(0)))
    for train in (True, False):
        out = nnx.eval_shape(lambda m, b, train=train: m(b, train=train), model, _batch())
        assert out.shape == (3, 2)


def test_paper_sizes():
    cfg = rn.RNConfig()  # 256 px, 5 stride-2 convs: the paper's 8x8x64 feature map
    assert cfg.grid == 8
    model = nnx.eval_shape(lambda: rn.build(cfg, rngs=nnx.Rngs(0)))
    objs = jax.eval_shape(
        lambda m, x: m.objects(x, train=False),
        model,
        jax.ShapeDtypeStruct((2, 256, 256, 3), jnp.uint8),
    )
    assert objs.shape == (2, 64, 66)  # 64 objects of 64 channels + (row, col)


@pytest.mark.slow
def test_first_g_layer_equals_dense_on_concatenated_pairs():
    cfg = rn.RNConfig(
        vocab_size=16, image_size=16, conv_layers=2, conv_channels=4, lstm_dim=3, g_dim=5
    )
    m = rn.build(cfg, rngs=nnx.Rngs(1))
    objs = jax.random.normal(jax.random.key(0), (2, 4, 6))
    q = jax.random.normal(jax.random.key(1), (2, 6))
    fast = nnx.jit(  # one compile, not one per eager op
        lambda m, objs, q: (
            m.g_obj_j(objs)[:, None] + m.g_obj_i(objs)[:, :, None] + m.g_q(q)[:, None, None]
        )
    )(m, objs, q)
    w = jnp.concatenate([m.g_obj_j.kernel[...], m.g_obj_i.kernel[...], m.g_q.kernel[...]])
    n = objs.shape[1]
    pairs = jnp.concatenate(
        [
            jnp.broadcast_to(objs[:, None, :, :], (2, n, n, 6)),  # o_j
            jnp.broadcast_to(objs[:, :, None, :], (2, n, n, 6)),  # o_i
            jnp.broadcast_to(q[:, None, None, :], (2, n, n, 6)),
        ],
        -1,
    )
    slow = pairs @ w + m.g_obj_j.bias[...]
    np.testing.assert_allclose(fast, slow, rtol=1e-5, atol=1e-5)


def test_question_state_ignores_padding():
    cfg = rn.RNConfig(kind="text_only", vocab_size=16, lstm_dim=4, f_dim=8)
    m = rn.build(cfg, rngs=nnx.Rngs(0))
    question = nnx.jit(lambda m, tokens, n: m.question(tokens, n))  # not op by op
    a = question(m, jnp.asarray([[1, 5, 2, 0, 0]]), jnp.asarray([3]))
    b = question(m, jnp.asarray([[1, 5, 2, 7, 9]]), jnp.asarray([3]))
    np.testing.assert_allclose(a, b, rtol=1e-6)
