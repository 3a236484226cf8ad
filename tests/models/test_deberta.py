"""DeBERTa v2/v3 parity with HF `DebertaV2ForSequenceClassification` (PyTorch, fp32, eval) on
tiny random models: classification logits within 1e-4 with log-bucketed and plain relative
positions, shared and separate position projections, c2p/p2c combinations, the ConvLayer,
embedding projection and token types; HF -> chartjax -> HF state dict exact; relative positions
equal HF's at real sizes; config round trip and refusals; parameter axes known to every mesh
preset; bf16 activations stay close to fp32."""

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from chartjax.interop import hf_deberta  # noqa: E402
from chartjax.models.post_ln import deberta  # noqa: E402

TOL = 1e-4
B, S = 2, 20

CONFIGS = {
    # DeBERTa-v3 style: log buckets (8 -> span 8 for 20 tokens), shared keys, normalised
    # relative embeddings, no absolute positions; 3 heads of 8.
    "v3_buckets_shared": dict(
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=40,
        relative_attention=True,
        position_buckets=8,
        pos_att_type="p2c|c2p",
        share_att_key=True,
        norm_rel_ebd="layer_norm",
        position_biased_input=False,
    ),
    # DeBERTa-v2 style without buckets: span 6 < 20 tokens, so the clipping is exercised; own
    # pos_key/pos_query projections; ConvLayer (GELU); embedding_size 12 -> embed_proj; token
    # types; 5 heads of 4.
    "v2_conv_projected": dict(
        hidden_size=20,
        num_hidden_layers=2,
        num_attention_heads=5,
        intermediate_size=36,
        relative_attention=True,
        max_relative_positions=6,
        pos_att_type=["c2p", "p2c"],
        share_att_key=False,
        conv_kernel_size=3,
        conv_act="gelu",
        embedding_size=12,
        type_vocab_size=2,
        hidden_act="gelu_new",
    ),
    # c2p only, buckets 6 with max_relative_positions 32, grouped 5-wide conv, tanh pooler;
    # 3 heads of 6.
    "c2p_grouped_conv": dict(
        hidden_size=18,
        num_hidden_layers=1,
        num_attention_heads=3,
        intermediate_size=30,
        relative_attention=True,
        position_buckets=6,
        max_relative_positions=32,
        pos_att_type="c2p",
        share_att_key=False,
        norm_rel_ebd="layer_norm",
        conv_kernel_size=5,
        conv_groups=3,
        pooler_hidden_act="tanh",
    ),
    # No relative attention, but pos_att_type still enters HF's scale 1/sqrt(3d).
    "absolute_only": dict(
        hidden_size=12,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=24,
        relative_attention=False,
        pos_att_type="p2c|c2p",
        type_vocab_size=3,
    ),
}


@functools.partial(jax.jit, static_argnums=0)
def _forward(graphdef, state, batch):
    return nnx.merge(graphdef, state)(batch, deterministic=True)


def _randomize(model):
    """O(1), input-dependent logits (HF's 0.02 init gives near-constant ones, and 1e-4 would mean
    nothing): unit-variance embeddings, fan-in-scaled kernels, LayerNorm near identity."""
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "LayerNorm" in n:
                p.copy_((1.0 if n.endswith("weight") else 0.0) + 0.1 * torch.randn_like(p))
            elif "embeddings" in n:
                p.normal_(0.0, 1.0)
            elif p.ndim >= 2:
                p.normal_(0.0, 1.0 / math.sqrt(p[0].numel()))
            else:
                p.normal_(0.0, 0.1)


def _hf_model(name):
    torch.manual_seed(sorted(CONFIGS).index(name))
    cfg = transformers.DebertaV2Config(
        vocab_size=64,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=3,
        **CONFIGS[name],
    )
    model = transformers.DebertaV2ForSequenceClassification(cfg).eval()
    _randomize(model)
    return model


def _inputs():
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 64, (B, S))
    mask = np.ones((B, S), np.int64)
    mask[1, 13:] = 0
    ids[1, 13:] = 0
    tt = (np.arange(S) >= 8).astype(np.int64)[None].repeat(B, 0)
    return ids, mask, tt


