"""TAPAS parity with HF `TapasForSequenceClassification` (PyTorch, fp32, eval) on tiny random
models: classification logits within 1e-4 on inputs with real table structure (segment, column,
row, ranks, numeric relations), with and without `reset_position_index_per_cell`; HF -> chartjax
-> HF state dict exact; config round trip and refusals; parameter axes known to every mesh
preset."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from chartjax.interop import hf_tapas  # noqa: E402
from chartjax.models.post_ln import tapas  # noqa: E402

TOL = 1e-4
TYPES = [3, 6, 6, 2, 5, 5, 4]  # segment, column, row, prev_labels, ranks, inv ranks, numeric rel.

CONFIGS = {
    # 3 heads of 8; positions restart in every cell.
    "reset": dict(
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=40,
        max_position_embeddings=64,
        reset_position_index_per_cell=True,
        num_labels=2,
    ),
    # 5 heads of 4, absolute positions, tanh-GELU, 3 labels.
    "absolute": dict(
        hidden_size=20,
        num_hidden_layers=1,
        num_attention_heads=5,
        intermediate_size=36,
        max_position_embeddings=64,
        reset_position_index_per_cell=False,
        hidden_act="gelu_new",
        num_labels=3,
    ),
    # 3 heads of 5; 12 positions for 32 tokens: the question/padding positions hit the cap.
    "reset_capped": dict(
        hidden_size=15,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=30,
        max_position_embeddings=12,
        reset_position_index_per_cell=True,
        num_labels=2,
    ),
}


def table_example(rng, seq_len: int, vocab: int):
    """[CLS] question [SEP] then a 3-column table (header row + 3 data rows), 1-2 tokens a cell,
    padded to `seq_len`. Token types as TapasTokenizer writes them: segment 1 on the table;
    column 1.., row 0 for the header; ranks of the numeric columns (1 = smallest, 0 = none)."""
    ids, tt = [101], [[0] * 7]
    q = int(rng.integers(3, 6))
    ids += list(rng.integers(200, vocab, q)) + [102]
    tt += [[0, 0, 0, 0, 0, 0, int(rng.integers(0, 4))] for _ in range(q)] + [[0] * 7]
    values = rng.integers(0, 100, (3, 3))
    for r in range(4):
        for c in range(3):
            n = int(rng.integers(1, 3))
            rank = inv = 0
            if r > 0 and c > 0:  # columns 2 and 3 are numeric
                col = values[:, c]
                rank = int(np.sum(col < col[r - 1])) + 1
                inv = int(np.sum(col > col[r - 1])) + 1
            prev = int(rng.integers(0, 2)) if r > 0 else 0
            rel = int(rng.integers(0, 4)) if r > 0 else 0
            for _ in range(n):
                ids.append(int(rng.integers(200, vocab)))
                tt.append([1, c + 1, r, prev, rank, inv, rel])
    n_valid = len(ids)
    assert n_valid <= seq_len
    ids += [0] * (seq_len - n_valid)
    tt += [[0] * 7] * (seq_len - n_valid)
    mask = [1] * n_valid + [0] * (seq_len - n_valid)
    return np.array(ids), np.array(tt), np.array(mask)


def _inputs(vocab: int):
    rng = np.random.default_rng(0)
    rows = [table_example(rng, 32, vocab) for _ in range(2)]
    return tuple(np.stack(x) for x in zip(*rows))


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
    cfg = transformers.TapasConfig(
        vocab_size=300,
        type_vocab_sizes=TYPES,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        **CONFIGS[name],
    )
    model = transformers.TapasForSequenceClassification(cfg).eval()
    _randomize(model)
    return model


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def case(request, tmp_path_factory):
    name = request.param
    hf_model = _hf_model(name)
    d = tmp_path_factory.mktemp(f"tapas_{name}")
    hf_model.save_pretrained(d)
    model, cfg = hf_tapas.load(str(d))
    ids, tt, mask = _inputs(cfg.vocab_size)
    with torch.no_grad():
        ref = hf_model(
            input_ids=torch.tensor(ids),
            token_type_ids=torch.tensor(tt),
            attention_mask=torch.tensor(mask),
        ).logits.numpy()
    batch = {"input_ids": ids, "token_type_ids": tt, "attention_mask": mask}
    logits = np.asarray(_forward(*nnx.split(model), jax.tree.map(jnp.asarray, batch)))
    return dict(name=name, hf=hf_model, model=model, cfg=cfg, ref=ref, logits=logits, dir=d)


@pytest.mark.slow
def test_classification_logits_match(case):
    assert case["logits"].dtype == np.float32
    diff = np.abs(case["logits"] - case["ref"]).max()
    print(f"tapas {case['name']}: max |logits diff| = {diff:.2e}")
    assert diff <= TOL
    assert np.abs(case["ref"]).max() > 0.1  # not a comparison of near-zero numbers
    assert np.abs(case["ref"][0] - case["ref"][1]).max() > 1e-2  # the logits follow the input


def test_state_dict_roundtrip_exact(case):
    sd = {k: v.numpy() for k, v in case["hf"].state_dict().items()}
    back = hf_tapas.to_hf_state_dict(case["model"])
    assert set(back) == set(sd)
    for k, v in sd.items():
        assert back[k].dtype == v.dtype and np.array_equal(back[k], v), k
    fresh = transformers.TapasForSequenceClassification(case["hf"].config)
    fresh.load_state_dict({k: torch.from_numpy(v) for k, v in back.items()}, strict=True)


def test_config_roundtrip(case):
    cfg = case["cfg"]
    assert tapas.TapasConfig.from_hf_config(cfg.to_hf_config()) == cfg
    assert cfg.type_vocab_sizes == tuple(TYPES)
    assert (
        cfg.reset_position_index_per_cell == CONFIGS[case["name"]]["reset_position_index_per_cell"]
    )


def test_save_loads_in_hf(case, tmp_path):
    if case["name"] != "reset":
        pytest.skip("one HF load is enough")
    hf_tapas.save(case["model"], str(tmp_path))
    back, info = transformers.TapasForSequenceClassification.from_pretrained(
        str(tmp_path), output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    ids, tt, mask = _inputs(case["cfg"].vocab_size)
    with torch.no_grad():
        out = back.eval()(
            input_ids=torch.tensor(ids),
            token_type_ids=torch.tensor(tt),
            attention_mask=torch.tensor(mask),
        ).logits.numpy()
    np.testing.assert_allclose(out, case["ref"], atol=1e-6)


def test_per_cell_positions_by_hand():
    # [CLS] q q [SEP] | (col1,row0) x2 | (col2,row0) | (col1,row1) x3 | pad
    col = [0, 0, 0, 0, 1, 1, 2, 1, 1, 1, 0]
    row = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0]
    tt = np.zeros((1, len(col), 7), np.int32)
    tt[0, :, 1], tt[0, :, 2] = col, row
    got = np.asarray(tapas.per_cell_positions(jnp.asarray(tt), 64))[0]
    np.testing.assert_array_equal(got, [0, 1, 2, 3, 0, 1, 0, 0, 1, 2, 10])
    capped = np.asarray(tapas.per_cell_positions(jnp.asarray(tt), 3))[0]
    np.testing.assert_array_equal(capped, np.minimum([0, 1, 2, 3, 0, 1, 0, 0, 1, 2, 10], 2))


def test_unsupported_fields_are_refused():
    base = transformers.TapasConfig(
        vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2
    ).to_dict()
    for field, value in (
        ("hidden_act", "quick_gelu"),
        ("is_decoder", True),
        ("add_cross_attention", True),
        ("model_type", "bert"),
    ):
        with pytest.raises(ValueError, match=field):
            tapas.TapasConfig.from_hf_config({**base, field: value})
    with pytest.raises(ValueError, match="missing field 'vocab_size'"):
        tapas.TapasConfig.from_hf_config({"model_type": "tapas"})


def test_unknown_hf_tensor_is_refused(case):
    sd = {k: v.numpy() for k, v in case["hf"].state_dict().items()}
    model = nnx.eval_shape(lambda: tapas.build(case["cfg"], 0))
    with pytest.raises(ValueError, match="does not implement"):
        hf_tapas.load_params(
            model, {**sd, "tapas.encoder.layer.0.extra.weight": sd["classifier.bias"]}
        )


def test_param_axes_known_to_every_mesh_preset(case):
    mesh = pytest.importorskip("chartjax.mesh")
    params = nnx.to_flat_state(nnx.state(case["model"], nnx.Param))
    for path, var in params:
        names = var.get_metadata().get("out_sharding")
        assert names is not None and len(names) == var.ndim, path
        for preset in mesh.RULES_PRESETS:
            mesh.logical_to_spec(names, mesh.axis_rules(preset))
