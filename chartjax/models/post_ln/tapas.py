"""TAPAS (Flax NNX): a BERT encoder with TAPAS's table token types, and its sequence classifier.

As HF `TapasForSequenceClassification` (transformers 5.24): word + position + one embedding per
token type (`type_vocab_sizes`: segment, column, row, prev_labels, column_ranks,
inv_column_ranks, numeric_relations), LayerNorm; post-LN layers (attention -> dense -> LN with
residual, dense -> act -> dense -> LN with residual); tanh pooler on the first token; a linear
classifier. With `reset_position_index_per_cell`, the position of a token is its offset from the
first token of its (column, row) cell, capped at `max_position_embeddings - 1`.

The post-LN building blocks it shares with DeBERTa and BART are in `blocks.py`.

Numerics: fp32 parameters; matmuls in `dtype` (bf16 allowed); LayerNorm, softmax and the
classifier logits in fp32. Batch: `input_ids [B, S]`, `token_type_ids [B, S, len(type_vocab_sizes)]`
(zeros if absent), `attention_mask [B, S]` (all ones if absent, as HF).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.models.layers import constrain
from chartjax.models.model_configs import check_attention_impl
from chartjax.models.post_ln.blocks import (
    SUPPORTED_ACTIVATIONS,
    Embedding,
    EncoderLayer,
    LayerNorm,
    Pooler,
    check_activation,
    classifier,
    key_padding_inputs,
    num_labels_from_hf,
    refuse,
)
from chartjax.models.remat import check_remat_policy, checkpointed

ACT = ("batch", "length", "embed")

# --------------------------------------------------------------------------- config


@dataclasses.dataclass(frozen=True)
class TapasConfig:
    """TAPAS encoder + sequence classifier. Field names follow HF's TapasConfig."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    num_labels: int = 2
    hidden_act: str = "gelu"
    max_position_embeddings: int = 1024
    type_vocab_sizes: tuple[int, ...] = (3, 256, 256, 2, 256, 256, 10)
    reset_position_index_per_cell: bool = True
    layer_norm_eps: float = 1e-12
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    initializer_range: float = 0.02
    pad_id: int = 0
    dtype: str = "bfloat16"  # activation dtype; parameters are float32
    attention_impl: str = "dot_product"  # model_configs.ATTENTION_IMPLS
    remat_policy: str = "none"  # models/remat.py REMAT_POLICIES; not an HF field

    def __post_init__(self):
        check_attention_impl("TapasConfig", self.attention_impl)
        check_remat_policy("TapasConfig", self.remat_policy)
        object.__setattr__(self, "type_vocab_sizes", tuple(int(t) for t in self.type_vocab_sizes))
        for f in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "num_labels",
            "max_position_embeddings",
        ):
            v = getattr(self, f)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"TapasConfig.{f} must be a positive int, got {v!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"TapasConfig: hidden_size {self.hidden_size} is not a multiple of "
                f"num_attention_heads {self.num_attention_heads}"
            )
        if self.reset_position_index_per_cell and len(self.type_vocab_sizes) < 3:
            raise ValueError("reset_position_index_per_cell needs column and row token types")
        check_activation("hidden_act", self.hidden_act)
        jnp.dtype(self.dtype)

    @property
    def activation_dtype(self):
        return jnp.dtype(self.dtype)

    @classmethod
    def from_hf_config(
        cls, hf: dict, *, dtype: str = "float32", where: str = "config.json"
    ) -> TapasConfig:
        """From an HF TAPAS `config.json` dict; a field value chartjax does not implement raises
        ValueError naming the field. The question-answering head and loss fields (aggregation,
        cell selection, answer loss) do not enter the sequence classifier and are ignored."""
        mt = hf.get("model_type", "tapas")
        if mt != "tapas":
            refuse(where, "model_type", mt, "expected 'tapas'")
        for field in ("is_decoder", "add_cross_attention"):
            if hf.get(field, False):
                refuse(where, field, hf[field], "TAPAS is an encoder here")
        act = hf.get("hidden_act", "gelu")
        if not isinstance(act, str) or act not in SUPPORTED_ACTIVATIONS:
            refuse(where, "hidden_act", act, f"have {SUPPORTED_ACTIVATIONS}")
        try:
            return cls(
                vocab_size=hf["vocab_size"],
                hidden_size=hf["hidden_size"],
                num_hidden_layers=hf["num_hidden_layers"],
                num_attention_heads=hf["num_attention_heads"],
                intermediate_size=hf["intermediate_size"],
                num_labels=num_labels_from_hf(hf),
                hidden_act=act,
                max_position_embeddings=hf.get("max_position_embeddings", 1024),
                type_vocab_sizes=tuple(hf.get("type_vocab_sizes", (3, 256, 256, 2, 256, 256, 10))),
                reset_position_index_per_cell=bool(hf.get("reset_position_index_per_cell", True)),
                layer_norm_eps=hf.get("layer_norm_eps", 1e-12),
                hidden_dropout_prob=hf.get("hidden_dropout_prob", 0.1),
                attention_probs_dropout_prob=hf.get("attention_probs_dropout_prob", 0.1),
                initializer_range=hf.get("initializer_range", 0.02),
                pad_id=hf.get("pad_token_id", 0) or 0,
                dtype=dtype,
            )
        except KeyError as e:
            raise ValueError(f"{where}: missing field {e}") from None

    def to_hf_config(self) -> dict:
        return {
            "model_type": "tapas",
            "architectures": ["TapasForSequenceClassification"],
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "intermediate_size": self.intermediate_size,
            "hidden_act": self.hidden_act,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_sizes": list(self.type_vocab_sizes),
            "reset_position_index_per_cell": self.reset_position_index_per_cell,
            "layer_norm_eps": self.layer_norm_eps,
            "hidden_dropout_prob": self.hidden_dropout_prob,
            "attention_probs_dropout_prob": self.attention_probs_dropout_prob,
            "initializer_range": self.initializer_range,
            "pad_token_id": self.pad_id,
            "id2label": {str(i): f"LABEL_{i}" for i in range(self.num_labels)},
            "label2id": {f"LABEL_{i}": i for i in range(self.num_labels)},
        }


