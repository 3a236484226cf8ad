"""HuggingFace `PaliGemmaForConditionalGeneration` folders <-> chartjax (PaliGemma 1 with a Gemma
text config, PaliGemma 2 with Gemma 2; ChartGemma is a PaliGemma 1; docs/models.md §8).

Tensor names: transformers 5 writes `language_model.model.*`, `vision_tower.*` and
`multi_modal_projector.*`; the Hub checkpoints saved by transformers 4 carry
`vision_tower.vision_model.*`, and transformers 4.52+ in memory `model.language_model.*`,
`model.vision_tower.*`, `lm_head.*`. Every spelling is renamed to the first (`canonical_names`)
before the name map (hf_name_map's machinery: every tensor taken or the load refused naming it).
`lm_head.weight` is a tied copy of the embedding (taken when equal, refused otherwise); the
SigLIP pooling head (`vision_tower.head.*`, present when `vision_config.vision_use_head` is true)
is skipped, as HF's PaliGemma never reads it. The patch convolution's `[width, C, p, p]` weight
becomes siglip.py's `[p*p*C, width]` patch kernel.

Writing (`save`, through `hf.save` and `chartjax-convert --to hf`): transformers 5's names, no
`lm_head` (tied, as HF saves it), a config.json that states every field the model depends on (so
HF's defaults never decide) and generation_config.json with the model's BOS / EOS / PAD ids.
chartjax's training-only fields (residual dropout, z-loss, dtype, attention kernel, remat) have
no place there and are not written; the processor files are the caller's (tokenizer_export).
"""

from __future__ import annotations

import re

import numpy as np
from flax import nnx

from chartjax.interop.hf_files import check_ints
from chartjax.interop.hf_name_map import (
    Path,
    leaf,
    load_state_dict,
    read_config,
    read_tensors,
    to_state_dict,
    write_dir,
)
from chartjax.models import paligemma as pg
from chartjax.models.paligemma.gemma import FULL, SLIDING

_RENAMES = (
    (r"^model\.language_model\.", "language_model.model."),
    (r"^lm_head\.", "language_model.lm_head."),
    (r"^model\.vision_tower\.", "vision_tower."),
    (r"^model\.multi_modal_projector\.", "multi_modal_projector."),
    (r"^vision_tower\.vision_model\.", "vision_tower."),
)
_PATCH = "vision_tower.embeddings.patch_embedding.weight"
_EMBED = "language_model.model.embed_tokens.weight"
_HEAD = "language_model.lm_head.weight"
_VISION_HEAD = r"vision_tower\.head\..*"

_V_ATTN = {"query": "q_proj", "key": "k_proj", "value": "v_proj", "out": "out_proj"}
_T_ATTN = {"query": "q_proj", "key": "k_proj", "value": "v_proj", "out": "o_proj"}
_V_NORM = {"pre_attention_norm": "layer_norm1", "pre_mlp_norm": "layer_norm2"}
_T_MLP = {"wi_0": "gate_proj", "wi_1": "up_proj", "wo": "down_proj"}
_ACTS = ("gelu_pytorch_tanh", "gelu")  # HF reads Gemma's legacy "gelu" as the tanh form too


def _text_norms(version: int) -> dict[str, str]:
    if version == 1:
        return {"pre_attention_norm": "input_layernorm", "pre_mlp_norm": "post_attention_layernorm"}
    return {
        "pre_attention_norm": "input_layernorm",
        "post_attention_norm": "post_attention_layernorm",
        "pre_mlp_norm": "pre_feedforward_layernorm",
        "post_mlp_norm": "post_feedforward_layernorm",
    }


