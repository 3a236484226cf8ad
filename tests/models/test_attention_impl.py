"""`attention_impl`: the fused `jax.nn.dot_product_attention` path against the plain einsum path,
for every family (T5, Pix2Struct, DeBERTa, TAPAS, BART) on tiny random models, same parameters.

Compared per family: encoder self-attention with padding (the encoder states; T5's batch has a
row whose keys are all padding, DeBERTa's too: fully masked rows), teacher-forced decoder logits
(causal self-attention + cross-attention, padded targets) and the KV-cached decode steps. fp32:
max |difference| <= 1e-5 (FP32_TOL). bf16 activations (both paths in bf16): <= BF16_TOL = 0.1
absolute on values of order 1-10, and a max difference below 2% of the values' max magnitude:
the two paths round the same bf16 products in a different order, and a bf16 step is 2**-8.
The fused call runs once per attention layer (counted), never under "einsum"; a nonzero
attention dropout in a training call falls back to the einsum path (equal outputs).

One layer a stack: the layers of a stack are alike, and the count of fused calls still sees
every kind of attention (encoder, causal decoder self-attention, cross-attention).
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from chartjax.models import layers, t5, tiny
from chartjax.models.model_configs import ATTENTION_IMPLS
from chartjax.models.post_ln import bart, deberta, tapas
from chartjax.models.t5 import pix2struct

FP32_TOL = 1e-5
BF16_TOL = 0.1
BF16_REL = 0.02
B, S, T = 3, 10, 6

# --------------------------------------------------------------------------- families


def _seq2seq_batch(vocab, pad, start, rng, *, all_pad_row: bool):
    enc = rng.integers(pad + 2, vocab, (B, S)).astype(np.int32)
    enc[1, 6:] = pad  # a padded source
    if all_pad_row:
        enc[2] = pad  # every key padding: the encoder's and the cross-attention's rows of
        # this example are fully masked
    tgt = rng.integers(pad + 2, vocab, (B, T)).astype(np.int32)
    tgt[1, 4:] = 0  # padded targets (T5: target_mask = targets > 0)
    dec = np.concatenate([np.full((B, 1), start, np.int32), tgt[:, :-1]], 1)
    return {"encoder_input_tokens": enc, "decoder_input_tokens": dec, "decoder_target_tokens": tgt}


ONE = {"num_encoder_layers": 1, "num_decoder_layers": 1}


def _t5(impl, dtype):
    return t5.build(tiny.tiny_t5(dtype, attention_impl=impl, **ONE), 0)


def _t5_batch():
    return _seq2seq_batch(128, 0, 0, np.random.default_rng(0), all_pad_row=True)


def _p2s(impl, dtype):
    return pix2struct.build(tiny.tiny_pix2struct(dtype, attention_impl=impl, **ONE), 0)


def _p2s_batch():
    rng = np.random.default_rng(1)
    batch = _seq2seq_batch(128, 0, 0, rng, all_pad_row=False)
    patches = rng.normal(size=(B, S, 2 + 48)).astype(np.float32)
    patches[:, :, 0], patches[:, :, 1] = 1 + np.arange(S) // 4, 1 + np.arange(S) % 4
    patches[1, 7:] = 0.0  # padding patches (row id 0)
    return {**batch, "encoder_input_tokens": patches}


def _bart(impl, dtype):
    cfg = bart.BartConfig(
        vocab_size=96,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=2,
        encoder_ffn_dim=48,
        decoder_ffn_dim=48,
        max_position_embeddings=32,
        dropout=0.0,
        init_std=0.3,  # HF's 0.02 gives near-uniform attention: nothing to compare
        dtype=dtype,
        attention_impl=impl,
    )
    return bart.build(cfg, 0)


def _bart_batch():
    batch = _seq2seq_batch(96, 1, 2, np.random.default_rng(2), all_pad_row=False)
    batch.pop("decoder_target_tokens")
    return batch


def _deberta(impl, dtype):
    cfg = deberta.DebertaConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=32,
        relative_attention=True,
        position_buckets=4,
        max_relative_positions=16,
        pos_att_type=("c2p", "p2c"),
        share_att_key=True,
        norm_rel_ebd="layer_norm",
        position_biased_input=False,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        initializer_range=0.3,
        dtype=dtype,
        attention_impl=impl,
    )
    return deberta.build(cfg, 0)


def _deberta_batch():
    rng = np.random.default_rng(3)
    ids = rng.integers(1, 64, (B, S)).astype(np.int32)
    mask = np.ones((B, S), np.int32)
    mask[1, 7:] = 0
    mask[2] = 0  # every key padding: fully masked rows
    return {"input_ids": ids, "attention_mask": mask}


def _tapas(impl, dtype):
    cfg = tapas.TapasConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=32,
        type_vocab_sizes=(3, 4, 4, 2, 4, 4, 4),
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        initializer_range=0.3,
        dtype=dtype,
        attention_impl=impl,
    )
    return tapas.build(cfg, 0)


def _tapas_batch():
    rng = np.random.default_rng(4)
    ids = rng.integers(1, 64, (B, S)).astype(np.int32)
    mask = np.ones((B, S), np.int32)
    mask[1, 6:] = 0
    tt = rng.integers(0, 2, (B, S, 7)).astype(np.int32)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": tt}


# name: (build(impl, dtype), batch(), encoder-decoder?, attention layers)
FAMILIES = {
    "t5": (_t5, _t5_batch, True, 1 + 2 * 1),
    "pix2struct": (_p2s, _p2s_batch, True, 1 + 2 * 1),
    "bart": (_bart, _bart_batch, True, 1 + 2 * 1),
    "deberta": (_deberta, _deberta_batch, False, 1),
    "tapas": (_tapas, _tapas_batch, False, 1),
}


@functools.partial(jax.jit, static_argnums=(0, 3))
def _outputs(graphdef, state, batch, seq2seq):
    """Encoder states, logits and (seq2seq) the logits of T cached decode steps fed the
    decoder inputs, each in float32."""
    model = nnx.merge(graphdef, state)
    out = {"encoded": model.encode(batch), "logits": model(batch, deterministic=True)}
    if seq2seq:
        cache = model.init_cache(out["encoded"], model.encoder_mask(batch), T)

        def step(cache, i):
            tokens = jax.lax.dynamic_index_in_dim(batch["decoder_input_tokens"], i, 1, False)
            logits, cache = model.decode_step(tokens, cache, i)
            return cache, logits

        out["steps"] = jnp.swapaxes(jax.lax.scan(step, cache, jnp.arange(T))[1], 0, 1)
    return jax.tree.map(lambda x: x.astype(jnp.float32), out)


def _run(family, impl, dtype):
    build, make_batch, seq2seq, _ = FAMILIES[family]
    model = build(impl, dtype)
    batch = jax.tree.map(jnp.asarray, make_batch())
    out = _outputs(*nnx.split(model), batch, seq2seq)
    return {k: np.asarray(v) for k, v in out.items()}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def fp32(request):
    f = request.param
    return f, _run(f, "einsum", "float32"), _run(f, "dot_product", "float32")


@pytest.mark.slow
def test_fp32_dot_product_equals_einsum(fp32):
    family, ref, got = fp32
    assert set(ref) == set(got)
    for k in ref:
        assert np.isfinite(got[k]).all(), (family, k)
        diff = np.abs(got[k] - ref[k]).max()
        assert diff <= FP32_TOL, f"{family} {k}: max |dot_product - einsum| = {diff:.2e}"
    # Non-trivial attention: the padding changes the outputs of the padded example.
    assert np.abs(ref["encoded"][1] - ref["encoded"][0]).max() > 1e-2


# Pix2Struct's stacks are T5's (models/t5/pix2struct.py imports t5.EncoderStack and Decoder): the
# bf16 rounding of its attention is T5's; its own inputs (patches) are compared in fp32 above.
BF16_FAMILIES = sorted(set(FAMILIES) - {"pix2struct"})


@pytest.mark.slow
@pytest.mark.parametrize("family", BF16_FAMILIES)
def test_bf16_dot_product_close_to_einsum(family):
    ref = _run(family, "einsum", "bfloat16")
    got = _run(family, "dot_product", "bfloat16")
    for k in ref:
        assert np.isfinite(got[k]).all(), (family, k)
        diff = np.abs(got[k] - ref[k]).max()
        scale = np.abs(ref[k]).max()
        assert diff <= BF16_TOL and diff <= BF16_REL * scale, (
            f"{family} {k}: max |dot_product - einsum| = {diff:.3g} (values up to {scale:.3g})"
        )


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fused_call_once_per_attention_layer(family, monkeypatch):
    build, make_batch, _, n_layers = FAMILIES[family]
    calls = []
    real, real_4d = jax.nn.dot_product_attention, layers.xla_attention_4d

    def counting(*args, **kwargs):
        calls.append({"implementation": None, **kwargs})
        return real(*args, **kwargs)

    def counting_4d(*args, **kwargs):  # CPU: the same composite, written in layers.py
        calls.append({"implementation": None, **kwargs})
        return real_4d(*args, **kwargs)

    monkeypatch.setattr(jax.nn, "dot_product_attention", counting)
    monkeypatch.setattr(layers, "xla_attention_4d", counting_4d)
    batch = jax.tree.map(jnp.asarray, make_batch())
    for impl, want in (("einsum", 0), ("dot_product", n_layers)):
        calls.clear()
        model = build(impl, "float32")
        jax.eval_shape(lambda m=model: m(batch, deterministic=True))
        assert len(calls) == want, (family, impl)
    assert all(c["implementation"] is None for c in calls)
    if family == "t5":  # no 1/sqrt(d) in T5; the decoder's self-attention is causal
        assert {c["scale"] for c in calls} == {1.0}
        assert sum(c["is_causal"] for c in calls) == 1


@pytest.mark.slow
def test_attention_dropout_in_training_falls_back_to_einsum():
    batch = jax.tree.map(jnp.asarray, _t5_batch())
    outs = []
    for impl in ("einsum", "dot_product"):
        model = t5.T5Transformer(
            tiny.tiny_t5(dropout_rate=0.2, attention_impl=impl, **ONE),
            rngs=nnx.Rngs(params=0, dropout=1),
        )
        train_call = nnx.jit(lambda m, b: m(b, deterministic=False))  # not op by op
        outs.append(np.asarray(train_call(model, batch)))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_fully_masked_row_is_uniform():
    """Both paths: uniform over the keys while |logit| < 512 (flaxformer's -1e10 bias absorbs
    the logit at float32 spacing 1024); beyond that only the fused path stays exactly uniform.
    Partly masked rows agree in both regimes."""
    mask = jnp.array([[True, True, False, True, True], [False] * 5])[None, None]
    v = jax.random.normal(jax.random.key(2), (1, 5, 1, 8))
    for size, uniform_impls in ((3.0, ("einsum", "dot_product")), (30.0, ("dot_product",))):
        q = jax.random.normal(jax.random.key(0), (1, 2, 1, 8)) * size  # logits up to ~60 / ~6000
        k = jax.random.normal(jax.random.key(1), (1, 5, 1, 8)) * size
        ys = {
            impl: np.asarray(
                layers.attention_core(q, k, v, None, mask, impl=impl, dtype=jnp.float32)
            )
            for impl in ("einsum", "dot_product")
        }
        np.testing.assert_allclose(ys["einsum"][0, 0], ys["dot_product"][0, 0], atol=1e-6)
        for impl in uniform_impls:
            np.testing.assert_allclose(ys[impl][0, 1, 0], v[0, :, 0].mean(0), rtol=1e-5, atol=1e-6)


def test_config_switch_validated_and_gin_settable():
    import gin

    from chartjax.models import configurables

    for make in (tiny.tiny_t5, tiny.tiny_pix2struct):
        assert make().attention_impl == "dot_product"
        with pytest.raises(ValueError, match="attention_impl"):
            make(attention_impl="flash")
    for cls in (bart.BartConfig, deberta.DebertaConfig, tapas.TapasConfig):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        assert fields["attention_impl"].default == "dot_product"
        assert "attention_impl" not in cls.to_hf_config.__code__.co_names  # not an HF field
    assert ATTENTION_IMPLS == ("dot_product", "cudnn", "einsum")
    gin.clear_config()
    try:
        gin.parse_config(
            "chartjax.models.T5Config.attention_impl = 'einsum'\n"
            "chartjax.models.Pix2StructConfig.attention_impl = 'cudnn'"
        )
        t5_cfg = configurables.T5Config(
            vocab_size=8,
            emb_dim=8,
            num_heads=2,
            head_dim=4,
            mlp_dim=8,
            num_encoder_layers=1,
            num_decoder_layers=1,
        )
        p2s_cfg = configurables.Pix2StructConfig(
            vocab_size=8,
            emb_dim=8,
            num_heads=2,
            head_dim=4,
            mlp_dim=8,
            num_encoder_layers=1,
            num_decoder_layers=1,
        )
        assert (t5_cfg.attention_impl, p2s_cfg.attention_impl) == ("einsum", "cudnn")
        # The DeBERTa / TAPAS / BART configs take the same binding once registered there.
        for name in ("DebertaConfig", "TapasConfig", "BartConfig"):
            if hasattr(configurables, name):
                gin.parse_config(f"chartjax.models.{name}.attention_impl = 'einsum'")
                query = gin.query_parameter(f"chartjax.models.{name}.attention_impl")
                assert query == "einsum", name
    finally:
        gin.clear_config()


@pytest.mark.skipif(jax.default_backend() != "gpu", reason="cuDNN needs an NVIDIA GPU")
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_cudnn_close_to_einsum_bf16(family):
    ref = _run(family, "einsum", "bfloat16")
    got = _run(family, "cudnn", "bfloat16")
    for k in ref:
        diff = np.abs(got[k] - ref[k]).max()
        assert diff <= BF16_TOL and diff <= BF16_REL * np.abs(ref[k]).max(), (family, k, diff)


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.slow
def test_cpu_composite_equals_jax_dot_product_attention(is_causal):
    """`layers.xla_attention_4d` (the "dot_product" path on CPU) is JAX's XLA composite: bias,
    padding mask with a fully masked row, causality and a scale, fp32 outputs and gradients."""
    b, t, s, h, d = 2, 5, 7, 3, 4
    ks = jax.random.split(jax.random.key(0), 4)
    q = jax.random.normal(ks[0], (b, t, h, d))
    k, v = (jax.random.normal(kk, (b, s, h, d)) for kk in ks[1:3])
    bias = jax.random.normal(ks[3], (1, h, t, s))
    valid = jnp.array([[True] * s, [True] * 4 + [False] * 3])
    mask = valid[:, None, None, :] & jnp.ones((b, 1, t, 1), bool)
    mask = mask.at[1, 0, 2].set(False)  # one fully masked query row
    scale = 0.5

    def run(fn):
        def f(q, k, v):
            return fn(q, k, v, bias, mask, scale=scale, is_causal=is_causal)

        @jax.jit  # one compile, not one per eager op
        def outputs_and_grads(q, k, v):
            grads = jax.grad(lambda *a: jnp.sum(jnp.sin(f(*a))), (0, 1, 2))(q, k, v)
            return f(q, k, v), grads

        return outputs_and_grads(q, k, v)

    def jax_dpa(q, k, v, bias, mask, *, scale, is_causal):
        return jax.nn.dot_product_attention(
            q, k, v, bias=bias, mask=mask, scale=scale, is_causal=is_causal
        )

    got, want = run(layers.xla_attention_4d), run(jax_dpa)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=FP32_TOL, rtol=0)
