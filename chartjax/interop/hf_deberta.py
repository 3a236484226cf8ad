"""HuggingFace DeBERTa v2/v3 (`DebertaV2ForSequenceClassification`) <-> chartjax, both ways.

Names as HF's `state_dict` (`deberta.embeddings.*`, `deberta.encoder.layer.{i}.*`,
`deberta.encoder.rel_embeddings`, `deberta.encoder.LayerNorm` (relative-embedding norm),
`deberta.encoder.conv.*`, `pooler.dense`, `classifier`); Linear weights are transposed, the
Conv1d kernel `[out, in/groups, k]` becomes `[k, in/groups, out]`. The machinery is hf_name_map's.
"""

from __future__ import annotations

import numpy as np
from flax import nnx

from chartjax.interop.hf_files import check_ints
from chartjax.interop.hf_name_map import (
    Path,
    bert_layer_name,
    leaf,
    load_state_dict,
    read_config,
    read_tensors,
    to_state_dict,
    write_dir,
)
from chartjax.models.post_ln import deberta as deberta_lib

_ATTN = {
    "query_proj": "attention.self.query_proj",
    "key_proj": "attention.self.key_proj",
    "value_proj": "attention.self.value_proj",
    "pos_key_proj": "attention.self.pos_key_proj",
    "pos_query_proj": "attention.self.pos_query_proj",
}
_EMB = {
    "word_embeddings": "word_embeddings",
    "position_embeddings": "position_embeddings",
    "token_type_embeddings": "token_type_embeddings",
    "embed_proj": "embed_proj",
    "layer_norm": "LayerNorm",
}


def deberta_name(path: Path) -> tuple[str, str]:
    """chartjax DeBERTa variable path -> (HF name, kind)."""
    p = path
    try:
        if p[0] == "embeddings":
            return leaf(f"deberta.embeddings.{_EMB[p[1]]}", p[2])
        if p[0] == "layers":
            pre = f"deberta.encoder.layer.{p[1]}"
            if p[2] == "attention_out":
                return leaf(f"{pre}.attention.output.dense", p[3])
            return bert_layer_name(pre, p[2:], _ATTN)
        if p[0] == "rel_embeddings":
            return "deberta.encoder.rel_embeddings.weight", "copy"
        if p[0] == "rel_norm":
            return leaf("deberta.encoder.LayerNorm", p[1])
        if p[0] == "conv":
            if p[1] == "kernel":
                return "deberta.encoder.conv.conv.weight", "conv"
            if p[1] == "bias":
                return "deberta.encoder.conv.conv.bias", "copy"
            return leaf("deberta.encoder.conv.LayerNorm", p[2])
        if p[0] == "pooler":
            return leaf("pooler.dense", p[2])
        if p[0] == "classifier":
            return leaf("classifier", p[1])
    except KeyError:
        pass
    raise KeyError(f"no HF name for DeBERTa variable {'.'.join(map(str, path))}")


# Non-persistent in HF 5 but present in older files; HF drops position_embeddings when
# position_biased_input is off (its _keys_to_ignore_on_load_unexpected).
_IGNORE = (r".*\.position_ids", r"deberta\.embeddings\.position_embeddings\.weight")
_HEAD = (r"pooler\..*", r"classifier\..*")
_OTHER_HEADS = (r"lm_predictions\..*", r"mask_predictions\..*", r"cls\..*")


# Integer fields of a DeBERTa config.json, checked first: "24" for hidden_size would otherwise
# be blamed on pooler_hidden_size (which must equal it).
INT_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
    "embedding_size",
    "max_relative_positions",
    "position_buckets",
    "pooler_hidden_size",
    "attention_head_size",
    "conv_kernel_size",
    "conv_groups",
)


def config_from_hf(hf: dict, *, dtype: str = "float32", where: str = "config.json"):
    check_ints(hf, INT_FIELDS, where)
    return deberta_lib.DebertaConfig.from_hf_config(hf, dtype=dtype, where=where)


def config_to_hf(cfg: deberta_lib.DebertaConfig) -> dict:
    return cfg.to_hf_config()


def load_params(
    model, tensors, *, where: str = "checkpoint", seed: int = 0, new_head: bool = False
) -> None:
    load_state_dict(
        model,
        tensors,
        deberta_name,
        ignore=_IGNORE + (_OTHER_HEADS if new_head else ()),
        allow_missing=_HEAD if new_head else (),
        where=where,
        seed=seed,
    )


def to_hf_state_dict(model) -> dict[str, np.ndarray]:
    return to_state_dict(model, deberta_name)


def load(path: str, *, dtype: str = "float32", seed: int = 0, new_head: bool = False):
    """HF DeBERTa-v2/v3 directory -> (chartjax model, config). `new_head`: the pooler/classifier
    may be missing (a pretrained base model; they keep their init from `seed`) and the
    pretraining heads are dropped."""
    hf, cfg_file = read_config(path)
    cfg = config_from_hf(hf, dtype=dtype, where=cfg_file)
    if new_head:
        model = deberta_lib.build(cfg, seed)
    else:
        model = nnx.eval_shape(lambda: deberta_lib.build(cfg, seed))
    load_params(model, read_tensors(path), where=path, seed=seed, new_head=new_head)
    return model, cfg


def save(model, path: str) -> None:
    write_dir(path, config_to_hf(model.cfg), to_hf_state_dict(model))