def name_fn(version: int):
    """chartjax PaliGemma variable path -> (canonical HF name, hf_name_map kind)."""
    norms = _text_norms(version)

    def name_of(path: Path) -> tuple[str, str]:
        p = path
        try:
            if p[0] == "vision_tower":
                pre = "vision_tower"
                if p[1] == "patch_embedding":
                    return f"{pre}.embeddings.patch_embedding.{p[2].replace('kernel', 'weight')}", (
                        "copy"  # the weight is reshaped to the kernel before the map
                    )
                if p[1] == "position_embedding":
                    return f"{pre}.embeddings.position_embedding.weight", "copy"
                if p[1] == "post_norm":
                    return leaf(f"{pre}.post_layernorm", p[2])
                if p[1] == "layers":
                    lp, sub = f"{pre}.encoder.layers.{p[2]}", p[3]
                    if sub in _V_NORM:
                        return leaf(f"{lp}.{_V_NORM[sub]}", p[4])
                    if sub == "attention":
                        return leaf(f"{lp}.self_attn.{_V_ATTN[p[4]]}", p[5])
                    if sub == "mlp":
                        return leaf(f"{lp}.mlp.{ {'wi': 'fc1', 'wo': 'fc2'}[p[4]] }", p[5])
            if p[0] == "multi_modal_projector":
                return leaf("multi_modal_projector.linear", p[1])
            if p[0] == "decoder":
                pre = "language_model.model"
                if p[1] == "embedder":
                    return _EMBED, "copy"
                if p[1] == "final_norm":
                    return f"{pre}.norm.weight", "copy"
                if p[1] == "layers":
                    lp, sub = f"{pre}.layers.{p[2]}", p[3]
                    if sub in norms:
                        return f"{lp}.{norms[sub]}.weight", "copy"
                    if sub == "attention":
                        return leaf(f"{lp}.self_attn.{_T_ATTN[p[4]]}", p[5])
                    if sub == "mlp":
                        return leaf(f"{lp}.mlp.{_T_MLP[p[4]]}", p[5])
        except (KeyError, IndexError):
            pass
        raise KeyError(f"no HF name for PaliGemma variable {'.'.join(map(str, path))}")

    return name_of


def canonical_names(tensors: dict[str, np.ndarray], where: str) -> dict[str, np.ndarray]:
    """The tensors under transformers 5's saved names (see the module docstring); two stored
    tensors that rename to one name are refused unless equal."""
    out: dict[str, np.ndarray] = {}
    origin: dict[str, str] = {}
    for name, arr in tensors.items():
        new = name
        for pat, rep in _RENAMES:
            new = re.sub(pat, rep, new)
        if new in out and not np.array_equal(out[new], arr):
            raise ValueError(f"{where}: tensors {origin[new]} and {name} both name {new}")
        out[new], origin[new] = arr, name
    return out


def _refuse(where: str, field: str, value, why: str):
    raise ValueError(f"{where}: {field}={value!r} is not supported ({why})")


