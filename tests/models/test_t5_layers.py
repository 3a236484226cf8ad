"""Layers, model structure, parameter counts, gin sizes and the loss (hand-computed values)."""

import dataclasses
import functools
import math
from pathlib import Path

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from chartjax.models import configurables, layers, losses, t5, tiny
from chartjax.models.model_configs import Pix2StructConfig
from chartjax.models.t5 import pix2struct

REPO = str(Path(__file__).resolve().parents[2])
LOGICAL = {
    "embed",
    "mlp",
    "heads",
    "kv",
    "joined_kv",
    "vocab",
    "relpos_buckets",
    "patch",
    "abspos_buckets",
    None,
}


def test_relative_position_buckets_hand_values():
    # Bidirectional, 32 buckets / max distance 128: 16 per direction, max_exact 8.
    b = layers.relative_position_buckets(
        1, 300, bidirectional=True, num_buckets=32, max_distance=128
    )[0]
    # key j, query 0: relative = j, n = -j < 0 -> +16 offset.
    assert b[0] == 0 and b[1] == 17 and b[7] == 23
    assert b[8] == 16 + 8  # log(1) = 0 -> max_exact
    assert b[127] == 16 + 8 + int(math.log(127 / 8) / math.log(16) * 8)  # = 31
    assert b[299] == 31  # clipped
    # Causal, 32 buckets: max_exact 16; keys after the query map to 0.
    c = layers.relative_position_buckets(
        30, 30, bidirectional=False, num_buckets=32, max_distance=128
    )
    assert c[29, 9] == 16 + int(math.log(20 / 16) / math.log(8) * 16)  # n = 20 -> 17
    assert c[29, 29] == 0 and c[0, 5] == 0 and c[20, 5] == 15


def test_rmsnorm_fp32_math_and_dtype():
    norm = layers.RMSNorm(3, dtype=jnp.bfloat16, rngs=nnx.Rngs(0))
    norm.scale[...] = jnp.array([1.0, 2.0, 0.5])
    x = jnp.array([[3.0, -4.0, 12.0]], jnp.bfloat16)
    rms = math.sqrt((9 + 16 + 144) / 3 + 1e-6)
    want = np.array([3 / rms, -8 / rms, 6 / rms])
    y = norm(x)
    assert y.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(y, np.float32)[0], want, rtol=1e-2)


@pytest.mark.slow
def test_attention_has_no_sqrt_d_scaling():
    attn = layers.Attention(4, 2, 3, dropout_rate=0.0, dtype=jnp.float32, rngs=nnx.Rngs(1))
    x = jax.random.normal(jax.random.key(0), (1, 5, 4))
    y = attn(x, x, jnp.zeros((1, 1, 5, 5)), deterministic=True)
    wq, wk, wv, wo = (
        np.asarray(m.kernel[...]) for m in (attn.query, attn.key, attn.value, attn.out)
    )
    xn = np.asarray(x)[0]
    q, k, v = (xn @ w for w in (wq, wk, wv))
    heads = []
    for h in range(2):
        s = q[:, 3 * h : 3 * h + 3] @ k[:, 3 * h : 3 * h + 3].T  # no / sqrt(3)
        p = np.exp(s - s.max(-1, keepdims=True))
        heads.append((p / p.sum(-1, keepdims=True)) @ v[:, 3 * h : 3 * h + 3])
    np.testing.assert_allclose(np.asarray(y)[0], np.concatenate(heads, -1) @ wo, atol=1e-5)


def test_gated_gelu_is_tanh_approximation():
    mlp = layers.MlpBlock(
        2, 3, ("gelu", "linear"), dropout_rate=0.0, dtype=jnp.float32, rngs=nnx.Rngs(0)
    )
    x = np.array([[0.7, -1.3]], np.float32)
    h0, h1 = x @ np.asarray(mlp.wi_0.kernel[...]), x @ np.asarray(mlp.wi_1.kernel[...])
    gelu = 0.5 * h0 * (1 + np.tanh(math.sqrt(2 / math.pi) * (h0 + 0.044715 * h0**3)))
    want = (gelu * h1) @ np.asarray(mlp.wo.kernel[...])
    np.testing.assert_allclose(np.asarray(mlp(jnp.asarray(x), deterministic=True)), want, rtol=1e-5)


@functools.partial(jax.jit, static_argnums=(0, 3))
def _jit_call(graphdef, state, batch, deterministic):
    model = nnx.merge(graphdef, state)
    return model(batch, deterministic=deterministic), model.encode(batch)


@functools.partial(jax.jit, static_argnums=0)
def _jit_step(graphdef, state, tokens, cache, index):
    return nnx.merge(graphdef, state).decode_step(tokens, cache, index)


