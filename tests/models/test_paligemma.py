"""PaliGemma's prefix-LM attention (image + prefix bidirectional, suffix causal; Gemma 2's
sliding window on the suffix only), remat and LoRA on the family, its analytic FLOPs and gin
registration; on a tiny random config (no transformers: tests/models/test_paligemma_parity.py
holds the comparison with HF)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from chartjax.models import flops, lora, paligemma
from chartjax.models.paligemma.gemma import FULL, SLIDING, attention_masks

CFG = paligemma.PaliGemmaConfig(
    vocab_size=64,
    emb_dim=16,
    num_heads=2,
    num_kv_heads=1,
    head_dim=8,
    mlp_dim=32,
    num_layers=2,
    version=2,
    query_pre_attn_scalar=8,
    attn_logit_softcap=5.0,
    final_logit_softcap=5.0,
    sliding_window=3,
    layer_types=(SLIDING, FULL),
    vision_emb_dim=16,
    vision_num_heads=2,
    vision_mlp_dim=24,
    vision_num_layers=1,
    image_size=8,
    patch_size=4,
    image_token_id=63,
    dtype="float32",
)
N_IMG, N_PREFIX, N_SUFFIX = 4, 3, 4


@nnx.jit
def _logits(model, batch):
    return model(batch, deterministic=True)


def _batch(ids_text):
    ids = np.concatenate([np.full((1, N_IMG), CFG.image_token_id), ids_text], axis=1)
    types = np.asarray([[0] * (N_IMG + N_PREFIX) + [1] * N_SUFFIX])
    image = np.random.default_rng(0).uniform(-1, 1, (1, 8, 8, 3)).astype(np.float32)
    return {"image": image, "input_ids": ids.astype(np.int32), "token_type_ids": types}


def test_masks_prefix_full_suffix_causal_windowed():
    valid = jnp.ones((1, 6), bool)
    prefix = jnp.asarray([[True, True, True, False, False, False]])
    m = attention_masks(valid, prefix, sliding_window=2)
    full, local = np.asarray(m[FULL][0, 0]), np.asarray(m[SLIDING][0, 0])
    assert full[0, 2] and full[:3, :3].all()  # the prefix sees itself both ways
    assert not full[3, 4] and full[5, :6].all()  # the suffix is causal
    assert local[1, 2] and local[0, 2]  # the prefix block ignores the window
    assert local[5].tolist() == [False, False, False, False, True, True]


@pytest.mark.slow
def test_suffix_is_causal_and_prefix_bidirectional():
    model = paligemma.build(CFG, 0)
    ids = np.random.default_rng(1).integers(3, 60, (1, N_PREFIX + N_SUFFIX))
    base = np.asarray(_logits(model, _batch(ids)))
    changed_suffix = ids.copy()
    changed_suffix[0, -2] += 1  # position T-2: earlier logits must not move
    out = np.asarray(_logits(model, _batch(changed_suffix)))
    np.testing.assert_array_equal(out[:, : N_IMG + N_PREFIX + N_SUFFIX - 2], base[:, :-2])
    changed_prefix = ids.copy()
    changed_prefix[0, N_PREFIX - 1] += 1  # the last prefix token: the image tokens see it
    out = np.asarray(_logits(model, _batch(changed_prefix)))
    assert np.abs(out[:, 0] - base[:, 0]).max() > 1e-6


@pytest.mark.slow
def test_remat_and_lora_keep_the_forward_pass():
    batch = _batch(np.random.default_rng(2).integers(3, 60, (1, N_PREFIX + N_SUFFIX)))

    def loss_and_grads(cfg):
        graphdef, params, rest = nnx.split(paligemma.build(cfg, 0), nnx.Param, ...)

        def f(p, r):
            model = nnx.merge(graphdef, p, jax.tree.map(lambda x: x, r))  # fresh Variables
            return paligemma.prefix_lm_loss(model, batch, deterministic=True)[0]

        return jax.jit(jax.value_and_grad(f))(params, rest)

    (l0, g0), (l1, g1) = (
        loss_and_grads(CFG),
        loss_and_grads(dataclasses.replace(CFG, remat_policy="full")),
    )
    assert abs(float(l0) - float(l1)) < 1e-6
    for a, b in zip(jax.tree.leaves(g0), jax.tree.leaves(g1)):
        np.testing.assert_allclose(a, b, atol=1e-6)
    model = paligemma.build(CFG, 0)
    ref = np.asarray(_logits(model, batch))
    lora.apply(model, lora.LoraConfig(rank=2), 0)
    adapted = [p for p, _ in nnx.iter_modules(model) if isinstance(_, lora.LoraDense)]
    assert ("decoder", "layers", 0, "attention", "query") in adapted
    np.testing.assert_allclose(np.asarray(_logits(model, batch)), ref, atol=1e-6)


def test_from_scratch_position_embeddings_are_drawn_at_one_over_root_width():
    # big_vision's ViT and HF's SigLIP: normal(1 / sqrt(width)); at Embed's normal(1.0) a tiny
    # model trained from scratch never read the chart (docs/benchmarks.md, paligemma_learning).
    cfg = dataclasses.replace(CFG, vision_emb_dim=256, image_size=64, patch_size=4)
    table = np.asarray(paligemma.build(cfg, 0).vision_tower.position_embedding.embedding[...])
    assert table.shape == (256, 256)  # 65,536 draws: the std within 1%
    assert np.std(table) == pytest.approx(1 / 16, rel=0.01)


def test_flops_and_gin_registration():
    f = flops.paligemma_forward_flops(paligemma.PaliGemmaConfig(), 48)
    assert 1.5e12 < f["total"] < 2.0e12 and 0.1 < f["vision"] / f["total"] < 0.2
    gin = pytest.importorskip("gin")
    from chartjax.models import configurables

    with gin.unlock_config():
        model = configurables.build_model(config=CFG, rngs=0)
    assert isinstance(model, paligemma.PaliGemma)
