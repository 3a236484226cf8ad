"""Analytic FLOPs: hand-computed value, and XLA's cost_analysis of the compiled training gradient
within 10% (hidden >= 128; XLA also counts elementwise ops, the formula only matmuls)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from chartjax.models import flops, losses, t5, tiny
from chartjax.models.t5 import pix2struct


def _xla_train_flops(model, batch) -> float:
    graphdef = nnx.split(model, nnx.Param, ...)[0]

    def loss(params, rest, b):
        return losses.seq2seq_loss(nnx.merge(graphdef, params, rest), b, deterministic=True)[0]

    _, params, rest = nnx.split(model, nnx.Param, ...)
    cost = jax.jit(jax.grad(loss)).lower(params, rest, batch).compile().cost_analysis()
    return float((cost[0] if isinstance(cost, list) else cost)["flops"])


def test_hand_computed_t5():
    cfg = tiny.tiny_t5(
        emb_dim=2,
        num_heads=1,
        head_dim=3,
        mlp_dim=5,
        vocab_size=7,
        num_encoder_layers=1,
        num_decoder_layers=1,
    )
    f = flops.forward_flops(cfg, enc_len=4, dec_len=2)
    enc = 2 * 4 * (4 * 2 * 3 + 3 * 2 * 5) + 4 * 16 * 3
    dec = 2 * 2 * (6 * 2 * 3 + 3 * 2 * 5) + 2 * 4 * 2 * 2 * 3 + 4 * 4 * 3 + 4 * 2 * 4 * 3
    assert f == {"encoder": enc, "decoder": dec + 2 * 2 * 2 * 7, "total": enc + dec + 56}
    assert flops.train_flops_per_example(cfg, 4, 2)["total"] == 3 * f["total"]
    half = flops.forward_flops(cfg, 4, 2, causal_half=True)["decoder"]
    assert half == f["decoder"] - 2 * 4 * 3


def test_pix2struct_base_planning_number():
    # engineering.md §5.3: base at 2048 patches / 128 targets = 1.82 TFLOP per training example.
    cfg = tiny.tiny_pix2struct(
        emb_dim=768,
        num_heads=12,
        head_dim=64,
        mlp_dim=2048,
        num_encoder_layers=12,
        num_decoder_layers=12,
        vocab_size=50244,
        patch_size=16,
    )
    total = flops.train_flops_per_example(cfg, 2048, 128)["total"]
    assert abs(total / 1e12 - 1.82) < 0.02


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["t5", "pix2struct"])
def test_matches_xla_cost_analysis(kind):
    b, s, t = 1, 96, 16
    one = {"num_encoder_layers": 1, "num_decoder_layers": 1}  # compile time; ratio is per layer
    if kind == "t5":
        cfg = tiny.tiny_t5(
            emb_dim=128, num_heads=4, head_dim=48, mlp_dim=384, vocab_size=1000, **one
        )
        model = nnx.eval_shape(lambda: t5.build(cfg, 0))  # shapes suffice to compile
        enc = jnp.ones((b, s), jnp.int32)
    else:
        cfg = tiny.tiny_pix2struct(
            emb_dim=128,
            num_heads=2,
            head_dim=64,
            mlp_dim=512,
            vocab_size=512,
            patch_size=16,
            max_position_embeddings=128,
            **one,
        )
        model = nnx.eval_shape(lambda: pix2struct.build(cfg, 0))
        x = np.random.default_rng(0).normal(size=(b, s, 2 + 768)).astype(np.float32)
        x[..., :2] = 1
        enc = jnp.asarray(x)
    batch = {
        "encoder_input_tokens": enc,
        "decoder_input_tokens": jnp.ones((b, t), jnp.int32),
        "decoder_target_tokens": jnp.ones((b, t), jnp.int32),
    }
    analytic = b * flops.train_flops_per_example(cfg, s, t)["total"]
    assert abs(_xla_train_flops(model, batch) / analytic - 1) < 0.10


def test_peaks_and_mfu():
    assert flops.peak_flops("NVIDIA H200") == 989e12
    assert flops.peak_flops("NVIDIA A100-SXM4-80GB") == 312e12
    assert flops.peak_flops("TPU v5 lite") == 197e12 and flops.peak_flops("TPU v5p") == 459e12
    assert flops.peak_flops("TPU v6 lite") == 918e12 and flops.peak_flops("TPU v4") == 275e12
    assert flops.peak_flops("cpu") is None
    tf_s, m = flops.mfu(100.0, 1e12, 2, "NVIDIA H100 80GB HBM3")
    assert tf_s == 50.0 and abs(m - 50e12 / 989e12) < 1e-12
    assert flops.mfu(1.0, 1e12, 1, "cpu")[1] is None


def test_for_task_uses_the_task_lengths():
    from chartjax.models.relation_network import RNConfig, build
    from chartjax.tasks.core.task import SequenceLengths

    cfg = tiny.tiny_pix2struct()
    image = SequenceLengths(encoder=64, decoder=8)  # max_patches, max_target_len
    text = SequenceLengths(encoder=16, decoder=8)  # max_input_len, max_target_len
    got = flops.for_task(lambda rngs: pix2struct.build(cfg, rngs), image)
    assert got == flops.train_flops_per_example(cfg, 64, 8)["total"]
    t5_cfg = tiny.tiny_t5()
    got = flops.for_task(lambda rngs: t5.build(t5_cfg, rngs), text)
    assert got == flops.train_flops_per_example(t5_cfg, 16, 8)["total"]
    rn = RNConfig(
        image_size=16, conv_layers=2, conv_channels=8, lstm_dim=8, embed_dim=8, g_dim=16, f_dim=16
    )
    assert flops.for_task(lambda rngs: build(rn, rngs=rngs), image) is None  # no analytic count
    assert flops.for_task(lambda rngs: pix2struct.build(cfg, rngs), None) is None