def _call(model, batch, deterministic=True):
    """Jitted (logits, encoded): one compile per model instead of one per eager op."""
    logits, encoded = _jit_call(*nnx.split(model), batch, deterministic)
    return np.asarray(logits), np.asarray(encoded)


def _count(build, cfg) -> int:
    abstract = nnx.eval_shape(lambda: build(cfg, nnx.Rngs(0)))
    return sum(math.prod(v.shape) for v in jax.tree.leaves(nnx.state(abstract, nnx.Param)))


def _count_by_depth(build, cfg) -> int:
    """`_count` from abstract models of one and two layers a stack: the layers of a stack are
    alike, so the count is affine in each stack's depth (tracing 48 layers costs ~7 s)."""

    def count(enc, dec):
        return _count(
            build, dataclasses.replace(cfg, num_encoder_layers=enc, num_decoder_layers=dec)
        )

    one = count(1, 1)
    per_enc, per_dec = count(2, 1) - one, count(1, 2) - one
    return one + (cfg.num_encoder_layers - 1) * per_enc + (cfg.num_decoder_layers - 1) * per_dec


def _gin_config(family: str, size: str):
    gin.clear_config()
    try:
        import chartjax.gin_imports  # noqa: F401  (registers train/evaluate for the model gin)

        gin.parse_config_files_and_bindings(
            [f"{REPO}/gin_configs/models/{family}.gin", f"{REPO}/gin_configs/sizes/{size}.gin"], []
        )
        return gin.query_parameter("build_model.config").scoped_configurable_fn()
    finally:
        gin.clear_config()


@pytest.mark.parametrize("size,paper", [("pix2struct_base", 282e6), ("pix2struct_large", 1.3e9)])
@pytest.mark.slow
def test_pix2struct_parameter_counts_match_paper(size, paper):
    cfg = _gin_config("pix2struct", size)
    assert isinstance(cfg, Pix2StructConfig) and cfg.vocab_size == 50244
    n = _count_by_depth(pix2struct.build, cfg)
    if size.endswith("base"):  # the per-layer extrapolation is exact: check it once, in full
        assert n == _count(pix2struct.build, cfg)
    # Paper: 282M / 1.3B (rounded). Untied logits and no encoder position bias are needed to hit it.
    assert abs(n - paper) / paper < (0.005 if size.endswith("base") else 0.04), n


def test_all_size_gins_parse():
    for fam, sizes in (
        ("t5_1_1", ("tiny", "small", "large", "xl", "xxl")),
        ("pix2struct", ("tiny",)),
    ):
        for s in sizes:
            cfg = _gin_config(fam, f"{fam}_{s}")
            assert cfg.num_encoder_layers > 0


def test_build_model_dispatch():
    model = nnx.eval_shape(lambda: configurables.build_model(tiny.tiny_t5(), nnx.Rngs(0)))
    assert isinstance(model, t5.T5Transformer)
    with pytest.raises(TypeError):
        configurables.build_model("nope")


ONE = {"num_encoder_layers": 1, "num_decoder_layers": 1}


@pytest.fixture(scope="module")
def models():
    return {
        # One layer a stack: the checks below hold layer by layer.
        "t5": t5.build(tiny.tiny_t5(dropout_rate=0.3, **ONE), 0),
        "p2s": pix2struct.build(tiny.tiny_pix2struct(dropout_rate=0.3, **ONE), 0),
    }


def _batch(kind: str, rng: np.random.Generator):
    tgt = rng.integers(2, 128, (2, 6)).astype(np.int32)
    tgt[1, 4:] = 0
    tgt[0, 5] = 1
    dec_in = np.concatenate([np.zeros((2, 1), np.int32), tgt[:, :-1]], 1)
    if kind == "t5":
        enc = rng.integers(2, 128, (2, 7)).astype(np.int32)
        enc[1, 5:] = 0
    else:
        enc = rng.normal(size=(2, 8, 50)).astype(np.float32)
        enc[:, :, 0] = np.repeat(np.arange(1, 5), 2)
        enc[:, :, 1] = np.tile([1, 2], 4)
        enc[1, 6:] = 0
    return {
        "encoder_input_tokens": jnp.asarray(enc),
        "decoder_input_tokens": jnp.asarray(dec_in),
        "decoder_target_tokens": jnp.asarray(tgt),
    }


@pytest.mark.parametrize("kind", ["t5", "p2s"])
def test_partitioning_names_on_every_param(models, kind):
    for path, v in nnx.to_flat_state(nnx.state(models[kind], nnx.Param)):
        names = v.get_metadata()["out_sharding"]
        assert len(names) == v.ndim and set(names) <= LOGICAL, (path, names)


