"""HuggingFace BART (`BartForConditionalGeneration`) <-> chartjax, both ways.

The one chartjax `token_embedder` is HF's tied `model.shared`, `model.{encoder,decoder}.
embed_tokens` and `lm_head` (any one of them may be the stored copy; all four are written);
`final_logits_bias [1, vocab]` is a buffer (`bart.Buffer`). Linear weights are transposed. The
machinery is hf_name_map's.
"""

from __future__ import annotations

import json
import os

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
from chartjax.models.post_ln import bart as bart_lib

_SHARED = "model.shared.weight"
ALIASES = {
    _SHARED: (
        "model.encoder.embed_tokens.weight",
        "model.decoder.embed_tokens.weight",
        "lm_head.weight",
    )
}
_ATTN = {"query": "q_proj", "key": "k_proj", "value": "v_proj", "out": "out_proj"}
_ENC = {
    "attention": "self_attn",
    "attention_norm": "self_attn_layer_norm",
    "mlp_norm": "final_layer_norm",
}
_DEC = {
    "self_attention": "self_attn",
    "self_attention_norm": "self_attn_layer_norm",
    "cross_attention": "encoder_attn",
    "cross_attention_norm": "encoder_attn_layer_norm",
    "mlp_norm": "final_layer_norm",
}
_MLP = {"wi": "fc1", "wo": "fc2"}
# fairseq-converted files carry these version markers.
_IGNORE = (r"(model\.)?(encoder|decoder)\.version",)


def bart_name(path: Path) -> tuple[str, str]:
    """chartjax BART variable path -> (HF name, kind)."""
    p = path
    try:
        if p == ("token_embedder", "embedding"):
            return _SHARED, "copy"
        if p == ("final_logits_bias",):
            return "final_logits_bias", "row"
        stack = p[0]
        if stack in ("encoder", "decoder"):
            pre = f"model.{stack}"
            if p[1] == "positions":
                return f"{pre}.embed_positions.weight", "copy"
            if p[1] == "embed_norm":
                return leaf(f"{pre}.layernorm_embedding", p[2])
            if p[1] == "layers":
                lp, sub = f"{pre}.layers.{p[2]}", p[3]
                names = _ENC if stack == "encoder" else _DEC
                if sub == "mlp":
                    return leaf(f"{lp}.{_MLP[p[4]]}", p[5])
                if sub.endswith("_norm"):
                    return leaf(f"{lp}.{names[sub]}", p[4])
                return leaf(f"{lp}.{names[sub]}.{_ATTN[p[4]]}", p[5])
    except (KeyError, IndexError):
        pass
    raise KeyError(f"no HF name for BART variable {'.'.join(map(str, path))}")


# Integer fields of a BART config.json, checked before the config dataclass (which would not
# name the file).
INT_FIELDS = (
    "vocab_size",
    "d_model",
    "encoder_layers",
    "decoder_layers",
    "encoder_attention_heads",
    "decoder_attention_heads",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
    "max_position_embeddings",
)


def config_from_hf(hf: dict, *, dtype: str = "float32", where: str = "config.json"):
    check_ints(hf, INT_FIELDS, where)
    return bart_lib.BartConfig.from_hf_config(hf, dtype=dtype, where=where)


def config_to_hf(cfg: bart_lib.BartConfig) -> dict:
    return cfg.to_hf_config()


def load_params(model, tensors, *, where: str = "checkpoint", seed: int = 0) -> None:
    tensors = dict(tensors)
    # HF marks final_logits_bias as allowed-missing (zeros); some files omit it.
    if "final_logits_bias" not in tensors:
        tensors["final_logits_bias"] = np.zeros((1, model.cfg.vocab_size), np.float32)
    load_state_dict(
        model, tensors, bart_name, aliases=ALIASES, ignore=_IGNORE, where=where, seed=seed
    )


def to_hf_state_dict(model) -> dict[str, np.ndarray]:
    return to_state_dict(model, bart_name, aliases=ALIASES)


# generation_config.json settings that HF `generate` takes over config.json's.
_GENERATION_FIELDS = (
    "decoder_start_token_id",
    "eos_token_id",
    "forced_bos_token_id",
    "forced_eos_token_id",
)


def with_generation_config(hf: dict, path: str) -> dict:
    """config.json's dict with the token ids and forced BOS/EOS rules of the directory's
    `generation_config.json`, when present (they win, as in HF `generate`)."""
    gen_file = os.path.join(path, "generation_config.json")
    if os.path.exists(gen_file):
        with open(gen_file) as f:
            try:
                gen = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{gen_file}: invalid JSON ({e})") from None
        if not isinstance(gen, dict):
            raise ValueError(f"{gen_file}: expected a JSON object, got {type(gen).__name__}")
        hf = {**hf, **{k: gen[k] for k in _GENERATION_FIELDS if k in gen}}
    return hf


def load(path: str, *, dtype: str = "float32", seed: int = 0):
    """HF BART directory -> (chartjax model, config). The token ids and forced BOS/EOS rules of
    `generation_config.json`, when present, win over config.json's (as in HF `generate`)."""
    hf, cfg_file = read_config(path)
    hf = with_generation_config(hf, path)
    cfg = config_from_hf(hf, dtype=dtype, where=cfg_file)
    model = nnx.eval_shape(lambda: bart_lib.build(cfg, seed))
    load_params(model, read_tensors(path), where=path, seed=seed)
    return model, cfg


def generation_config(cfg: bart_lib.BartConfig) -> dict:
    """The generation_config.json that makes HF `generate` follow the same token rules."""
    return {
        "bos_token_id": cfg.bos_id,
        "pad_token_id": cfg.pad_id,
        "eos_token_id": cfg.eos_id,
        "decoder_start_token_id": cfg.decoder_start_token_id,
        "forced_bos_token_id": cfg.forced_bos_token_id,
        "forced_eos_token_id": cfg.forced_eos_token_id,
    }


def save(model, path: str) -> None:
    """`config.json`, `generation_config.json` and `model.safetensors`."""
    write_dir(
        path,
        config_to_hf(model.cfg),
        to_hf_state_dict(model),
        json_files={"generation_config.json": generation_config(model.cfg)},
    )
