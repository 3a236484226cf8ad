"""Read and write HuggingFace checkpoints (`config.json` + safetensors or .bin) of every chartjax
family: T5 / Pix2Struct here, DeBERTa-v2/v3, TAPAS, BART and PaliGemma through their own name
maps (chartjax/interop/hf_{deberta,tapas,bart,paligemma}.py), chosen by `model_type` of
config.json.

Name maps: docs/models.md §3.3 (Pix2Struct) and §3.6 (T5). HF `Linear.weight` is `[out, in]`, so
every kernel is transposed, and the relative-position tables `[buckets, heads]` are transposed to
the T5X layout `[heads, buckets]`; embeddings, norms and biases are copied as they are.

Loading safetensors needs only `safetensors` (NumPy API, bf16 via ml_dtypes); `.bin` needs torch.
Neither transformers nor torch is imported otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Iterable

import numpy as np
from flax import nnx

from chartjax import file_modes
from chartjax.interop import hf_files
from chartjax.models import t5 as t5_lib
from chartjax.models.model_configs import Pix2StructConfig, T5Config
from chartjax.models.t5 import pix2struct as p2s_lib

Path = tuple[str | int, ...]

# --------------------------------------------------------------------------- name maps

_T5_ATTN = {"query": "q", "key": "k", "value": "v", "out": "o"}
_P2S_ATTN = {"query": "query", "key": "key", "value": "value", "out": "output"}


# chartjax-only T5 parameters: HF's T5 has no input for them. `box_embedding` (the OCR boxes'
# layer, models/t5/__init__.py) loads as its zero init from an HF checkpoint, with a warning, and a model
# that has it is refused by `save`: HF T5 would silently drop the boxes.
T5_ONLY = ("box_embedding",)


class NotInHF(ValueError):
    """A parameter that the HF layout of the family cannot hold."""


def _t5_name(path: Path) -> tuple[str, bool]:
    """chartjax T5 parameter path -> (HF name, transpose)."""
    p = list(path)
    if p[0] in T5_ONLY:
        raise NotInHF(
            f"{'.'.join(map(str, path))}: HF T5 has no input for OCR boxes (T5Config."
            "box_embedding), so this model cannot be written as an HF checkpoint; keep its "
            "chartjax checkpoint"
        )
    if p == ["token_embedder", "embedding"]:
        return "shared.weight", False
    stack = p[0]
    if p[1:] == ["relpos_bias", "rel_embedding"]:
        attn = "SelfAttention"
        return f"{stack}.block.0.layer.0.{attn}.relative_attention_bias.weight", True
    if p[1] == "encoder_norm" or p[1] == "decoder_norm":
        return f"{stack}.final_layer_norm.weight", False
    if p == ["decoder", "logits_dense", "kernel"]:
        return "lm_head.weight", True
    if p[1] == "layers":
        i, sub = p[2], p[3]
        pre = f"{stack}.block.{i}.layer"
        enc = stack == "encoder"
        norms = {
            "pre_attention_layer_norm": 0,
            "pre_self_attention_layer_norm": 0,
            "pre_cross_attention_layer_norm": 1,
            "pre_mlp_layer_norm": 1 if enc else 2,
        }
        if sub in norms:
            return f"{pre}.{norms[sub]}.layer_norm.weight", False
        if sub in ("attention", "self_attention"):
            return f"{pre}.0.SelfAttention.{_T5_ATTN[p[4]]}.weight", True
        if sub == "encoder_decoder_attention":
            return f"{pre}.1.EncDecAttention.{_T5_ATTN[p[4]]}.weight", True
        if sub == "mlp":
            return f"{pre}.{1 if enc else 2}.DenseReluDense.{p[4]}.weight", True
    raise KeyError(f"no HF name for T5 parameter {'.'.join(map(str, path))}")


def _p2s_name(path: Path) -> tuple[str, bool]:
    """chartjax Pix2Struct parameter path -> (HF name, transpose)."""
    p = list(path)
    if p[0] == "token_embedder":
        if p[1] == "patch_projection":
            kernel = p[2] == "kernel"
            return f"encoder.embeddings.patch_projection.{'weight' if kernel else 'bias'}", kernel
        table = {"embedders_0": "row_embedder", "embedders_1": "column_embedder"}[p[1]]
        return f"encoder.embeddings.{table}.weight", False
    if p == ["encoder", "encoder_norm", "scale"]:
        return "encoder.layernorm.weight", False
    if p[0] == "encoder" and p[1] == "layers":
        pre, sub = f"encoder.encoder.layer.{p[2]}", p[3]
        if sub.endswith("layer_norm"):
            return f"{pre}.{sub}.weight", False
        if sub == "attention":
            return f"{pre}.attention.{_P2S_ATTN[p[4]]}.weight", True
        if sub == "mlp":
            return f"{pre}.mlp.{p[4]}.weight", True
    if p[0] == "decoder":
        if p[1] == "token_embedder":
            return "decoder.embed_tokens.weight", False
        if p[1] == "relpos_bias":
            return "decoder.layer.0.self_attention.attention.relative_attention_bias.weight", True
        if p[1] == "decoder_norm":
            return "decoder.final_layer_norm.weight", False
        if p[1] == "logits_dense":
            return "decoder.lm_head.weight", True
        if p[1] == "layers":
            pre, sub = f"decoder.layer.{p[2]}", p[3]
            norms = {
                "pre_self_attention_layer_norm": "self_attention",
                "pre_cross_attention_layer_norm": "encoder_decoder_attention",
                "pre_mlp_layer_norm": "mlp",
            }
            if sub in norms:
                return f"{pre}.{norms[sub]}.layer_norm.weight", False
            if sub in ("self_attention", "encoder_decoder_attention"):
                return f"{pre}.{sub}.attention.{_P2S_ATTN[p[4]]}.weight", True
            if sub == "mlp":
                return f"{pre}.mlp.DenseReluDense.{p[4]}.weight", True
    raise KeyError(f"no HF name for Pix2Struct parameter {'.'.join(map(str, path))}")


def _name_fn(model):
    return _p2s_name if isinstance(model, p2s_lib.Pix2Struct) else _t5_name


def _flat_params(model) -> list[tuple[Path, nnx.Param]]:
    return [(tuple(k), v) for k, v in nnx.to_flat_state(nnx.state(model, nnx.Param))]


# --------------------------------------------------------------------------- configs

_HF_ACT = {"gelu": "gelu_new", "relu": "relu", "silu": "silu"}
_FROM_HF_ACT = {"gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "relu": "relu", "silu": "silu"}


def _t5_ffproj(acts: tuple[str, ...]) -> str:
    if len(acts) == 2 and acts[1] == "linear" and acts[0] in _HF_ACT:
        return f"gated-{acts[0]}"
    if len(acts) == 1 and acts[0] in _HF_ACT:
        return acts[0]
    raise ValueError(f"mlp_activations {acts} have no HF T5 feed_forward_proj")


def config_to_hf(cfg: T5Config | Pix2StructConfig) -> dict:
    """The HF `config.json` dict for a chartjax config."""
    common = {
        "pad_token_id": cfg.pad_id,
        "eos_token_id": cfg.eos_id,
        "decoder_start_token_id": cfg.decoder_start_token_id,
    }
    if isinstance(cfg, T5Config):
        return {
            "model_type": "t5",
            "architectures": ["T5ForConditionalGeneration"],
            "vocab_size": cfg.vocab_size,
            "d_model": cfg.emb_dim,
            "d_kv": cfg.head_dim,
            "d_ff": cfg.mlp_dim,
            "num_layers": cfg.num_encoder_layers,
            "num_decoder_layers": cfg.num_decoder_layers,
            "num_heads": cfg.num_heads,
            "relative_attention_num_buckets": cfg.relative_attention_num_buckets,
            "relative_attention_max_distance": cfg.relative_attention_max_distance,
            "dropout_rate": cfg.dropout_rate,
            "layer_norm_epsilon": cfg.layer_norm_eps,
            "feed_forward_proj": _t5_ffproj(cfg.mlp_activations),
            "tie_word_embeddings": cfg.logits_via_embedding,
            # HF 5's own field (HF 4 ignores it): the rescale apart from the tie.
            "scale_decoder_outputs": cfg.logits_via_embedding
            if cfg.scale_decoder_outputs is None
            else cfg.scale_decoder_outputs,
            "is_encoder_decoder": True,
            **common,
        }
    acts = cfg.mlp_activations
    if len(acts) != 2 or acts[1] != "linear" or acts[0] not in _HF_ACT:
        raise ValueError(f"HF Pix2Struct supports only gated MLPs, got {acts}")
    if cfg.logits_via_embedding:
        raise ValueError("HF Pix2Struct has untied logits only")
    if cfg.num_heads * cfg.head_dim != cfg.emb_dim:
        raise ValueError("HF Pix2Struct requires num_heads * head_dim == emb_dim")
    act = _HF_ACT[acts[0]]
    return {
        "model_type": "pix2struct",
        "architectures": ["Pix2StructForConditionalGeneration"],
        "is_vqa": False,
        "tie_word_embeddings": False,
        "is_encoder_decoder": True,
        "text_config": {
            "model_type": "pix2struct_text_model",
            "vocab_size": cfg.vocab_size,
            "hidden_size": cfg.emb_dim,
            "d_kv": cfg.head_dim,
            "d_ff": cfg.mlp_dim,
            "num_layers": cfg.num_decoder_layers,
            "num_heads": cfg.num_heads,
            "relative_attention_num_buckets": cfg.relative_attention_num_buckets,
            "relative_attention_max_distance": cfg.relative_attention_max_distance,
            "dropout_rate": cfg.dropout_rate,
            "layer_norm_epsilon": cfg.layer_norm_eps,
            "dense_act_fn": act,
            "tie_word_embeddings": False,
            **common,
        },
        "vision_config": {
            "model_type": "pix2struct_vision_model",
            "hidden_size": cfg.emb_dim,
            "patch_embed_hidden_size": cfg.patch_dim,
            "d_ff": cfg.mlp_dim,
            "d_kv": cfg.head_dim,
            "num_hidden_layers": cfg.num_encoder_layers,
            "num_attention_heads": cfg.num_heads,
            "dense_act_fn": act,
            "layer_norm_eps": cfg.layer_norm_eps,
            "dropout_rate": cfg.dropout_rate,
            "seq_len": cfg.max_position_embeddings,
        },
    }


# --------------------------------------------------------------------------- other families

# HF model_type -> the chartjax interop module of the family.
FAMILIES = {
    "deberta-v2": "hf_deberta",
    "tapas": "hf_tapas",
    "bart": "hf_bart",
    "paligemma": "hf_paligemma",
}


def _family(model_type: str):
    import importlib

    return importlib.import_module(f"chartjax.interop.{FAMILIES[model_type]}")


def _family_of_model(model) -> str | None:
    from chartjax.models import paligemma
    from chartjax.models.post_ln import bart, deberta, tapas

    for mt, cls in (
        ("deberta-v2", deberta.DebertaForSequenceClassification),
        ("tapas", tapas.TapasForSequenceClassification),
        ("bart", bart.Bart),
        ("paligemma", paligemma.PaliGemma),
    ):
        if isinstance(model, cls):
            return mt
    return None


def label_names(hf: dict) -> tuple[str, ...] | None:
    """A classifier's label names from config.json's `id2label` (in id order), or None."""
    id2label = hf.get("id2label")
    if not isinstance(id2label, dict) or not id2label:
        return None
    try:
        ids = sorted(int(k) for k in id2label)
    except (TypeError, ValueError):
        return None
    if ids != list(range(len(ids))):
        return None
    return tuple(str(id2label.get(str(i), id2label.get(i))) for i in ids)


def read_labels(path: str) -> tuple[str, ...] | None:
    """The `id2label` names of the HF checkpoint directory `path` (None if it has none)."""
    return label_names(hf_files.read_config(path)[0])


# Integer fields of config.json, checked before they are compared or reach the config dataclass
# (a "32" would fail there naming neither file nor field, or as "32 != 32").
_T5_INTS = (
    "vocab_size",
    "d_model",
    "d_kv",
    "d_ff",
    "num_layers",
    "num_decoder_layers",
    "num_heads",
    "relative_attention_num_buckets",
    "relative_attention_max_distance",
)
_P2S_TEXT_INTS = (
    "vocab_size",
    "hidden_size",
    "d_kv",
    "d_ff",
    "num_layers",
    "num_heads",
    "relative_attention_num_buckets",
    "relative_attention_max_distance",
)
_P2S_VISION_INTS = (
    "hidden_size",
    "patch_embed_hidden_size",
    "d_ff",
    "d_kv",
    "num_hidden_layers",
    "num_attention_heads",
    "seq_len",
)


def _t5_activation(hf: dict, where: str) -> tuple[str, bool]:
    """(chartjax activation, gated) of T5's `feed_forward_proj` ("<act>" or "gated-<act>"; HF
    reads "gated-gelu" as gelu_new)."""
    ff = hf.get("feed_forward_proj", "relu")
    if not isinstance(ff, str):
        raise ValueError(f"{where}: field feed_forward_proj must be a string, got {ff!r}")
    act = {"gated-gelu": "gelu_new"}.get(ff, ff.removeprefix("gated-"))
    if act not in _FROM_HF_ACT:
        raise hf_files.unknown_activation(
            act,
            where,
            "feed_forward_proj",
            [*_FROM_HF_ACT, *(f"gated-{a}" for a in _FROM_HF_ACT), "gated-gelu"],
        )
    return _FROM_HF_ACT[act], ff.startswith("gated-")


def _p2s_activation(t: dict, v: dict, where: str) -> str:
    act = t.get("dense_act_fn", "gelu_new")
    if act != v.get("dense_act_fn", "gelu_new"):
        raise ValueError(
            f"{where}: text_config.dense_act_fn={act!r} != vision_config.dense_act_fn="
            f"{v.get('dense_act_fn', 'gelu_new')!r}: chartjax needs them equal"
        )
    if act not in _FROM_HF_ACT:
        raise hf_files.unknown_activation(
            act, where, "text_config.dense_act_fn / vision_config.dense_act_fn", _FROM_HF_ACT
        )
    return _FROM_HF_ACT[act]


def _t5_head(hf: dict) -> dict:
    """T5Config's head fields from config.json alone.

    transformers 5 rescales the decoder output by d_model**-0.5 iff `scale_decoder_outputs`
    (absent: iff `tie_word_embeddings` is not False, HF 4's T5 1.0 / 1.1 switch) and ties the
    head to `shared` unless the weights store a different `lm_head.weight`, whatever the config
    says (it saves every T5 with `tie_word_embeddings` True). The config alone says tied as HF 4
    does; `head_from_weights` then settles it as HF 5 does."""
    tied = hf.get("tie_word_embeddings", True) is not False
    scaled = bool(hf.get("scale_decoder_outputs", tied))
    return _head(tied, scaled)


def _head(tied: bool, scaled: bool) -> dict:
    """T5Config's head fields; the rescale stays None where it follows the tie."""
    return {
        "logits_via_embedding": tied,
        "scale_decoder_outputs": None if scaled == tied else scaled,
    }


def head_from_weights(cfg, tensors: dict[str, np.ndarray]):
    """`cfg` with the T5 head tied as transformers 5 ties it given the stored tensors: untied
    iff `lm_head.weight` is stored and differs from the stored embedding, else tied (HF 5 ties a
    missing head to `shared`). Other configs pass unchanged."""
    if not isinstance(cfg, T5Config):
        return cfg
    emb = _lookup(tensors, "shared.weight")
    head = tensors.get("lm_head.weight")
    tied = head is None or (emb is not None and np.array_equal(head, tensors[emb]))
    if tied == cfg.logits_via_embedding:
        return cfg
    scaled = (
        cfg.logits_via_embedding if cfg.scale_decoder_outputs is None else cfg.scale_decoder_outputs
    )
    return dataclasses.replace(cfg, **_head(tied, scaled))


def read_config(path: str, *, dtype: str = "float32"):
    """The chartjax config of HF directory `path`: config.json, and for a T5 the two tensors
    that say whether its head is tied (`head_from_weights`)."""
    raw, cfg_file = hf_files.read_config(path)
    if raw.get("model_type") == "bart":  # generation_config.json's token rules win
        from chartjax.interop import hf_bart

        raw = hf_bart.with_generation_config(raw, path)
    cfg = config_from_hf(raw, dtype=dtype, where=cfg_file)
    if isinstance(cfg, T5Config):
        try:
            stored = hf_files.read_named(path, _HEAD_TENSORS)
        except FileNotFoundError:  # a config without weights: the config alone says
            return cfg
        cfg = head_from_weights(cfg, stored)
    return cfg


def config_from_hf(hf: dict, *, dtype: str = "float32", where: str = "config.json"):
    """chartjax config from an HF `config.json` dict; `where` names the file in errors."""
    mt = hf.get("model_type")
    if mt in FAMILIES:
        return _family(mt).config_from_hf(hf, dtype=dtype, where=where)
    try:
        if mt in ("t5", "mt5", "umt5"):
            hf_files.check_ints(hf, _T5_INTS, where)
            act, gated = _t5_activation(hf, where)
            return T5Config(
                vocab_size=hf["vocab_size"],
                emb_dim=hf["d_model"],
                num_heads=hf["num_heads"],
                head_dim=hf["d_kv"],
                mlp_dim=hf["d_ff"],
                num_encoder_layers=hf["num_layers"],
                num_decoder_layers=hf.get("num_decoder_layers") or hf["num_layers"],
                dropout_rate=hf.get("dropout_rate", 0.1),
                relative_attention_num_buckets=hf.get("relative_attention_num_buckets", 32),
                relative_attention_max_distance=hf.get("relative_attention_max_distance", 128),
                mlp_activations=(act, "linear") if gated else (act,),
                **_t5_head(hf),
                layer_norm_eps=hf.get("layer_norm_epsilon", 1e-6),
                dtype=dtype,
                pad_id=hf.get("pad_token_id", 0),
                eos_id=hf.get("eos_token_id", 1),
                decoder_start_token_id=hf.get("decoder_start_token_id", 0),
            )
        if mt == "pix2struct":
            t, v = hf["text_config"], hf["vision_config"]
            for name, sub in (("text_config", t), ("vision_config", v)):
                if not isinstance(sub, dict):
                    raise ValueError(f"{where}: field {name} must be an object, got {sub!r}")
            hf_files.check_ints(t, _P2S_TEXT_INTS, where, "text_config.")
            hf_files.check_ints(v, _P2S_VISION_INTS, where, "vision_config.")
            for tk, vk in (
                ("hidden_size", "hidden_size"),
                ("num_heads", "num_attention_heads"),
                ("d_ff", "d_ff"),
                ("d_kv", "d_kv"),
            ):
                if t.get(tk) != v.get(vk):
                    raise ValueError(
                        f"{where}: text_config.{tk}={t.get(tk)} != vision_config.{vk}="
                        f"{v.get(vk)}: chartjax needs them equal"
                    )
            act = _p2s_activation(t, v, where)
            pdim = v.get("patch_embed_hidden_size", 768)
            ps = int(round((pdim / 3) ** 0.5))
            if ps * ps * 3 != pdim:
                raise ValueError(
                    f"{where}: vision_config.patch_embed_hidden_size={pdim} is not p*p*3"
                )
            return Pix2StructConfig(
                vocab_size=t["vocab_size"],
                emb_dim=t["hidden_size"],
                num_heads=t["num_heads"],
                head_dim=t["d_kv"],
                mlp_dim=t["d_ff"],
                num_encoder_layers=v["num_hidden_layers"],
                num_decoder_layers=t["num_layers"],
                dropout_rate=t.get("dropout_rate", 0.1),
                relative_attention_num_buckets=t.get("relative_attention_num_buckets", 32),
                relative_attention_max_distance=t.get("relative_attention_max_distance", 128),
                mlp_activations=(act, "linear"),
                layer_norm_eps=t.get("layer_norm_epsilon", 1e-6),
                dtype=dtype,
                pad_id=t.get("pad_token_id", 0),
                eos_id=t.get("eos_token_id", 1),
                decoder_start_token_id=t.get("decoder_start_token_id", 0),
                patch_size=ps,
                max_position_embeddings=v.get("seq_len", 4096),
            )
    except KeyError as e:
        raise ValueError(f"{where}: missing field {e}") from None
    raise ValueError(
        f"{where}: unsupported model_type {mt!r} (expected t5, pix2struct, {', '.join(FAMILIES)})"
    )


# --------------------------------------------------------------------------- weights


def _read_tensors(path: str) -> dict[str, np.ndarray]:
    """All tensors of an HF directory (chartjax/interop/hf_files.py says which files)."""
    return hf_files.read_tensors(path)


# Stored names that may hold a chartjax tensor instead of its own name (tied copies).
_ALIASES = {
    "shared.weight": ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"),
    "lm_head.weight": ("shared.weight",),  # tied without rescale (HF v5 T5 v1.1 save)
    "decoder.lm_head.weight": ("decoder.embed_tokens.weight",),
}
_HEAD_TENSORS = ("lm_head.weight", "shared.weight", *_ALIASES["shared.weight"])
# Tensors HF saves as copies of one tensor (`_tied_weights_keys`): a stored one that no variable
# took counts as used when it equals one of its group that a variable took.
_TIED = (
    (
        "shared.weight",
        "encoder.embed_tokens.weight",
        "decoder.embed_tokens.weight",
        "lm_head.weight",
    ),
    ("decoder.embed_tokens.weight", "decoder.lm_head.weight"),
)
# In old T5 checkpoints; HF's T5 ignores it too (`_keys_to_ignore_on_load_unexpected`): T5's
# cross-attention has no relative position bias.
_IGNORE = ("decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight",)


def _lookup(tensors: dict[str, np.ndarray], name: str) -> str | None:
    for n in (name, *_ALIASES.get(name, ())):
        if n in tensors:
            return n
    return None


def _unused(tensors: dict[str, np.ndarray], used: set[str]) -> dict[str, tuple]:
    """The stored tensors no variable took, tied copies of taken ones and _IGNORE aside."""
    out = {}
    for k, v in tensors.items():
        if k in used or k in _IGNORE:
            continue
        tied = {n for group in _TIED if k in group for n in group} & used
        if not any(np.array_equal(v, tensors[n]) for n in tied):
            out[k] = np.shape(v)
    return out


def load_params(
    model, tensors: dict[str, np.ndarray], *, where: str = "checkpoint", seed: int = 0
) -> None:
    """Copy HF tensors into `model` in place (float32), checking every shape and that every
    tensor is taken (a config.json with fewer layers than the weights is refused, listing the
    tensors left over).

    `model` may be abstract (`nnx.eval_shape`): its RNG streams are then filled from `seed`, so
    loading never runs the random initializers.
    """
    import jax
    import jax.numpy as jnp

    name_of = _name_fn(model)
    state = nnx.state(model)
    flat = nnx.to_flat_state(state)
    used: set[str] = set()
    missing: dict[str, tuple] = {}
    shapes: list[tuple[str, tuple, tuple]] = []
    for n, (path, var) in enumerate(flat):
        if isinstance(var, nnx.Param) and _chartjax_only(model, path):
            if isinstance(var.get_value(), jax.ShapeDtypeStruct):
                var.set_value(jnp.zeros(var.shape, jnp.float32))  # its initializer (t5.py)
            warnings.warn(
                f"{where}: the HF checkpoint has no {'.'.join(map(str, path))} (chartjax's OCR "
                "box layer): initialised to zeros, so the model starts as the checkpoint",
                stacklevel=2,
            )
        elif isinstance(var, nnx.Param):
            name, transpose = name_of(tuple(path))
            stored = _lookup(tensors, name)
            hf_shape = tuple(var.shape)[:: -1 if transpose else 1]
            if stored is None:
                missing[name] = hf_shape
                continue
            used.add(stored)
            arr = np.asarray(tensors[stored], dtype=np.float32)
            if transpose:
                arr = arr.T
            if arr.shape != var.shape:
                shapes.append((stored, np.shape(tensors[stored]), hf_shape))
                continue
            var.set_value(jnp.asarray(arr))
        elif isinstance(var, nnx.RngKey) and isinstance(var.get_value(), jax.ShapeDtypeStruct):
            var.set_value(jax.random.fold_in(jax.random.key(seed), n))
        elif isinstance(var, nnx.RngCount) and isinstance(var.get_value(), jax.ShapeDtypeStruct):
            var.set_value(jnp.zeros(var.shape, jnp.uint32))
    hf_files.refuse_mismatch(
        where,
        type(model).__name__,
        unused=_unused(tensors, used),
        missing=missing,
        shapes=shapes,
    )
    nnx.update(model, nnx.from_flat_state(flat))


def _chartjax_only(model, path) -> bool:
    return isinstance(model, t5_lib.T5Transformer) and path[0] in T5_ONLY


def load(path: str, *, dtype: str = "float32", seed: int = 0, box_embedding: bool = False):
    """Load an HF checkpoint directory -> (chartjax model, config).

    `box_embedding`: a T5 with the OCR box layer (T5Config.box_embedding), which no HF
    checkpoint has: it starts at zero (a warning says so), the rest is the checkpoint's."""
    raw, cfg_file = hf_files.read_config(path)
    if raw.get("model_type") in FAMILIES:
        if box_embedding:
            raise ValueError(f"{cfg_file}: box_embedding is a T5 option, not {raw['model_type']}")
        return _family(raw["model_type"]).load(path, dtype=dtype, seed=seed)
    tensors = _read_tensors(path)
    cfg = head_from_weights(config_from_hf(raw, dtype=dtype, where=cfg_file), tensors)
    if box_embedding:
        if not isinstance(cfg, T5Config):
            raise ValueError(f"{cfg_file}: box_embedding is a T5 option, not pix2struct")
        cfg = dataclasses.replace(cfg, box_embedding=True)
    build = p2s_lib.build if isinstance(cfg, Pix2StructConfig) else t5_lib.build
    model = nnx.eval_shape(lambda: build(cfg, seed))
    load_params(model, tensors, where=path, seed=seed)
    return model, cfg


def to_hf_tensors(model) -> dict[str, np.ndarray]:
    """HF-named float32 tensors of a chartjax model (contiguous, as safetensors needs)."""
    name_of = _name_fn(model)
    out = {}
    for path, var in _flat_params(model):
        name, transpose = name_of(path)
        arr = np.asarray(var[...], dtype=np.float32)
        out[name] = np.ascontiguousarray(arr.T if transpose else arr)
    return out


def save(model, path: str, *, safe_serialization: bool = True, labels=None) -> None:
    """Write `config.json` + `model.safetensors` (or `pytorch_model.bin`, needs torch).

    `labels`: a classifier's label names, written as `id2label` / `label2id` (else
    `LABEL_<i>`). BART also gets the generation_config.json of its forced BOS/EOS rules,
    PaliGemma that of its BOS / EOS / PAD ids (hf_paligemma.save)."""
    mt = _family_of_model(model)
    if mt == "paligemma":
        _family(mt).save(model, path, safe_serialization=safe_serialization)
        return
    if mt is not None:
        from chartjax.interop import hf_name_map

        fam = _family(mt)
        config = fam.config_to_hf(model.cfg)
        if labels is not None and "id2label" in config:
            if len(labels) != len(config["id2label"]):
                raise ValueError(f"{len(labels)} label names for {len(config['id2label'])} labels")
            config["id2label"] = {str(i): str(n) for i, n in enumerate(labels)}
            config["label2id"] = {str(n): i for i, n in enumerate(labels)}
        extra = {"generation_config.json": fam.generation_config(model.cfg)} if mt == "bart" else {}
        hf_name_map.write_dir(
            path,
            config,
            fam.to_hf_state_dict(model),
            json_files=extra,
            safe_serialization=safe_serialization,
        )
        return
    tensors = to_hf_tensors(model)  # first: a model HF cannot hold leaves no folder behind
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config_to_hf(model.cfg), f, indent=2)
    if safe_serialization:
        from safetensors.numpy import save_file

        save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
        file_modes.as_new_file(os.path.join(path, "model.safetensors"))  # written 0600
    else:
        import torch

        torch.save(
            {k: torch.from_numpy(v.copy()) for k, v in tensors.items()},
            os.path.join(path, "pytorch_model.bin"),
        )


def hf_names(model) -> Iterable[str]:
    """The HF tensor names `save` writes for `model` (for tests and tooling)."""
    mt = _family_of_model(model)
    if mt is not None:
        return iter(_family(mt).to_hf_state_dict(model))
    return (_name_fn(model)(p)[0] for p, _ in _flat_params(model))