@pytest.mark.parametrize("kind", ["t5", "p2s"])
@pytest.mark.slow
def test_cached_decode_matches_teacher_forcing(models, kind):
    model = models[kind]
    b = _batch(kind, np.random.default_rng(0))
    logits, encoded = _call(model, b)
    assert logits.dtype == np.float32 and logits.shape == (2, 6, 128)
    cache = model.init_cache(jnp.asarray(encoded), model.encoder_mask(b), 6)
    graphdef, state = nnx.split(model)
    steps = []
    for i in range(6):
        lg, cache = _jit_step(graphdef, state, b["decoder_input_tokens"][:, i], cache, jnp.int32(i))
        steps.append(np.asarray(lg))
    valid = np.asarray(b["decoder_target_tokens"]) > 0
    np.testing.assert_allclose(np.stack(steps, 1)[valid], logits[valid], atol=2e-5)


@pytest.mark.slow
def test_dropout_only_when_not_deterministic():
    # One encoder layer (attention-weight, MLP and residual dropout); a whole-model compile with
    # dropout costs ~20 s on 2 cores for the same check.
    layer = t5.EncoderLayer(tiny.tiny_t5(dropout_rate=0.3), rngs=nnx.Rngs(params=0, dropout=1))
    x = jax.random.normal(jax.random.key(0), (2, 5, 32))
    bias = jnp.zeros((1, 1, 5, 5))
    run = nnx.jit(lambda m, x, det: m(x, bias, deterministic=det), static_argnums=2)
    a1, a2 = (np.asarray(run(layer, x, True)) for _ in range(2))
    np.testing.assert_array_equal(a1, a2)
    d1, d2 = (np.asarray(run(layer, x, False)) for _ in range(2))  # RNG state advances
    assert np.abs(d1 - a1).max() > 1e-3 and np.abs(d1 - d2).max() > 1e-3  # fresh masks


def test_encoder_padding_is_ignored(models):
    """Changing padded patches (row id 0) must not change valid encoder outputs or logits."""
    model = models["p2s"]
    b = _batch("p2s", np.random.default_rng(2))
    x = np.array(b["encoder_input_tokens"])
    x[1, 6:, 2:] = 123.0
    b2 = {**b, "encoder_input_tokens": jnp.asarray(x)}
    (l1, e1), (l2, e2) = _call(model, b), _call(model, b2)
    np.testing.assert_allclose(e1[1, :6], e2[1, :6], atol=1e-5)
    valid = np.asarray(b["decoder_target_tokens"]) > 0  # padded queries attend uniformly
    np.testing.assert_allclose(l1[valid], l2[valid], atol=1e-5)


def test_cross_entropy_with_z_loss_hand_computed():
    logits = jnp.array([[[0.0, math.log(3.0)], [2.0, 2.0]]])  # softmax [.25, .75], [.5, .5]
    targets = jnp.array([[1, 0]])
    total, z, n = losses.cross_entropy_with_z_loss(logits, targets, jnp.array([[1.0, 1.0]]), 0.1)
    lz0, lz1 = math.log(4.0), 2.0 + math.log(2.0)
    assert float(n) == 2.0
    np.testing.assert_allclose(float(z), 0.1 * (lz0**2 + lz1**2), rtol=1e-6)
    np.testing.assert_allclose(float(total), -math.log(0.75) - math.log(0.5) + float(z), rtol=1e-6)
    total_w, _, n_w = losses.cross_entropy_with_z_loss(
        logits, targets, jnp.array([[1.0, 0.0]]), 0.0
    )
    assert float(n_w) == 1.0 and abs(float(total_w) + math.log(0.75)) < 1e-6


def test_seq2seq_loss_is_mean_per_token(models):
    model = models["t5"]
    graphdef, state = nnx.split(model)
    b = _batch("t5", np.random.default_rng(3))
    loss, aux = jax.jit(
        lambda s, b: losses.seq2seq_loss(nnx.merge(graphdef, s), b, deterministic=True)
    )(state, b)
    logits = _call(model, b)[0].astype(np.float64)
    t = np.asarray(b["decoder_target_tokens"])
    lz = np.log(np.exp(logits).sum(-1))
    tok = lz - np.take_along_axis(logits, t[..., None], -1)[..., 0] + 1e-4 * lz**2
    w = t > 0
    np.testing.assert_allclose(float(loss), tok[w].mean(), rtol=1e-5)
    assert float(aux["num_tokens"]) == w.sum()
    np.testing.assert_allclose(float(aux["accuracy"]), (logits.argmax(-1) == t)[w].mean())
