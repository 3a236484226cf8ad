"""The independent minimal RN (tests/models/mini_rn.py), the oracle the package RN is set against."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.models import mini_rn as fs

# Its fixtures build and compile models (or train a run) for every test: the whole file is slow.
pytestmark = pytest.mark.slow


def _mini(seed=0):
    return fs.mini_rn_init(
        jax.random.key(seed), vocab=16, conv_layers=2, ch=4, emb=5, hid=3, g=6, f=7
    )


def _batch(tokens, lengths, b=None):
    b = b or len(tokens)
    images = np.random.default_rng(0).integers(0, 256, (b, 16, 16, 3)).astype(np.uint8)
    return {
        "image": jnp.asarray(images),
        "question_tokens": jnp.asarray(tokens),
        "question_length": jnp.asarray(lengths),
    }


def test_mini_rn_question_is_the_state_after_the_last_real_token():
    params, _ = _mini()
    padded = fs.mini_question(
        params, jnp.asarray([[1, 5, 2, 0, 0], [1, 6, 7, 2, 9]]), jnp.asarray([3, 4])
    )
    for row, tokens in enumerate(([1, 5, 2], [1, 6, 7, 2])):
        alone = fs.mini_question(params, jnp.asarray([tokens]), jnp.asarray([len(tokens)]))
        np.testing.assert_allclose(padded[row], alone[0], rtol=1e-6, atol=1e-7)
    full = fs.mini_question(params, jnp.asarray([[1, 5, 2, 0, 0]]), jnp.asarray([5]))
    assert np.abs(np.asarray(full[0] - padded[0])).max() > 1e-3  # padding steps would move it
    logits, _ = fs.mini_rn_apply(params, _mini()[1], _batch([[1, 5, 2]] * 2, [3, 3]), False)
    assert logits.shape == (2, 2)


def test_mini_rn_batchnorm_running_averages():
    params, state = _mini()
    batch = _batch([[1, 5, 2]] * 4, [3] * 4)
    _, new = fs.mini_rn_apply(params, state, batch, True)
    # momentum 0.9 from (0, 1): the running mean moved to 0.1 * the batch mean (> 0 after ReLU)
    first = np.asarray(new["bn"][0]["mean"])
    assert (first > 0).all() and (first < 1).all()
    # eval mode uses the running statistics: one example alone == the same one in a batch
    full, _ = fs.mini_rn_apply(params, new, batch, False)
    one, _ = fs.mini_rn_apply(params, new, {k: v[:1] for k, v in batch.items()}, False)
    np.testing.assert_allclose(full[:1], one, rtol=1e-5, atol=1e-6)


def test_mini_rn_sum_is_the_mean_times_the_pair_count_before_f():
    # f's first layer sees sum = n^2 * mean (n = 16 objects: a 16 px image after 2 convs):
    # with a linear f (weights only in its first layer, identity after) the logits scale too.
    params, state = _mini()
    params["f"] = [
        {"w": params["f"][0]["w"][:, :2], "b": jnp.zeros(2)},
    ]
    batch = _batch([[1, 5, 2]] * 2, [3, 3])
    mean, _ = fs.mini_rn_apply(params, state, batch, False, agg="mean")
    total, _ = fs.mini_rn_apply(params, state, batch, False, agg="sum")
    np.testing.assert_allclose(total, 256 * mean, rtol=1e-5)
