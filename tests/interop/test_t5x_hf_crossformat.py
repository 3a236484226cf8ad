"""Cross-format agreement that does not trust chartjax's writers: tiny HF (PyTorch) models' weights
are written in the T5X layout by this file (raw msgpack ext types + hand-made zarr v2 directories,
names from the reference's T5X<->HF tables, models.md §3.4 / §3.6), loaded by interop/t5x.py, and
must give the HF logits within 1e-4 (fp32). Covers both spec variants, inline arrays, float32 and
bfloat16 zarr, multi-chunk arrays and Adafactor state."""

import gzip
import itertools
import json
import math
import re

import jax
import jax.numpy as jnp
import ml_dtypes
import msgpack
import numpy as np
import pytest
from flax import nnx

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from chartjax.interop import t5x  # noqa: E402

TOL = 1e-4
T, P = 12, 12

# --------------------------------------------------------------------------- T5X names (reference)


def p2s_t5x_names(n_enc: int, n_dec: int) -> list[str]:
    """Pix2Struct T5X parameter names, as listed in models.md §1.6."""
    names = [
        "encoder/token_embedder/patch_projection/kernel",
        "encoder/token_embedder/patch_projection/bias",
        "encoder/token_embedder/embedders_0/pos_embedding",
        "encoder/token_embedder/embedders_1/pos_embedding",
        "encoder/encoder_norm/scale",
        "decoder/token_embedder/embedding",
        "decoder/relpos_bias/rel_embedding",
        "decoder/decoder_norm/scale",
        "decoder/logits_dense/kernel",
    ]
    for i in range(n_enc):
        names += [
            f"encoder/layers_{i}/{s}"
            for s in (
                "pre_attention_layer_norm/scale",
                "attention/query/kernel",
                "attention/key/kernel",
                "attention/value/kernel",
                "attention/out/kernel",
                "pre_mlp_layer_norm/scale",
                "mlp/wi_0/kernel",
                "mlp/wi_1/kernel",
                "mlp/wo/kernel",
            )
        ]
    for i in range(n_dec):
        names += [
            f"decoder/layers_{i}/pre_{a}_layer_norm/scale"
            for a in ("self_attention", "cross_attention", "mlp")
        ]
        names += [
            f"decoder/layers_{i}/{a}/{p}/kernel"
            for a in ("self_attention", "encoder_decoder_attention")
            for p in ("query", "key", "value", "out")
        ]
        names += [f"decoder/layers_{i}/mlp/{w}/kernel" for w in ("wi_0", "wi_1", "wo")]
    return names


_ALL = [
    ("token_embedder", "embeddings"),
    ("encoder_norm", "layernorm"),
    ("kernel", "weight"),
    (".out", ".output"),
    ("scale", "weight"),
    ("embedders_0.pos_embedding", "row_embedder.weight"),
    ("embedders_1.pos_embedding", "column_embedder.weight"),
]
_DEC = [
    ("query", "attention.query"),
    ("key", "attention.key"),
    ("value", "attention.value"),
    ("output.dense", "output"),
    ("encoder_decoder_attention.o", "encoder_decoder_attention.attention.o"),
    ("pre_self_attention_layer_norm", "self_attention.layer_norm"),
    ("pre_cross_attention_layer_norm", "encoder_decoder_attention.layer_norm"),
    ("mlp.", "mlp.DenseReluDense."),
    ("pre_mlp_layer_norm", "mlp.layer_norm"),
    ("self_attention.o", "self_attention.attention.o"),
    ("decoder.embeddings.embedding", "decoder.embed_tokens.weight"),
    (
        "decoder.relpos_bias.rel_embedding",
        "decoder.layer.0.self_attention.attention.relative_attention_bias.weight",
    ),
    ("decoder.decoder_norm.weight", "decoder.final_layer_norm.weight"),
    ("decoder.logits_dense.weight", "decoder.lm_head.weight"),
]


