"""ResNet v1.5, Barlow Twins and Show, Attend and Tell: the exact ResNet-50 size, the Barlow Twins
loss on hand-computed matrices, augmentation invariants, masked soft attention, teacher forcing
equal to step-by-step decoding, and the teacher-forced loss falling on one tiny batch."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from chartjax.models.captioning import barlow_twins as bt
from chartjax.models.captioning import show_attend_tell as sat
from chartjax.models.captioning.resnet import ResNet, ResNetConfig

TINY = ResNetConfig(depths=(1, 1), width=4)


def _count(module):
    return sum(x.size for x in jax.tree.leaves(nnx.state(module, nnx.Param)))


def test_resnet50_has_torchvision_size():
    # torchvision's resnet50 has 25,557,032 parameters, of which the 2048 -> 1000 classifier
    # takes 2,049,000; BatchNorm's running statistics are not parameters.
    model = nnx.eval_shape(lambda: ResNet(ResNetConfig(), rngs=nnx.Rngs(0)))
    assert _count(model) == 25_557_032 - 2_049_000
    assert ResNetConfig().out_channels == 2048 and ResNetConfig().stride == 32


def test_tiny_resnet_map_shape():
    # Shapes only (traced, not run): the captioning tests below run the tiny ResNet.
    model = nnx.eval_shape(lambda: ResNet(TINY, rngs=nnx.Rngs(0)))
    x = jax.ShapeDtypeStruct((2, 32, 24, 3), jnp.uint8)
    out = nnx.eval_shape(lambda m, x: m(x, train=False), model, x)
    assert out.shape == (2, 4, 3, TINY.out_channels)  # ceil(24 / 8) = 3


def test_barlow_twins_loss_hand_computed():
    # Standardised over the batch (biased std 1): z1 -> [[-1, -1], [1, 1]], z2 -> [[-1, 1],
    # [1, -1]], so C = z1n^T z2n / 2 = [[1, -1], [1, -1]]: on-diagonal (1-1)^2 + (1+1)^2 = 4,
    # off-diagonal squares 1 + 1 = 2.
    z1 = jnp.asarray([[1.0, 2.0], [3.0, 4.0]])
    z2 = jnp.asarray([[1.0, 0.0], [3.0, -2.0]])
    np.testing.assert_allclose(bt.cross_correlation(z1, z2, eps=0.0), [[1, -1], [1, -1]])
    loss, stats = bt.barlow_twins_loss(z1, z2, lambd=0.5, eps=0.0)
    assert float(loss) == pytest.approx(4 + 0.5 * 2)
    assert float(stats["on_diagonal_mean"]) == pytest.approx(0.0)
    assert float(stats["on_diagonal_loss"]) == pytest.approx(4 / 2)
    assert float(stats["off_diagonal_loss"]) == pytest.approx(2 / 2)
    # Identical views of decorrelated dimensions: C = I and the loss is 0.
    z = jnp.asarray([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
    loss, stats = bt.barlow_twins_loss(z, z, lambd=5e-3, eps=0.0)
    assert float(loss) == pytest.approx(0.0, abs=1e-6)
    assert float(stats["on_diagonal_mean"]) == pytest.approx(1.0)


@pytest.mark.slow
def test_augmentations_keep_range_and_differ_per_key():
    images = jnp.asarray(np.random.default_rng(0).integers(0, 256, (3, 16, 20, 3)), jnp.uint8)
    cfg = bt.BarlowTwinsConfig(resnet=TINY)
    grey_cfg = bt.BarlowTwinsConfig(resnet=TINY, grey_prob=1.0)

    @jax.jit  # one compile instead of one per eager op
    def views(images):
        k0, k1 = jax.random.key(0), jax.random.key(1)
        return (
            bt.augment(k0, images, cfg),
            bt.augment(k1, images, cfg),
            bt.augment(k0, images, cfg),
            bt.augment(k0, images, grey_cfg),
        )

    a, b, a_again, grey = (np.asarray(x) for x in views(images))
    assert a.shape == (3, 16, 20, 3) and a.dtype == np.float32
    assert float(a.min()) >= 0.0 and float(a.max()) <= 255.0
    assert not np.allclose(a, b)
    np.testing.assert_array_equal(a, a_again)
    np.testing.assert_allclose(grey[..., 0], grey[..., 2], atol=1e-4)


def test_attention_sums_to_one_and_masks_padding():
    att = sat.Attention(6, 5, 4, rngs=nnx.Rngs(0))
    rng = np.random.default_rng(0)
    feats = jnp.asarray(rng.normal(size=(2, 7, 6)), jnp.float32)
    mask = jnp.asarray([[True] * 7, [True] * 4 + [False] * 3])
    h = jnp.asarray(rng.normal(size=(2, 5)), jnp.float32)
    run = nnx.jit(lambda att, feats: att(att.project(feats), feats, mask, h))
    ctx, alpha = run(att, feats)
    np.testing.assert_allclose(alpha.sum(-1), [1.0, 1.0], rtol=1e-6)
    assert (alpha[1, 4:] == 0).all() and (alpha[1, :4] > 0).all()
    np.testing.assert_allclose(ctx, jnp.einsum("bn,bnc->bc", alpha, feats), rtol=1e-5)
    # Padded cells change nothing: the same real cells with other padding give the same result.
    other = feats.at[1, 4:].set(100.0)
    ctx2, alpha2 = run(att, other)
    np.testing.assert_allclose(ctx2[1], ctx[1], rtol=1e-5)
    np.testing.assert_allclose(alpha2[1], alpha[1], rtol=1e-6)


def _tiny_sat(**kw):
    cfg = sat.ShowAttendTellConfig(
        vocab_size=12, resnet=TINY, embed_dim=8, attention_dim=8, lstm_dim=16, **kw
    )
    return sat.build(cfg, 0)


def _batch():
    rng = np.random.default_rng(0)
    return {
        "encoder_input_tokens": jnp.asarray(rng.integers(0, 256, (2, 32, 32, 3)), jnp.uint8),
        "decoder_input_tokens": jnp.asarray([[0, 5, 6, 7, 0, 0], [0, 3, 4, 0, 0, 0]], jnp.int32),
        "decoder_target_tokens": jnp.asarray([[5, 6, 7, 1, 0, 0], [3, 4, 1, 0, 0, 0]], jnp.int32),
    }


@pytest.mark.slow
def test_teacher_forcing_equals_step_by_step_decoding():
    model, batch = _tiny_sat(), _batch()

    @nnx.jit  # one compile instead of one per eager op
    def run(model, batch):
        logits, alpha = model.forward(batch, deterministic=True)
        cache = model.init_cache(model.encode(batch), model.encoder_mask(batch))
        steps = []
        for t in range(6):
            step, cache = model.decode_step(batch["decoder_input_tokens"][:, t], cache, t)
            steps.append(step)
        return logits, alpha, jnp.stack(steps, 1)

    logits, alpha, steps = (np.asarray(x) for x in run(model, batch))
    assert logits.shape == (2, 6, 12) and alpha.shape == (2, 6, 16)
    np.testing.assert_allclose(alpha.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(steps, logits, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_teacher_forced_loss_falls_on_one_batch():
    model, batch = _tiny_sat(dropout=0.0), _batch()
    tx = optax.adam(2e-2)  # 10 steps: the loss falls to ~0.1 of its start
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    params, rest = nnx.to_pure_dict(params), nnx.to_pure_dict(rest)
    opt = tx.init(params)

    @jax.jit
    def step(params, rest, opt):
        def f(p):
            m = nnx.merge(graphdef, p, rest)
            loss, aux = sat.loss(m, batch, deterministic=False)
            return loss, (aux, nnx.to_pure_dict(nnx.state(m, nnx.Not(nnx.Param))))

        (loss, (aux, rest)), g = jax.value_and_grad(f, has_aux=True)(params)
        updates, opt = tx.update(g, opt)
        return optax.apply_updates(params, updates), rest, opt, aux

    losses = []
    for _ in range(10):
        params, rest, opt, aux = step(params, rest, opt)
        losses.append(float(aux["caption_loss"]))
    assert np.isfinite(losses).all()
    assert losses[-1] < 0.5 * losses[0]  # ln(12) = 2.48 at the start
    assert all(b < a for a, b in zip(losses[:5], losses[1:6]))
