"""BART parity with HF `BartForConditionalGeneration` (PyTorch, fp32, eval) on tiny random models:
teacher-forced decoder logits within 1e-4 with `scale_embedding` on and off; greedy decoding by
`chartjax.models.decoding` equals HF `generate(num_beams=1, do_sample=False)` under the same
forced BOS/EOS rules; the KV-cached step equals teacher forcing; beam scores are the model's
log-probabilities; HF -> chartjax -> HF state dict exact; config round trip and refusals;
parameter axes known to every mesh preset."""

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

from chartjax.interop import hf_bart  # noqa: E402
from chartjax.models import decoding  # noqa: E402
from chartjax.models.post_ln import bart  # noqa: E402

TOL = 1e-4
VOCAB, MAX_NEW = 80, 12
PAD, EOS, START = 1, 2, 2

CONFIGS = {
    # 3 heads of 8 in both stacks, no embedding scale, no forced tokens.
    "plain": (
        dict(
            d_model=24,
            encoder_layers=2,
            decoder_layers=1,
            encoder_attention_heads=3,
            decoder_attention_heads=3,
            encoder_ffn_dim=40,
            decoder_ffn_dim=40,
        ),
        dict(forced_bos_token_id=None, forced_eos_token_id=None),
    ),
    # sqrt(d) embedding scale, ReLU, 5 encoder heads of 4 and 2 decoder heads of 10, a deeper
    # decoder; BOS forced first and EOS forced last (bart-large-cnn's rules).
    "scaled_forced": (
        dict(
            d_model=20,
            encoder_layers=1,
            decoder_layers=2,
            encoder_attention_heads=5,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=24,
            scale_embedding=True,
            activation_function="relu",
        ),
        dict(forced_bos_token_id=0, forced_eos_token_id=EOS),
    ),
    # Scaled, tanh-GELU, 3 encoder heads of 12 and 9 decoder heads of 4; EOS forced last only
    # (HF BartConfig's default).
    "scaled_gelu_new": (
        dict(
            d_model=36,
            encoder_layers=2,
            decoder_layers=1,
            encoder_attention_heads=3,
            decoder_attention_heads=9,
            encoder_ffn_dim=48,
            decoder_ffn_dim=24,
            scale_embedding=True,
            activation_function="gelu_new",
        ),
        dict(forced_bos_token_id=None, forced_eos_token_id=EOS),
    ),
}


def _randomize(model):
    """Weights that make the outputs depend on the input (HF's 0.02 init gives near-constant
    decodes): unit-variance embeddings, fan-in-scaled matrices, LayerNorm near identity."""
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "layer_norm" in n or "layernorm" in n:
                p.copy_((1.0 if n.endswith("weight") else 0.0) + 0.1 * torch.randn_like(p))
            elif p.ndim == 2 and ("embed" in n or "shared" in n):
                p.normal_(0.0, 1.0)
            elif p.ndim == 2:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[1]))
            else:
                p.normal_(0.0, 0.1)
        model.final_logits_bias.normal_(0.0, 0.1)


def _hf_model(name):
    torch.manual_seed(sorted(CONFIGS).index(name))
    arch, _ = CONFIGS[name]
    cfg = transformers.BartConfig(
        vocab_size=VOCAB, max_position_embeddings=40, dropout=0.0, attention_dropout=0.0, **arch
    )
    model = transformers.BartForConditionalGeneration(cfg).eval()
    _randomize(model)
    return model


def _inputs():
    rng = np.random.default_rng(0)
    enc = rng.integers(3, VOCAB, (3, 9))
    enc[:, 0], enc[:, -1] = 0, EOS  # <s> ... </s>
    enc[1, 6], enc[1, 7:] = EOS, PAD  # a shorter, padded source
    dec = rng.integers(3, VOCAB, (3, 7))
    dec[:, 0] = START
    return enc, dec


