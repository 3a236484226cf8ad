"""`remat_policy` on every layer stack (models/remat.py): the loss and the gradients under remat
equal those without (fp32), with dropout off and on (same RNG streams -> same masks, so the RNG
streams work inside nnx.remat), and a bad policy name is refused in one line.

The policy enters only through `remat.checkpointed` (one function for every family: the name
picks a jax.checkpoint policy), while each family's stacks decide what passes through it (the
layer, its arrays, closed-over flags and tables, the RNG streams). So every family runs with
one non-"none" policy against "none", and the families share out the policies so that each
runs at least once ("full" twice, with dropout off as well: the deterministic path).

One jit per family computes its three or four gradients, so the file compiles five functions.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from chartjax.models import losses, t5, tiny
from chartjax.models.post_ln import bart, deberta, tapas
from chartjax.models.remat import REMAT_POLICIES, check_remat_policy
from chartjax.models.t5 import pix2struct

DROP = 0.2
REMAT_PRIMITIVES = ("remat2", "checkpoint")  # jax.checkpoint's primitive
B, S, T = 2, 8, 6


def _seq2seq_batch(enc, pad_id: int, vocab: int):
    rng = np.random.default_rng(0)
    tgt = rng.integers(3, vocab, (B, T)).astype(np.int32)
    tgt[1, -2:] = pad_id  # a padded target
    dec_in = np.concatenate([np.full((B, 1), 2, np.int32), tgt[:, :-1]], 1)
    return {
        "encoder_input_tokens": enc,
        "decoder_input_tokens": dec_in,
        "decoder_target_tokens": tgt,
    }


def _tokens(vocab: int, pad_id: int):
    enc = np.random.default_rng(1).integers(3, vocab, (B, S)).astype(np.int32)
    enc[1, -3:] = pad_id  # a padded source
    return enc


def _patches(cfg):
    rng = np.random.default_rng(1)
    enc = rng.normal(size=(B, S, 2 + cfg.patch_dim)).astype(np.float32)
    enc[:, :, 0], enc[:, :, 1] = 1 + np.arange(S) // 3, 1 + np.arange(S) % 3
    enc[1, -2:, :2] = 0  # padding patches
    return enc


def _classify_batch(vocab: int):
    ids = _tokens(vocab, 0)
    return {
        "input_ids": ids,
        "attention_mask": (ids > 0).astype(np.int32),
        "labels": np.array([0, 2], np.int32),
    }


def _seq2seq_loss(model, batch, deterministic):
    return losses.seq2seq_loss(model, batch, deterministic=deterministic)[0]


def _classify_loss(model, batch, deterministic):
    logits = model(batch, deterministic=deterministic)
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch["labels"]).mean()


def _families():
    one = {"num_encoder_layers": 1, "num_decoder_layers": 1}  # compile time: one layer a stack
    t5_cfg = tiny.tiny_t5(dropout_rate=DROP, **one)
    p2s_cfg = tiny.tiny_pix2struct(dropout_rate=DROP, **one)
    bart_cfg = bart.BartConfig(
        vocab_size=64,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=16,
        dropout=DROP,
        attention_dropout=DROP,
        activation_dropout=DROP,
        dtype="float32",
    )
    deberta_cfg = deberta.DebertaConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=3,
        max_position_embeddings=16,
        relative_attention=True,
        position_buckets=4,
        pos_att_type=("c2p", "p2c"),
        share_att_key=True,
        norm_rel_ebd="layer_norm",
        conv_kernel_size=3,
        hidden_dropout_prob=DROP,
        attention_probs_dropout_prob=DROP,
        dtype="float32",
    )
    tapas_cfg = tapas.TapasConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=3,
        max_position_embeddings=16,
        hidden_dropout_prob=DROP,
        attention_probs_dropout_prob=DROP,
        dtype="float32",
    )
    return {
        "t5": (t5.build, t5_cfg, _seq2seq_batch(_tokens(128, 0), 0, 128), _seq2seq_loss),
        "pix2struct": (
            pix2struct.build,
            p2s_cfg,
            _seq2seq_batch(_patches(p2s_cfg), 0, 128),
            _seq2seq_loss,
        ),
        "bart": (bart.build, bart_cfg, _seq2seq_batch(_tokens(64, 1), 1, 64), _seq2seq_loss),
        "deberta": (deberta.build, deberta_cfg, _classify_batch(64), _classify_loss),
        "tapas": (tapas.build, tapas_cfg, _classify_batch(64), _classify_loss),
    }


FAMILIES = _families()
# family -> the remat policy compared with "none" (each policy at least once).
POLICY = {
    "t5": "full",
    "pix2struct": "dots_with_no_batch_dims_saveable",
    "bart": "dots_saveable",
    "deberta": "full",
    "tapas": "dots_with_no_batch_dims_saveable",
}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family_results(request):
    """(family, {policy: {"off"/"on": (loss, grads)}}, {policy: remat calls in the jaxpr}) for
    "none" and the family's POLICY."""
    build, cfg, batch, loss_fn = FAMILIES[request.param]
    policies = ("none", POLICY[request.param])
    models = {
        p: build(dataclasses.replace(cfg, remat_policy=p), nnx.Rngs(params=0, dropout=1))
        for p in policies
    }
    splits = {p: nnx.split(m, nnx.Param, ...) for p, m in models.items()}
    params = splits["none"][1]  # the same weights for every policy
    jbatch = jax.tree.map(jnp.asarray, batch)

    rests = {p: s[2] for p, s in splits.items()}  # RNG streams: same seeds, same values

    def loss_of(policy, deterministic, rests):
        def f(p):
            # Fresh Variables at this trace level (as state.reseeded does in the train step).
            rest = jax.tree.map(lambda x: x, rests[policy])
            model = nnx.merge(splits[policy][0], p, rest)
            return loss_fn(model, jbatch, deterministic)

        return f

    @jax.jit
    def run(params, rests):
        # Dropout on for every policy; off (the deterministic path) for none and full only.
        return {
            p: {
                mode: jax.value_and_grad(loss_of(p, mode == "off", rests))(params)
                for mode in (("off", "on") if p in ("none", "full") else ("on",))
            }
            for p in policies
        }

    remats = {}
    for policy in policies:
        jaxpr = jax.make_jaxpr(lambda p_, r, p=policy: loss_of(p, False, r)(p_))(params, rests)
        remats[policy] = sum(e.primitive.name in REMAT_PRIMITIVES for e in jaxpr.jaxpr.eqns)
    return request.param, jax.device_get(run(params, rests)), remats