# --------------------------------------------------------------------------- model


def per_cell_positions(token_type_ids: jax.Array, max_position: int) -> jax.Array:
    """Position of each token relative to the first token of its (column, row) cell.

    `token_type_ids [B, S, T]` (column = type 1, row = type 2) -> int32 `[B, S]`, capped at
    `max_position - 1`. Question tokens, [CLS], [SEP] and padding share cell (0, 0) and so keep
    their absolute positions.
    """
    col, row = token_type_ids[..., 1], token_type_ids[..., 2]
    same = (col[:, :, None] == col[:, None, :]) & (row[:, :, None] == row[:, None, :])
    first = jnp.argmax(same, axis=-1)  # the first token of the cell (a token is in its own cell)
    pos = jnp.arange(token_type_ids.shape[1])[None, :] - first
    return jnp.minimum(pos, max_position - 1).astype(jnp.int32)


class TapasEmbeddings(nnx.Module):
    def __init__(self, cfg: TapasConfig, *, rngs: nnx.Rngs):
        dt, e, std = cfg.activation_dtype, cfg.hidden_size, cfg.initializer_range
        self.word_embeddings = Embedding(
            cfg.vocab_size, e, ("vocab", "embed"), std=std, dtype=dt, rngs=rngs
        )
        self.position_embeddings = Embedding(
            cfg.max_position_embeddings,
            e,
            ("abspos_buckets", "embed"),
            std=std,
            dtype=dt,
            rngs=rngs,
        )
        # Token-type tables are small: the type axis stays unnamed (replicated) under every preset.
        self.token_type_embeddings = nnx.List(
            [
                Embedding(n, e, (None, "embed"), std=std, dtype=dt, rngs=rngs)
                for n in cfg.type_vocab_sizes
            ]
        )
        self.layer_norm = LayerNorm(e, eps=cfg.layer_norm_eps, dtype=dt, rngs=rngs)
        self.dropout = nnx.Dropout(cfg.hidden_dropout_prob, rngs=rngs)
        self.reset_position_index_per_cell = cfg.reset_position_index_per_cell
        self.max_position = cfg.max_position_embeddings

    def __call__(self, ids, token_type_ids, *, deterministic: bool) -> jax.Array:
        if token_type_ids.shape[-1] != len(self.token_type_embeddings):
            raise ValueError(
                f"token_type_ids: last dim {token_type_ids.shape[-1]} != "
                f"{len(self.token_type_embeddings)} token types"
            )
        if self.reset_position_index_per_cell:
            pos = per_cell_positions(token_type_ids, self.max_position)
        else:
            pos = jnp.broadcast_to(jnp.arange(ids.shape[1]), ids.shape)
        x = self.word_embeddings(ids) + self.position_embeddings(pos)
        for i, table in enumerate(self.token_type_embeddings):
            x = x + table(token_type_ids[..., i])
        return self.dropout(self.layer_norm(x), deterministic=deterministic)


