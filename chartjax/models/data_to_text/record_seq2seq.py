"""What Chart2text and Field-Infuse share (chart2text.py, field_infuse.py beside this file).

`DataToTextConfig`, the layout of a record row of `encoder_input_tokens` (`PRESENT`, `VALUE`,
..., chartjax/tasks/chart_to_text/records.py packs it), `RecordSeq2Seq` (BART's stacks, the
record projection, the content-selection head, decoding) and the training `loss`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.models.layers import constrain
from chartjax.models.post_ln import bart
from chartjax.models.post_ln.blocks import dense, key_padding_inputs

# Columns of one record row of `encoder_input_tokens`.
PRESENT, VALUE, HEADER, COLUMN, ROW = 0, 1, 2, 3, 4
BOX = slice(5, 9)  # x0, y0, x1, y1
HEADER_WORDS = 9  # first of `max_header_words` columns, then `max_value_words` value words
BOX_SCALE = 1000
ACT = ("batch", "length", "embed")


@dataclasses.dataclass(frozen=True)
class DataToTextConfig:
    """Chart2text and Field-Infuse (chart2text.py, field_infuse.py) share this config.

    kind: "chart2text" | "field_infuse". `cs_weight` scales the content-selection loss (0: no
    head is trained; Field-Infuse has none). `max_index` bounds the column / row ids.
    """

    vocab_size: int
    kind: str = "chart2text"
    d_model: int = 512
    num_heads: int = 8
    ffn_dim: int = 2048
    encoder_layers: int = 1
    decoder_layers: int = 6
    max_records: int = 256
    max_target_len: int = 256
    max_header_words: int = 8
    max_value_words: int = 8
    max_index: int = 64
    use_boxes: bool = False
    box_dim: int = 64
    lstm_dim: int = 256  # Field-Infuse: the value LSTM's state
    cs_weight: float = 1.0
    activation: str = "gelu"  # the authors' --gelu_activation True
    dropout: float = 0.1
    attention_dropout: float = 0.1
    label_smoothing: float = 0.0
    dtype: str = "float32"
    pad_id: int = 0
    eos_id: int = 1
    decoder_start_token_id: int = 0
    z_loss: float = 0.0
    attention_impl: str = "dot_product"  # model_configs.ATTENTION_IMPLS

    def __post_init__(self):
        if self.kind not in ("chart2text", "field_infuse"):
            raise ValueError(f"DataToTextConfig.kind={self.kind!r}: chart2text or field_infuse")
        for f in ("vocab_size", "d_model", "num_heads", "ffn_dim", "max_records", "max_index"):
            v = getattr(self, f)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"DataToTextConfig.{f} must be a positive int, got {v!r}")
        if self.d_model % self.num_heads:
            raise ValueError(f"DataToTextConfig: d_model {self.d_model} % num_heads != 0")

    @property
    def record_width(self) -> int:
        return HEADER_WORDS + self.max_header_words + self.max_value_words

    @property
    def activation_dtype(self):
        return jnp.dtype(self.dtype)

    def bart(self) -> bart.BartConfig:
        """The BART stacks we reuse, sized as this model."""
        return bart.BartConfig(
            vocab_size=self.vocab_size,
            d_model=self.d_model,
            encoder_layers=self.encoder_layers,
            decoder_layers=self.decoder_layers,
            encoder_attention_heads=self.num_heads,
            decoder_attention_heads=self.num_heads,
            encoder_ffn_dim=self.ffn_dim,
            decoder_ffn_dim=self.ffn_dim,
            max_position_embeddings=max(self.max_records, self.max_target_len),
            activation_function=self.activation,
            scale_embedding=True,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            pad_id=self.pad_id,
            bos_id=self.decoder_start_token_id,
            eos_id=self.eos_id,
            decoder_start_token_id=self.decoder_start_token_id,
            forced_eos_token_id=None,
            dtype=self.dtype,
            attention_impl=self.attention_impl,
        )


def value_words(cfg: DataToTextConfig, records: jax.Array) -> jax.Array:
    start = HEADER_WORDS + cfg.max_header_words
    return records[..., start : start + cfg.max_value_words]


def header_words(cfg: DataToTextConfig, records: jax.Array) -> jax.Array:
    return records[..., HEADER_WORDS : HEADER_WORDS + cfg.max_header_words]


def boxes(records: jax.Array) -> jax.Array:
    return records[..., BOX].astype(jnp.float32) / BOX_SCALE


class RecordSeq2Seq(nnx.Module):
    """What both models share: BART's stacks (`core`), the record projection into d_model, the
    content-selection head, decoding. Subclasses define `record_features(records)`."""

    def __init__(self, cfg: DataToTextConfig, feature_dim: int, *, rngs: nnx.Rngs):
        self.cfg = cfg
        kw = {"std": 0.02, "dtype": cfg.activation_dtype, "rngs": rngs}
        self.core = bart.Bart(cfg.bart(), rngs=rngs)
        self.project = dense(feature_dim, cfg.d_model, ("mlp", "embed"), **kw)
        self.select = dense(cfg.d_model, 1, ("embed", None), **kw)
        if cfg.use_boxes:
            self.box = dense(4, cfg.box_dim, (None, "mlp"), **kw)

    def box_features(self, records: jax.Array) -> list[jax.Array]:
        return [self.box(boxes(records))] if self.cfg.use_boxes else []

    def encoder_mask(self, batch) -> jax.Array:
        return jnp.asarray(batch["encoder_input_tokens"])[..., PRESENT] > 0

    def encode(self, batch, deterministic: bool = True) -> jax.Array:
        """Encoded records `[B, R, d_model]`."""
        records = jnp.asarray(batch["encoder_input_tokens"])
        x = jax.nn.relu(self.project(self.record_features(records, deterministic=deterministic)))
        pos = jnp.arange(records.shape[1])[None, :]
        x = constrain(self.core.encoder.embed(x, pos, deterministic=deterministic), ACT)
        bias, mask = key_padding_inputs(self.cfg.attention_impl, self.encoder_mask(batch))
        for layer in self.core.encoder.layers:
            x = constrain(layer(x, bias, mask=mask, deterministic=deterministic), ACT)
        return x

    def content_selection_logits(self, encoded: jax.Array) -> jax.Array:
        """One logit per record `[B, R]` (fp32): does the summary mention it?"""
        return self.select(encoded)[..., 0].astype(jnp.float32)

    def forward(self, batch, *, deterministic: bool) -> tuple[jax.Array, jax.Array]:
        """(teacher-forced logits `[B, T, vocab]`, content-selection logits `[B, R]`)."""
        encoded = self.encode(batch, deterministic=deterministic)
        logits = self.core.decode(
            jnp.asarray(batch["decoder_input_tokens"]),
            encoded,
            self.encoder_mask(batch),
            deterministic=deterministic,
        )
        return logits, self.content_selection_logits(encoded)

    def __call__(self, batch, *, deterministic: bool) -> jax.Array:
        return self.forward(batch, deterministic=deterministic)[0]

    def init_cache(self, encoded, encoder_mask, max_len: int):
        return self.core.init_cache(encoded, encoder_mask, max_len)

    def decode_step(self, tokens, cache, index):
        return self.core.decode_step(tokens, cache, index)


def loss(model: RecordSeq2Seq, batch, *, deterministic: bool) -> tuple[jax.Array, dict]:
    """Per-token cross-entropy (label smoothing `cfg.label_smoothing`; the authors' 0.05) +
    `cs_weight` x the mean binary cross-entropy of the content-selection head over the present
    records. aux: `summary_loss`, `cs_loss`, `cs_accuracy`, `accuracy`, `num_tokens`."""
    import optax

    cfg = model.cfg
    logits, cs = model.forward(batch, deterministic=deterministic)
    targets = jnp.asarray(batch["decoder_target_tokens"])
    w = (targets != cfg.pad_id).astype(jnp.float32)
    n = jnp.maximum(jnp.sum(w), 1.0)
    labels = jax.nn.one_hot(targets, logits.shape[-1], dtype=jnp.float32)
    if cfg.label_smoothing:
        labels = optax.smooth_labels(labels, cfg.label_smoothing)
    ce = optax.softmax_cross_entropy(logits.astype(jnp.float32), labels)
    summary = jnp.sum(ce * w) / n
    present = model.encoder_mask(batch).astype(jnp.float32)
    m = jnp.maximum(jnp.sum(present), 1.0)
    y = jnp.asarray(batch["cs_labels"]).astype(jnp.float32)
    bce = jnp.sum(optax.sigmoid_binary_cross_entropy(cs, y) * present) / m
    cs_acc = jnp.sum(((cs > 0) == (y > 0.5)) * present) / m
    acc = jnp.sum((jnp.argmax(logits, -1) == targets) * w) / n
    total = summary + cfg.cs_weight * bce
    aux = {"summary_loss": summary, "cs_loss": bce, "cs_accuracy": cs_acc, "accuracy": acc}
    return total, {**aux, "num_tokens": jnp.sum(w)}