def p2s_hf_name(t5x_name: str) -> tuple[str, bool]:
    """The HF converter's procedure (models.md §3.4): replacements in order, then layers, then
    transpose every tensor whose name has neither `embed_tokens` nor `embedder`."""
    key = t5x_name.replace("/", ".")
    for a, b in _ALL:
        key = key.replace(a, b)
    if key.startswith("decoder."):
        for a, b in _DEC:
            key = key.replace(a, b)
    key = re.sub(r"layers_(\d+)", r"layer.\1", key)
    if key.startswith("encoder.layer."):
        key = "encoder." + key
    return key, "embed_tokens" not in key and "embedder" not in key


def t5_t5x_names(n_enc: int, n_dec: int, gated: bool, tied: bool) -> list[str]:
    """T5.1.1 / Flan-T5 (or T5 1.0 with `tied`) T5X names, models.md §3.6."""
    wis = ("wi_0", "wi_1") if gated else ("wi",)
    names = [
        "token_embedder/embedding",
        "encoder/relpos_bias/rel_embedding",
        "encoder/encoder_norm/scale",
        "decoder/relpos_bias/rel_embedding",
        "decoder/decoder_norm/scale",
    ] + ([] if tied else ["decoder/logits_dense/kernel"])
    for i in range(n_enc):
        names += [
            f"encoder/layers_{i}/pre_attention_layer_norm/scale",
            f"encoder/layers_{i}/pre_mlp_layer_norm/scale",
        ]
        names += [
            f"encoder/layers_{i}/attention/{p}/kernel" for p in ("query", "key", "value", "out")
        ]
        names += [f"encoder/layers_{i}/mlp/{w}/kernel" for w in (*wis, "wo")]
    for i in range(n_dec):
        names += [
            f"decoder/layers_{i}/pre_{a}_layer_norm/scale"
            for a in ("self_attention", "cross_attention", "mlp")
        ]
        names += [
            f"decoder/layers_{i}/{a}/{p}/kernel"
            for a in ("self_attention", "encoder_decoder_attention")
            for p in ("query", "key", "value", "out")
        ]
        names += [f"decoder/layers_{i}/mlp/{w}/kernel" for w in (*wis, "wo")]
    return names


def t5_hf_name(t5x_name: str) -> tuple[str, bool]:
    """HF T5 name (models.md §3.6) and whether the T5X array is the transposed HF weight."""
    p = t5x_name.split("/")
    if t5x_name == "token_embedder/embedding":
        return "shared.weight", False
    if t5x_name == "decoder/logits_dense/kernel":
        return "lm_head.weight", True
    stack = p[0]
    if p[1] == "relpos_bias":
        return f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight", True
    if p[1] in ("encoder_norm", "decoder_norm"):
        return f"{stack}.final_layer_norm.weight", False
    i, sub = int(p[1].removeprefix("layers_")), p[2]
    ff = 1 if stack == "encoder" else 2
    sub_layer = {
        "pre_attention_layer_norm": "0.layer_norm",
        "attention": "0.SelfAttention",
        "pre_self_attention_layer_norm": "0.layer_norm",
        "self_attention": "0.SelfAttention",
        "pre_cross_attention_layer_norm": "1.layer_norm",
        "encoder_decoder_attention": "1.EncDecAttention",
        "pre_mlp_layer_norm": f"{ff}.layer_norm",
        "mlp": f"{ff}.DenseReluDense",
    }[sub]
    leaf = {"query": "q", "key": "k", "value": "v", "out": "o"}.get(p[3], p[3])
    if sub.endswith("layer_norm"):
        return f"{stack}.block.{i}.layer.{sub_layer}.weight", False
    return f"{stack}.block.{i}.layer.{sub_layer}.{leaf}.weight", True


# --------------------------------------------------------------------------- T5X layout writer


def _ext_array(a: np.ndarray, code: int = 1) -> msgpack.ExtType:
    """flax msgpack ext type: 1 ndarray / 3 numpy scalar, payload msgpack((shape, dtype, bytes))."""
    payload = msgpack.packb((list(a.shape), a.dtype.name, a.tobytes("C")), use_bin_type=True)
    return msgpack.ExtType(code, payload)