@functools.partial(jax.jit, static_argnums=0)
def _forward(graphdef, state, batch):
    return nnx.merge(graphdef, state)(batch, deterministic=True)


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def case(request, tmp_path_factory):
    name = request.param
    hf_model = _hf_model(name)
    d = tmp_path_factory.mktemp(f"bart_{name}")
    hf_model.save_pretrained(d)
    model, cfg = hf_bart.load(str(d))
    # The forced-token rules are set explicitly on both sides.
    cfg = dataclasses.replace(cfg, **CONFIGS[name][1])
    model.cfg = cfg
    enc, dec = _inputs()
    with torch.no_grad():
        ref = hf_model(
            input_ids=torch.tensor(enc),
            attention_mask=torch.tensor(enc != PAD),
            decoder_input_ids=torch.tensor(dec),
        ).logits.numpy()
    batch = {"encoder_input_tokens": jnp.asarray(enc), "decoder_input_tokens": jnp.asarray(dec)}
    logits = np.asarray(_forward(*nnx.split(model), batch))
    return dict(name=name, hf=hf_model, model=model, cfg=cfg, ref=ref, logits=logits, enc=enc)


@pytest.mark.slow
def test_decoder_logits_match(case):
    assert case["logits"].dtype == np.float32
    diff = np.abs(case["logits"] - case["ref"]).max()
    print(f"bart {case['name']}: max |logits diff| = {diff:.2e}")
    assert diff <= TOL


def _until_eos(seqs):
    """Tokens up to and including the first EOS; -1 after (HF pads with 1, chartjax with 0)."""
    seqs = np.array(seqs)
    after = np.cumsum(seqs == EOS, axis=1) - (seqs == EOS) > 0
    return np.where(after, -1, seqs)


@pytest.mark.slow
def test_greedy_equals_hf_generate(case):
    enc = case["enc"]
    ours, _ = decoding.greedy_decode(
        case["model"], {"encoder_input_tokens": jnp.asarray(enc)}, max_decode_len=MAX_NEW
    )
    forced = CONFIGS[case["name"]][1]
    with torch.no_grad():
        ref = case["hf"].generate(
            input_ids=torch.tensor(enc),
            attention_mask=torch.tensor(enc != PAD),
            max_new_tokens=MAX_NEW,
            min_length=0,
            num_beams=1,
            do_sample=False,
            no_repeat_ngram_size=0,
            decoder_start_token_id=START,
            eos_token_id=EOS,
            pad_token_id=PAD,
            **forced,
        )
    ref = ref.numpy()
    assert (ref[:, 0] == START).all()
    ref = np.pad(ref[:, 1:], ((0, 0), (0, MAX_NEW - ref.shape[1] + 1)), constant_values=PAD)
    np.testing.assert_array_equal(_until_eos(ours), _until_eos(ref))
    if forced["forced_bos_token_id"] is not None:
        assert (np.asarray(ours)[:, 0] == forced["forced_bos_token_id"]).all()


@pytest.mark.slow
def test_cached_step_equals_teacher_forcing_and_beam_scores(case):
    if case["name"] != "plain":
        pytest.skip("one beam-search compile is enough (forced tokens change the scores)")
    model, enc = case["model"], case["enc"]
    batch = {"encoder_input_tokens": jnp.asarray(enc)}
    seqs, scores = decoding.beam_search(
        model, batch, max_decode_len=6, num_beams=2, alpha=0.0, eos_id=-1
    )
    seqs = np.asarray(seqs).reshape(-1, 6)
    dec_in = np.concatenate([np.full((seqs.shape[0], 1), START), seqs[:, :-1]], 1)
    tf = {
        "encoder_input_tokens": jnp.asarray(np.repeat(enc, 2, 0)),
        "decoder_input_tokens": jnp.asarray(dec_in),
    }
    logp = np.asarray(jax.nn.log_softmax(_forward(*nnx.split(model), tf), -1))
    picked = np.take_along_axis(logp, seqs[..., None], -1)[..., 0].sum(-1)
    np.testing.assert_allclose(np.asarray(scores).reshape(-1), picked, atol=1e-4)


@pytest.mark.slow
def test_state_dict_roundtrip_exact(case):
    sd = {k: v.numpy() for k, v in case["hf"].state_dict().items()}
    back = hf_bart.to_hf_state_dict(case["model"])
    assert set(back) == set(sd)
    for k, v in sd.items():
        assert back[k].dtype == v.dtype and np.array_equal(back[k], v), k
    fresh = transformers.BartForConditionalGeneration(case["hf"].config)
    fresh.load_state_dict({k: torch.tensor(v) for k, v in back.items()}, strict=True)


@pytest.mark.slow
def test_config_roundtrip(case):
    cfg = case["cfg"]
    assert bart.BartConfig.from_hf_config(cfg.to_hf_config()) == cfg
    assert cfg.scale_embedding == CONFIGS[case["name"]][0].get("scale_embedding", False)
    assert (cfg.pad_id, cfg.eos_id, cfg.decoder_start_token_id) == (PAD, EOS, START)