def _hf_kwargs(hf_model, ids, mask, tt):
    kw = {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}
    if hf_model.config.type_vocab_size > 0:
        kw["token_type_ids"] = torch.tensor(tt)
    return kw


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def case(request, tmp_path_factory):
    name = request.param
    hf_model = _hf_model(name)
    d = tmp_path_factory.mktemp(f"deberta_{name}")
    hf_model.save_pretrained(d)
    model, cfg = hf_deberta.load(str(d))
    ids, mask, tt = _inputs()
    with torch.no_grad():
        ref = hf_model(**_hf_kwargs(hf_model, ids, mask, tt)).logits.numpy()
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": tt}
    logits = np.asarray(_forward(*nnx.split(model), jax.tree.map(jnp.asarray, batch)))
    return dict(name=name, hf=hf_model, model=model, cfg=cfg, ref=ref, logits=logits, batch=batch)


def test_classification_logits_match(case):
    assert case["logits"].dtype == np.float32
    diff = np.abs(case["logits"] - case["ref"]).max()
    print(f"deberta {case['name']}: max |logits diff| = {diff:.2e}")
    assert diff <= TOL
    assert np.abs(case["ref"]).max() > 0.1  # not a comparison of near-zero numbers
    assert np.abs(case["ref"][0] - case["ref"][1]).max() > 1e-2  # the logits follow the input


def test_state_dict_roundtrip_exact(case):
    sd = {k: v.numpy() for k, v in case["hf"].state_dict().items()}
    back = hf_deberta.to_hf_state_dict(case["model"])
    assert set(back) == set(sd)
    for k, v in sd.items():
        assert back[k].dtype == v.dtype and np.array_equal(back[k], v), k
    fresh = transformers.DebertaV2ForSequenceClassification(case["hf"].config)
    fresh.load_state_dict({k: torch.tensor(v) for k, v in back.items()}, strict=True)


def test_config_roundtrip_and_fields(case):
    cfg = case["cfg"]
    assert deberta.DebertaConfig.from_hf_config(cfg.to_hf_config()) == cfg
    spec = CONFIGS[case["name"]]
    assert cfg.share_att_key == spec.get("share_att_key", False)
    assert cfg.position_buckets == spec.get("position_buckets", -1)
    assert cfg.conv_kernel_size == spec.get("conv_kernel_size", 0)