def _write_zarr(ckpt, name: str, a: np.ndarray, chunks: list[int]) -> None:
    """zarr v2 by hand: `.zarray` + gzip chunk files `i.j`, edge chunks padded to full size."""
    d = ckpt / name
    d.mkdir()
    zdtype = "bfloat16" if a.dtype == ml_dtypes.bfloat16 else "<f4"
    (d / ".zarray").write_text(
        json.dumps(
            {
                "zarr_format": 2,
                "shape": list(a.shape),
                "chunks": chunks,
                "dtype": zdtype,
                "compressor": {"id": "gzip", "level": 1},
                "fill_value": None,
                "order": "C",
                "filters": None,
            }
        )
    )
    grid = [math.ceil(s / c) for s, c in zip(a.shape, chunks)]
    for idx in itertools.product(*map(range, grid)):
        part = a[tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunks))]
        block = np.zeros(chunks, a.dtype)
        block[tuple(slice(0, n) for n in part.shape)] = part
        (d / ".".join(map(str, idx))).write_bytes(gzip.compress(block.tobytes("C")))


def write_t5x(
    ckpt,
    arrays: dict[str, np.ndarray],
    *,
    variant: str,
    dtype,
    chunk_elems: int,
    step: int = 1234,
    param_states: dict | None = None,
) -> None:
    """`arrays` (T5X name -> float32 array) as a T5X checkpoint dir. Arrays of at least
    `chunk_elems` elements go to zarr (chunked to about that size), smaller ones inline."""
    ckpt.mkdir(parents=True)
    target: dict = {}
    for name, a in arrays.items():
        a = np.ascontiguousarray(a.astype(dtype))
        if a.size < chunk_elems:
            leaf = _ext_array(a)
        else:
            chunks = [max(1, s // 2) for s in a.shape]
            while math.prod(chunks) > chunk_elems:
                chunks[int(np.argmax(chunks))] //= 2
            fname = "target." + name.replace("/", ".")
            _write_zarr(ckpt, fname, a, chunks)
            meta = {"compressor": {"id": "gzip"}, "shape": list(a.shape), "chunks": chunks}
            dt = "bfloat16" if a.dtype == ml_dtypes.bfloat16 else "float32"
            if variant == "kvstore":
                leaf = {
                    "driver": "zarr",
                    "dtype": dt,
                    "metadata": meta,
                    "kvstore": {"driver": "file", "path": fname},
                }
            else:
                leaf = {
                    "driver": "zarr",
                    "dtype": dt,
                    "metadata": meta,
                    "path": fname,
                    "kvstore": {"driver": "gcs", "bucket": "t5x-dummy-bucket"},
                }
        node = target
        for part in name.split("/")[:-1]:
            node = node.setdefault(part, {})
        node[name.split("/")[-1]] = leaf
    states: dict = {}
    for name, slots in (param_states or {}).items():
        node = states
        for part in name.split("/"):
            node = node.setdefault(part, {})
        node.update({k: _ext_array(v) for k, v in slots.items()})
    tree = {
        "version": 3,
        "optimizer": {
            "target": target,
            "state": {
                "step": _ext_array(np.asarray(step, np.int32), code=3),
                "param_states": states,
            },
        },
    }
    (ckpt / "checkpoint").write_bytes(msgpack.packb(tree, use_bin_type=True))


# --------------------------------------------------------------------------- cases

CASES = {
    # name: (kind, HF config kwargs, variant, stored dtype)
    "p2s_kvstore_f32": (
        "p2s",
        (
            dict(vocab_size=80, hidden_size=24, d_kv=8, d_ff=40, num_layers=2, num_heads=3),
            dict(
                hidden_size=24,
                patch_embed_hidden_size=48,
                d_ff=40,
                d_kv=8,
                num_hidden_layers=2,
                num_attention_heads=3,
                seq_len=32,
            ),
        ),
        "kvstore",
        np.float32,
    ),
    "p2s_toplevel_bf16": (
        "p2s",
        (
            dict(vocab_size=64, hidden_size=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2),
            dict(
                hidden_size=16,
                patch_embed_hidden_size=12,
                d_ff=32,
                d_kv=8,
                num_hidden_layers=2,
                num_attention_heads=2,
                seq_len=16,
            ),
        ),
        "top_level",
        ml_dtypes.bfloat16,
    ),
    "t5_gated_toplevel_f32": (
        "t5",
        dict(
            vocab_size=96,
            d_model=24,
            d_kv=10,
            d_ff=40,
            num_layers=2,
            num_decoder_layers=3,
            num_heads=3,
            feed_forward_proj="gated-gelu",
            tie_word_embeddings=False,
        ),
        "top_level",
        np.float32,
    ),
    "t5_tied_relu_kvstore_bf16": (
        "t5",
        dict(
            vocab_size=64,
            d_model=16,
            d_kv=4,
            d_ff=24,
            num_layers=2,
            num_decoder_layers=1,
            num_heads=2,
            feed_forward_proj="relu",
            tie_word_embeddings=True,
        ),
        "kvstore",
        ml_dtypes.bfloat16,
    ),
}


def _hf_model(name):
    kind, kw, _, _ = CASES[name]
    torch.manual_seed(sorted(CASES).index(name))
    if kind == "t5":
        cfg = transformers.T5Config(dropout_rate=0.0, decoder_start_token_id=0, **kw)
        return transformers.T5ForConditionalGeneration(cfg).eval()
    text, vision = kw
    cfg = transformers.Pix2StructConfig(
        text_config={**text, "dropout_rate": 0.0}, vision_config={**vision, "dropout_rate": 0.0}
    )
    return transformers.Pix2StructForConditionalGeneration(cfg).eval()


def _t5x_arrays(name, hf_model):
    kind, kw, _, _ = CASES[name]
    sd = {k: v.detach().float().numpy() for k, v in hf_model.state_dict().items()}
    if kind == "p2s":
        names = p2s_t5x_names(kw[1]["num_hidden_layers"], kw[0]["num_layers"])
        to_hf = p2s_hf_name
    else:
        names = t5_t5x_names(
            kw["num_layers"],
            kw["num_decoder_layers"],
            kw["feed_forward_proj"].startswith("gated"),
            kw["tie_word_embeddings"],
        )
        to_hf = t5_hf_name
    arrays, used = {}, set()
    for n in names:
        hf_name, transpose = to_hf(n)
        arrays[n] = sd[hf_name].T if transpose else sd[hf_name]
        used.add(hf_name)
    # Every HF tensor is accounted for, except HF's tied aliases of `shared` / the lm_head.
    aliases = {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"}
    assert set(sd) - used <= aliases
    return arrays


def _inputs(name, hf_model, rng):
    kind, kw, _, _ = CASES[name]
    vocab = hf_model.config.text_config.vocab_size if kind == "p2s" else kw["vocab_size"]
    tgt = rng.integers(2, vocab, (2, T))
    tgt[1, 9:] = 0
    dec_in = np.concatenate([np.zeros((2, 1), np.int64), tgt[:, :-1]], 1)
    if kind == "t5":
        enc = rng.integers(2, vocab, (2, 9))
        enc[1, 6:] = 0
        hf_in = {"input_ids": torch.tensor(enc), "attention_mask": torch.tensor(enc > 0)}
    else:
        pdim = kw[1]["patch_embed_hidden_size"]
        enc = rng.normal(size=(2, P, 2 + pdim)).astype(np.float32)
        enc[:, :, :2] = [(r + 1, c + 1) for r in range(3) for c in range(4)]
        enc[1, 8:] = 0
        hf_in = {
            "flattened_patches": torch.tensor(enc),
            "attention_mask": torch.tensor(enc[..., 0] > 0),
        }
    hf_in["decoder_input_ids"] = torch.tensor(dec_in)
    hf_in["decoder_attention_mask"] = torch.tensor((tgt > 0) | (np.arange(T) == 0))
    ours = {
        "encoder_input_tokens": jnp.asarray(enc),
        "decoder_input_tokens": jnp.asarray(dec_in),
        "decoder_target_tokens": jnp.asarray(tgt),
    }
    return ours, hf_in, tgt > 0


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    name = request.param
    _, _, variant, dtype = CASES[name]
    hf_model = _hf_model(name)
    arrays = _t5x_arrays(name, hf_model)
    if dtype == ml_dtypes.bfloat16:
        # The HF reference runs on the same (bf16-rounded) weights the checkpoint stores.
        sd = hf_model.state_dict()
        with torch.no_grad():
            for v in sd.values():
                v.copy_(v.to(torch.bfloat16).float())
        arrays = _t5x_arrays(name, hf_model)
    ckpt = tmp_path_factory.mktemp(name) / "checkpoint_1234"
    # Adafactor-like state for one parameter: ignored by load, returned by load_optimizer_state.
    some = next(iter(arrays))
    states = {some: {"v_row": np.full((3,), 0.5, np.float32), "m": np.zeros((1,), np.float32)}}
    write_t5x(ckpt, arrays, variant=variant, dtype=dtype, chunk_elems=256, param_states=states)
    model, cfg, step = t5x.load(str(ckpt))
    ours, hf_in, valid = _inputs(name, hf_model, np.random.default_rng(0))
    with torch.no_grad():
        ref = hf_model(**hf_in).logits.numpy()
    logits = jax.jit(lambda g, s, b: nnx.merge(g, s)(b, deterministic=True))(
        *nnx.split(model), ours
    )
    return dict(
        name=name,
        ckpt=ckpt,
        cfg=cfg,
        step=step,
        model=model,
        ref=ref,
        logits=np.asarray(logits),
        valid=valid,
        arrays=arrays,
        some=some,
        hf=hf_model,
    )


@pytest.mark.slow
def test_layout_really_has_zarr_chunks_and_inline_arrays(case):
    d = case["ckpt"]
    zarr_dirs = [p for p in d.iterdir() if p.is_dir()]
    assert zarr_dirs, "no zarr arrays written"
    assert any(len(list(p.glob("[0-9]*"))) > 1 for p in zarr_dirs)  # multi-chunk arrays
    assert len(zarr_dirs) < len(case["arrays"])  # the small ones are inline


def test_logits_match_hf(case):
    v = case["valid"]
    assert np.abs(case["logits"][v] - case["ref"][v]).max() <= TOL


def test_inferred_config_and_step(case):
    kind, kw, _, _ = CASES[case["name"]]
    cfg = case["cfg"]
    assert case["step"] == 1234
    if kind == "p2s":
        text, vision = kw
        assert (cfg.vocab_size, cfg.emb_dim, cfg.num_heads, cfg.head_dim, cfg.mlp_dim) == (
            text["vocab_size"],
            text["hidden_size"],
            text["num_heads"],
            text["d_kv"],
            text["d_ff"],
        )
        assert (cfg.num_encoder_layers, cfg.num_decoder_layers) == (
            vision["num_hidden_layers"],
            text["num_layers"],
        )
        assert cfg.max_position_embeddings == vision["seq_len"]
        assert cfg.patch_dim == vision["patch_embed_hidden_size"]
    else:
        assert (cfg.vocab_size, cfg.emb_dim, cfg.num_heads, cfg.head_dim, cfg.mlp_dim) == (
            kw["vocab_size"],
            kw["d_model"],
            kw["num_heads"],
            kw["d_kv"],
            kw["d_ff"],
        )
        assert cfg.logits_via_embedding == kw["tie_word_embeddings"]
        assert cfg.mlp_activations == (
            ("gelu", "linear") if kw["feed_forward_proj"] == "gated-gelu" else ("relu",)
        )


def test_optimizer_state_loads_on_request(case):
    step, states = t5x.load_optimizer_state(str(case["ckpt"]), case["model"])
    assert step == 1234
    ((key, slots),) = states.items()
    assert "/".join(t5x.t5x_path(key, pix2struct=CASES[case["name"]][0] == "p2s")) == case["some"]
    np.testing.assert_array_equal(slots["v_row"], np.full((3,), 0.5, np.float32))
    assert set(slots) == {"v_row", "m"}