def _close(a, b, what):
    for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(a), jax.tree.leaves(b)):
        x, y = np.asarray(x), np.asarray(y)
        scale = max(float(np.abs(y).max()), 1e-30)
        np.testing.assert_allclose(
            x, y, rtol=1e-6, atol=1e-6 * scale, err_msg=f"{what} {jax.tree_util.keystr(path)}"
        )


@pytest.mark.slow
def test_policies_match_no_remat(family_results):
    name, res, remats = family_results
    ref = res["none"]
    assert ref["on"][0] != ref["off"][0], "dropout had no effect: the test would prove nothing"
    layers = 1 if name in ("deberta", "tapas") else 2  # one per stack
    assert remats == {"none": 0, POLICY[name]: layers}, name
    for policy in res:
        for mode in res[policy]:
            loss, grads = res[policy][mode]
            np.testing.assert_allclose(loss, ref[mode][0], rtol=1e-6, err_msg=f"{name} {policy}")
            _close(grads, ref[mode][1], f"{name} {policy} dropout {mode}")


def test_every_policy_is_compared():
    assert set(POLICY) == set(FAMILIES)
    assert set(POLICY.values()) == set(REMAT_POLICIES) - {"none"}


def test_bad_policy_is_refused_in_one_line():
    for name, (_, cfg, _, _) in FAMILIES.items():
        with pytest.raises(ValueError, match="remat_policy='dots'") as err:
            dataclasses.replace(cfg, remat_policy="dots")
        assert "\n" not in str(err.value) and "dots_with_no_batch_dims_saveable" in str(err.value)
        assert type(cfg).__name__ in str(err.value), name
    check_remat_policy("X", "full")


def test_not_an_hf_field_and_gin_settable():
    import gin

    from chartjax.models import configurables

    for cls in (bart.BartConfig, deberta.DebertaConfig, tapas.TapasConfig):
        assert "remat_policy" not in cls.to_hf_config.__code__.co_names
    from chartjax.interop import hf

    assert "remat_policy" not in hf.config_to_hf.__code__.co_names
    gin.clear_config()
    try:
        gin.parse_config(
            "chartjax.models.Pix2StructConfig.remat_policy = 'full'\n"
            "chartjax.models.BartConfig.remat_policy = 'dots_saveable'"
        )
        fields = dataclasses.asdict(tiny.tiny_pix2struct())
        del fields["remat_policy"]  # left to the binding
        p2s = configurables.Pix2StructConfig(**fields)
        assert p2s.remat_policy == "full"
        assert gin.query_parameter("chartjax.models.BartConfig.remat_policy") == "dots_saveable"
    finally:
        gin.clear_config()