def test_save_loads_in_hf(case, tmp_path):
    if case["name"] != "v2_conv_projected":
        pytest.skip("one HF load is enough")
    hf_deberta.save(case["model"], str(tmp_path))
    back, info = transformers.DebertaV2ForSequenceClassification.from_pretrained(
        str(tmp_path), output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ids, mask, tt = _inputs()
    with torch.no_grad():
        out = back.eval()(**_hf_kwargs(back, ids, mask, tt)).logits.numpy()
    np.testing.assert_allclose(out, case["ref"], atol=1e-6)


def test_param_axes_known_to_every_mesh_preset(case):
    mesh = pytest.importorskip("chartjax.mesh")
    for path, var in nnx.to_flat_state(nnx.state(case["model"], nnx.Param)):
        names = var.get_metadata().get("out_sharding")
        assert names is not None and len(names) == var.ndim, path
        for preset in mesh.RULES_PRESETS:
            mesh.logical_to_spec(names, mesh.axis_rules(preset))


@pytest.mark.parametrize(
    "length,buckets,max_pos",
    [(512, 256, 512), (300, 256, 512), (130, 64, 128), (40, 8, 64), (33, 6, 32), (20, -1, 6)],
)
def test_relative_positions_equal_hf(length, buckets, max_pos):
    from transformers.models.deberta_v2 import modeling_deberta_v2 as m

    x = torch.zeros(1, length, 1)
    ref = m.build_relative_position(x, x, bucket_size=buckets, max_position=max_pos)[0].numpy()
    np.testing.assert_array_equal(deberta.relative_positions(length, length, buckets, max_pos), ref)


def test_bf16_activations_close_to_fp32(case):
    if case["name"] != "v3_buckets_shared":
        pytest.skip("one bf16 compile is enough")
    graphdef, state = nnx.split(case["model"])
    bf = nnx.eval_shape(
        lambda: deberta.build(dataclasses.replace(case["cfg"], dtype="bfloat16"), 0)
    )
    bf_graphdef, _ = nnx.split(bf)
    out = _forward(bf_graphdef, state, jax.tree.map(jnp.asarray, case["batch"]))
    assert out.dtype == jnp.float32
    diff, scale = np.abs(np.asarray(out) - case["logits"]).max(), np.abs(case["logits"]).max()
    print(f"bf16 max |diff| {diff:.3g} for max |logit| {scale:.3g}")
    assert diff <= 0.05 * scale


def test_unsupported_fields_are_refused():
    base = transformers.DebertaV2Config(
        vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2
    ).to_dict()
    for field, value in (
        ("pos_att_type", "p2c|p2p"),
        ("norm_rel_ebd", "batch_norm"),
        ("conv_kernel_size", 4),
        ("conv_act", "quick_gelu"),
        ("hidden_act", "quick_gelu"),
        ("attention_head_size", 3),
        ("pooler_hidden_size", 16),
        ("model_type", "deberta"),
    ):
        extra = {"conv_kernel_size": 3} if field == "conv_act" else {}
        with pytest.raises(ValueError, match=field):
            deberta.DebertaConfig.from_hf_config({**base, **extra, field: value})


def _sharded(state, mesh_lib, mesh, rules):
    """`state` with every annotated variable placed by the rules (replicated where they do not
    divide the shape)."""
    from jax.sharding import NamedSharding

    flat = nnx.to_flat_state(state)
    for _, var in flat:
        names = var.get_metadata().get("out_sharding") if isinstance(var, nnx.Variable) else None
        if not names:
            continue
        spec = mesh_lib.logical_to_spec(names, rules)
        if all(a is None or d % mesh.shape[a] == 0 for d, a in zip(var.shape, spec)):
            var.set_value(jax.device_put(var.get_value(), NamedSharding(mesh, spec)))
    return nnx.from_flat_state(flat)


@pytest.mark.multi_device
def test_tensor_parallel_forward_equals_plain(case):
    if case["name"] != "v3_buckets_shared":
        pytest.skip("one sharded compile is enough")
    mesh_lib = pytest.importorskip("chartjax.mesh")
    mesh, rules = mesh_lib.make_mesh((4, 2)), mesh_lib.axis_rules("tensor_parallel")
    graphdef, state = nnx.split(case["model"])
    state = _sharded(state, mesh_lib, mesh, rules)
    assert any(
        not v.get_value().sharding.is_fully_replicated
        for _, v in nnx.to_flat_state(state)
        if isinstance(v, nnx.Param)
    )
    batch = jax.tree.map(jnp.asarray, case["batch"])
    with mesh_lib.activate(mesh, rules):
        out = jax.jit(lambda s, b: nnx.merge(graphdef, s)(b, deterministic=True))(state, batch)
    np.testing.assert_allclose(np.asarray(out), case["logits"], atol=1e-5, rtol=1e-5)


def test_new_head_from_a_pretrained_base(case):
    """A base checkpoint (no pooler/classifier, an MLM head, an old position_ids buffer) loads
    with `new_head`: the encoder is copied, the head keeps its init, the rest is dropped."""
    if case["name"] != "v3_buckets_shared":
        pytest.skip("one is enough")
    sd = {k: v.numpy() for k, v in case["hf"].state_dict().items()}
    base = {k: v for k, v in sd.items() if not k.startswith(("pooler.", "classifier."))}
    base["lm_predictions.lm_head.bias"] = np.zeros(64, np.float32)
    base["deberta.embeddings.position_ids"] = np.arange(64)[None]
    model = deberta.build(case["cfg"], 3)
    head = np.asarray(model.classifier.kernel[...])
    with pytest.raises(KeyError, match="classifier"):
        hf_deberta.load_params(model, base)
    hf_deberta.load_params(model, base, new_head=True)
    np.testing.assert_array_equal(np.asarray(model.classifier.kernel[...]), head)
    got = hf_deberta.to_hf_state_dict(model)
    for k in base:
        if k.startswith("deberta.encoder"):
            np.testing.assert_array_equal(got[k], sd[k])