def config_from_hf(hf: dict, *, dtype: str = "float32", where: str = "config.json"):
    """PaliGemmaConfig of a `paligemma` config.json (text_config gemma or gemma2)."""
    t, v = hf.get("text_config"), hf.get("vision_config")
    for name, sub in (("text_config", t), ("vision_config", v)):
        if not isinstance(sub, dict):
            raise ValueError(f"{where}: field {name} must be an object, got {sub!r}")
    tt = t.get("model_type", "gemma")
    if tt not in ("gemma", "gemma2"):
        _refuse(where, "text_config.model_type", tt, "PaliGemma's decoders are gemma and gemma2")
    if v.get("model_type", "siglip_vision_model") != "siglip_vision_model":
        _refuse(where, "vision_config.model_type", v.get("model_type"), "SigLIP only")
    tints = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers")
    tints += ("num_attention_heads", "num_key_value_heads", "head_dim", "sliding_window")
    check_ints(t, tints, where, "text_config.")
    vints = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
    check_ints(v, (*vints, "image_size", "patch_size", "num_channels"), where, "vision_config.")
    act = t.get("hidden_activation") or t.get("hidden_act") or "gelu_pytorch_tanh"
    if act not in _ACTS:
        _refuse(where, "text_config.hidden_activation", act, f"Gemma's GeGLU is {_ACTS[0]}")
    if v.get("hidden_act", "gelu_pytorch_tanh") != "gelu_pytorch_tanh":
        _refuse(where, "vision_config.hidden_act", v["hidden_act"], "SigLIP's is gelu_pytorch_tanh")
    if t.get("attention_bias"):
        _refuse(where, "text_config.attention_bias", True, "Gemma's projections have no bias")
    if t.get("attention_dropout"):
        _refuse(where, "text_config.attention_dropout", t["attention_dropout"], "not implemented")
    rope = t.get("rope_parameters") or t.get("rope_scaling") or {}
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        _refuse(where, "text_config.rope_parameters", rope, "only the default RoPE")
    if hf.get("tie_word_embeddings", True) is False:
        _refuse(where, "tie_word_embeddings", False, "PaliGemma's output is the embedding")
    if hf.get("projection_dim", t["hidden_size"]) != t["hidden_size"]:
        _refuse(where, "projection_dim", hf["projection_dim"], "must equal the decoder width")
    version = 2 if tt == "gemma2" else 1
    n = t["num_hidden_layers"]
    gemma2 = {}
    if version == 2:
        types = t.get("layer_types") or [SLIDING if i % 2 == 0 else FULL for i in range(n)]
        gemma2 = {
            "query_pre_attn_scalar": t.get("query_pre_attn_scalar", 256),
            "attn_logit_softcap": t.get("attn_logit_softcapping", 50.0),
            "final_logit_softcap": t.get("final_logit_softcapping", 30.0),
            "sliding_window": t.get("sliding_window", 4096) if SLIDING in types else None,
            "layer_types": tuple(types),
        }
    image_token = hf.get("image_token_index", hf.get("image_token_id", 256000))
    try:
        return pg.PaliGemmaConfig(
            vocab_size=t["vocab_size"],
            emb_dim=t["hidden_size"],
            num_heads=t["num_attention_heads"],
            num_kv_heads=t.get("num_key_value_heads", t["num_attention_heads"]),
            head_dim=t.get("head_dim") or t["hidden_size"] // t["num_attention_heads"],
            mlp_dim=t["intermediate_size"],
            num_layers=n,
            version=version,
            **gemma2,
            rope_theta=float(rope.get("rope_theta", t.get("rope_theta", 10000.0))),
            rms_norm_eps=t.get("rms_norm_eps", 1e-6),
            vision_emb_dim=v["hidden_size"],
            vision_num_heads=v["num_attention_heads"],
            vision_mlp_dim=v["intermediate_size"],
            vision_num_layers=v["num_hidden_layers"],
            image_size=v.get("image_size", 224),
            patch_size=v.get("patch_size", 14),
            num_channels=v.get("num_channels", 3),
            vision_layer_norm_eps=v.get("layer_norm_eps", 1e-6),
            image_token_id=image_token,
            pad_id=t.get("pad_token_id", 0),
            eos_id=t.get("eos_token_id", 1),
            bos_id=t.get("bos_token_id", 2),
            dtype=dtype,
        )
    except KeyError as e:
        raise ValueError(f"{where}: missing field {e}") from None
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None


def load_params(model: pg.PaliGemma, tensors, *, vision_head: bool, where: str, seed: int = 0):
    """Copy the HF tensors (any of the spellings above) into `model` in place."""
    tensors = canonical_names(dict(tensors), where)
    head = tensors.get(_HEAD)
    if head is not None and _EMBED in tensors and np.array_equal(head, tensors[_EMBED]):
        del tensors[_HEAD]  # the tied copy; an lm_head that differs stays and is refused
    w = tensors.get(_PATCH)
    if w is not None and np.ndim(w) == 4:  # [width, C, p, p] -> [p*p*C, width] (siglip.py)
        tensors[_PATCH] = np.transpose(np.asarray(w), (2, 3, 1, 0)).reshape(-1, w.shape[0])
    load_state_dict(
        model,
        tensors,
        name_fn(model.cfg.version),
        ignore=(_VISION_HEAD,) if vision_head else (),
        where=where,
        seed=seed,
    )


