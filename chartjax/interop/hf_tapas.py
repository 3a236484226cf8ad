"""HuggingFace TAPAS (`TapasForSequenceClassification`) <-> chartjax, both ways.

The name-map machinery it shares with `hf_deberta.py` and `hf_bart.py` is `hf_name_map.py`.
"""

from __future__ import annotations

import numpy as np
from flax import nnx

from chartjax.interop import hf_files
from chartjax.interop.hf_name_map import (
    Path,
    bert_layer_name,
    leaf,
    load_state_dict,
    path_str,
    read_config,
    read_tensors,
    to_state_dict,
    write_dir,
)
from chartjax.models.post_ln import tapas as tapas_lib

# --------------------------------------------------------------------------- TAPAS

_TAPAS_ATTN = {
    "query": "attention.self.query",
    "key": "attention.self.key",
    "value": "attention.self.value",
    "out": "attention.output.dense",
}


def tapas_name(path: Path) -> tuple[str, str]:
    """chartjax TAPAS variable path -> (HF name, kind)."""
    p = path
    try:
        if p[0] == "embeddings":
            if p[1] == "token_type_embeddings":
                return f"tapas.embeddings.token_type_embeddings_{p[2]}.weight", "copy"
            if p[1] == "layer_norm":
                return leaf("tapas.embeddings.LayerNorm", p[2])
            return leaf(f"tapas.embeddings.{p[1]}", p[2])
        if p[0] == "layers":
            return bert_layer_name(f"tapas.encoder.layer.{p[1]}", p[2:], _TAPAS_ATTN)
        if p[0] == "pooler":
            return leaf("tapas.pooler.dense", p[2])
        if p[0] == "classifier":
            return leaf("classifier", p[1])
    except KeyError:
        pass
    raise KeyError(f"no HF name for TAPAS variable {path_str(path)}")


# Integer fields of a TAPAS config.json, checked before they reach a comparison or the config
# dataclass (neither would name the file).
INT_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_sizes",
)


def config_from_hf(hf: dict, *, dtype: str = "float32", where: str = "config.json"):
    hf_files.check_ints(hf, INT_FIELDS, where)
    return tapas_lib.TapasConfig.from_hf_config(hf, dtype=dtype, where=where)


def config_to_hf(cfg: tapas_lib.TapasConfig) -> dict:
    return cfg.to_hf_config()


# A new classification head may be absent from a base checkpoint; its pretraining and QA heads
# are then dropped.
_TAPAS_HEAD = (r"tapas\.pooler\..*", r"classifier\..*")
_TAPAS_OTHER_HEADS = (
    r"cls\..*",
    r"(column_)?output_(weights|bias)",
    r"aggregation_classifier\..*",
)


def load_params(
    model, tensors, *, where: str = "checkpoint", seed: int = 0, new_head: bool = False
) -> None:
    load_state_dict(
        model,
        tensors,
        tapas_name,
        ignore=_TAPAS_OTHER_HEADS if new_head else (),
        allow_missing=_TAPAS_HEAD if new_head else (),
        where=where,
        seed=seed,
    )


def to_hf_state_dict(model) -> dict[str, np.ndarray]:
    return to_state_dict(model, tapas_name)


def load(path: str, *, dtype: str = "float32", seed: int = 0, new_head: bool = False):
    """HF TAPAS directory -> (chartjax model, config). `new_head`: the pooler/classifier may be
    missing (they keep their random init from `seed`) and other heads are dropped."""
    hf, cfg_file = read_config(path)
    cfg = config_from_hf(hf, dtype=dtype, where=cfg_file)
    if new_head:
        model = tapas_lib.build(cfg, seed)
    else:
        model = nnx.eval_shape(lambda: tapas_lib.build(cfg, seed))
    load_params(model, read_tensors(path), where=path, seed=seed, new_head=new_head)
    return model, cfg


def save(model, path: str) -> None:
    write_dir(path, config_to_hf(model.cfg), to_hf_state_dict(model))