@pytest.mark.slow
def test_save_loads_in_hf(case, tmp_path):
    if case["name"] != "scaled_forced":
        pytest.skip("one HF load is enough")
    hf_bart.save(case["model"], str(tmp_path))
    back, info = transformers.BartForConditionalGeneration.from_pretrained(
        str(tmp_path), output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    gen = back.generation_config
    assert (gen.forced_bos_token_id, gen.forced_eos_token_id) == (0, EOS)
    assert hf_bart.load(str(tmp_path))[1] == case["cfg"]
    enc, dec = _inputs()
    with torch.no_grad():
        out = back.eval()(
            input_ids=torch.tensor(enc),
            attention_mask=torch.tensor(enc != PAD),
            decoder_input_ids=torch.tensor(dec),
        ).logits.numpy()
    np.testing.assert_allclose(out, case["ref"], atol=1e-5)


@pytest.mark.slow
def test_param_axes_known_to_every_mesh_preset(case):
    mesh = pytest.importorskip("chartjax.mesh")
    for path, var in nnx.to_flat_state(nnx.state(case["model"])):
        if isinstance(var, nnx.RngState):
            continue
        names = var.get_metadata().get("out_sharding")
        assert names is not None and len(names) == var.ndim, path
        for preset in mesh.RULES_PRESETS:
            mesh.logical_to_spec(names, mesh.axis_rules(preset))
    # The logits bias is loaded and saved but not trained.
    assert not any(
        p[0] == "final_logits_bias"
        for p, _ in nnx.to_flat_state(nnx.state(case["model"], nnx.Param))
    )


def test_unsupported_fields_are_refused():
    base = transformers.BartConfig(
        vocab_size=30, d_model=8, encoder_attention_heads=2, decoder_attention_heads=2
    ).to_dict()
    for field, value in (
        ("normalize_before", True),
        ("add_final_layer_norm", True),
        ("add_bias_logits", True),
        ("static_position_embeddings", True),
        ("normalize_embedding", False),
        ("extra_pos_embeddings", 0),
        ("tie_word_embeddings", False),
        ("encoder_layerdrop", 0.1),
        ("activation_function", "quick_gelu"),
        ("forced_eos_token_id", [2, 3]),
        ("model_type", "mbart"),
    ):
        with pytest.raises(ValueError, match=field):
            bart.BartConfig.from_hf_config({**base, field: value})


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


@pytest.mark.slow
@pytest.mark.multi_device
def test_tensor_parallel_forward_equals_plain(case):
    if case["name"] != "plain":
        pytest.skip("one sharded compile is enough")
    mesh_lib = pytest.importorskip("chartjax.mesh")
    mesh, rules = mesh_lib.make_mesh((4, 2)), mesh_lib.axis_rules("tensor_parallel")
    graphdef, state = nnx.split(case["model"])
    state = _sharded(state, mesh_lib, mesh, rules)
    enc, dec = _inputs()
    batch = {"encoder_input_tokens": jnp.asarray(enc), "decoder_input_tokens": jnp.asarray(dec)}
    with mesh_lib.activate(mesh, rules):
        out = jax.jit(lambda s, b: nnx.merge(graphdef, s)(b, deterministic=True))(state, batch)
    assert out.sharding.spec[-1] == "model"  # logits split over the vocabulary
    np.testing.assert_allclose(np.asarray(out), case["logits"], atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_bf16_activations_close_to_fp32(case):
    if case["name"] != "scaled_gelu_new":
        pytest.skip("one bf16 compile is enough")
    graphdef, state = nnx.split(case["model"])
    bf = nnx.eval_shape(lambda: bart.build(dataclasses.replace(case["cfg"], dtype="bfloat16"), 0))
    enc, dec = _inputs()
    batch = {"encoder_input_tokens": jnp.asarray(enc), "decoder_input_tokens": jnp.asarray(dec)}
    out = _forward(nnx.split(bf)[0], state, batch)
    assert out.dtype == jnp.float32
    diff, scale = np.abs(np.asarray(out) - case["logits"]).max(), np.abs(case["logits"]).max()
    print(f"bf16 max |diff| {diff:.3g} for max |logit| {scale:.3g}")
    assert diff <= 0.05 * scale