def load(path: str, *, dtype: str = "float32", seed: int = 0):
    """HF PaliGemma directory -> (chartjax model, config)."""
    hf, cfg_file = read_config(path)
    cfg = config_from_hf(hf, dtype=dtype, where=cfg_file)
    model = nnx.eval_shape(lambda: pg.build(cfg, seed))
    vision_head = bool(hf["vision_config"].get("vision_use_head", True))
    load_params(model, read_tensors(path), vision_head=vision_head, where=path, seed=seed)
    return model, cfg


# ------------------------------------------------------------------------ writing ------------


def config_to_hf(cfg: pg.PaliGemmaConfig) -> dict:
    """The config.json of `cfg` (transformers 5's fields; `config_from_hf` reads it back)."""
    text = {
        "model_type": "gemma" if cfg.version == 1 else "gemma2",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.emb_dim,
        "intermediate_size": cfg.mlp_dim,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_activation": _ACTS[0],
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_theta},
        "attention_bias": False,
        "attention_dropout": 0.0,
        "pad_token_id": cfg.pad_id,
        "eos_token_id": cfg.eos_id,
        "bos_token_id": cfg.bos_id,
        "tie_word_embeddings": True,
    }
    if cfg.version == 2:
        t = cfg.text
        text.update(
            query_pre_attn_scalar=cfg.query_pre_attn_scalar or cfg.head_dim,
            attn_logit_softcapping=cfg.attn_logit_softcap,
            final_logit_softcapping=cfg.final_logit_softcap,
            sliding_window=cfg.sliding_window or 4096,  # unused when no layer slides
            layer_types=list(t.layer_types or [FULL] * cfg.num_layers),
        )
    vision = {
        "model_type": "siglip_vision_model",
        "hidden_size": cfg.vision_emb_dim,
        "intermediate_size": cfg.vision_mlp_dim,
        "num_hidden_layers": cfg.vision_num_layers,
        "num_attention_heads": cfg.vision_num_heads,
        "image_size": cfg.image_size,
        "patch_size": cfg.patch_size,
        "num_channels": cfg.num_channels,
        "layer_norm_eps": cfg.vision_layer_norm_eps,
        "hidden_act": "gelu_pytorch_tanh",
        "attention_dropout": 0.0,
        "vision_use_head": False,
    }
    return {
        "architectures": ["PaliGemmaForConditionalGeneration"],
        "model_type": "paligemma",
        "text_config": text,
        "vision_config": vision,
        "image_token_index": cfg.image_token_id,
        "projection_dim": cfg.emb_dim,
        "hidden_size": cfg.emb_dim,
        "vocab_size": cfg.vocab_size,
        "tie_word_embeddings": True,
    }


def generation_config(cfg: pg.PaliGemmaConfig) -> dict:
    return {"bos_token_id": cfg.bos_id, "eos_token_id": cfg.eos_id, "pad_token_id": cfg.pad_id}


def to_hf_state_dict(model: pg.PaliGemma) -> dict[str, np.ndarray]:
    """HF-named float32 tensors (transformers 5's names; the patch kernel back to the
    convolution's `[width, C, p, p]`)."""
    out = to_state_dict(model, name_fn(model.cfg.version))
    c, p = model.cfg.num_channels, model.cfg.patch_size
    kernel = out[_PATCH]
    out[_PATCH] = np.ascontiguousarray(kernel.reshape(p, p, c, -1).transpose(3, 2, 0, 1))
    return out


def save(model: pg.PaliGemma, path: str, *, safe_serialization: bool = True) -> None:
    """config.json, generation_config.json and the weights, as HF's `from_pretrained` reads."""
    write_dir(
        path,
        config_to_hf(model.cfg),
        to_hf_state_dict(model),
        json_files={"generation_config.json": generation_config(model.cfg)},
        safe_serialization=safe_serialization,
    )