class TapasForSequenceClassification(nnx.Module):
    """`embeddings`, `encoder` (layers), `pooler`, `classifier`; `__call__` -> fp32 logits [B, L]."""

    def __init__(self, cfg: TapasConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        dt, std = cfg.activation_dtype, cfg.initializer_range
        self.embeddings = TapasEmbeddings(cfg, rngs=rngs)
        self.layers = nnx.List(
            [
                EncoderLayer(
                    cfg.hidden_size,
                    cfg.num_attention_heads,
                    cfg.intermediate_size,
                    cfg.hidden_act,
                    eps=cfg.layer_norm_eps,
                    dropout_rate=cfg.hidden_dropout_prob,
                    attention_dropout_rate=cfg.attention_probs_dropout_prob,
                    std=std,
                    dtype=dt,
                    attention_impl=cfg.attention_impl,
                    rngs=rngs,
                )
                for _ in range(cfg.num_hidden_layers)
            ]
        )
        self.pooler = Pooler(cfg.hidden_size, "tanh", std=std, dtype=dt, rngs=rngs)
        self.dropout = nnx.Dropout(cfg.hidden_dropout_prob, rngs=rngs)
        self.classifier = classifier(cfg.hidden_size, cfg.num_labels, std=std, rngs=rngs)

    def _inputs(self, batch):
        ids = jnp.asarray(batch["input_ids"])
        tt = batch.get("token_type_ids")
        tt = (
            jnp.zeros((*ids.shape, len(self.cfg.type_vocab_sizes)), jnp.int32)
            if tt is None
            else jnp.asarray(tt)
        )
        mask = batch.get("attention_mask")
        mask = jnp.ones(ids.shape, bool) if mask is None else jnp.asarray(mask) > 0
        return ids, tt, mask

    def encode(self, batch, deterministic: bool = True) -> jax.Array:
        """Last hidden states `[B, S, hidden]`."""
        ids, tt, mask = self._inputs(batch)
        x = constrain(self.embeddings(ids, tt, deterministic=deterministic), ACT)
        bias, att_mask = key_padding_inputs(self.cfg.attention_impl, mask)
        step = checkpointed(
            lambda layer, x, bias, m: layer(x, bias, mask=m, deterministic=deterministic),
            self.cfg.remat_policy,
        )
        for layer in self.layers:
            x = constrain(step(layer, x, bias, att_mask), ACT)
        return x

    def __call__(self, batch, *, deterministic: bool) -> jax.Array:
        pooled = self.pooler(self.encode(batch, deterministic=deterministic)[:, 0])
        pooled = self.dropout(pooled, deterministic=deterministic)
        return self.classifier(pooled.astype(jnp.float32))


def build(config: TapasConfig, rngs: nnx.Rngs | int = 0) -> TapasForSequenceClassification:
    if isinstance(rngs, int):
        rngs = nnx.Rngs(params=rngs, dropout=rngs + 1)
    return TapasForSequenceClassification(config, rngs=rngs)
