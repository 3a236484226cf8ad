"""Field-Infuse (Chen et al. 2020a, LogicNLG's "Field-Infusing" model) as Chart-to-Text's
Table 4 describes it: "the cell values are first encoded with an LSTM, then concatenated with
the embeddings of the row index and the column header; these table representations are fed to
a 3-layer transformer encoder-decoder". On Pew the OCR boxes are concatenated to the LSTM field
representation (`use_boxes`).

One field per record (chartjax/tasks/chart_to_text/records.py): an LSTM over the value's words
(its state after the last real word), the mean embedding of the column header's words, and a
row-index embedding, concatenated (with a box embedding on Pew), projected to d_model and fed
to the encoder (positions as Chart2text). The authors' code (`baseline_models/LogicNLG/
OCRModel.py`, read, not copied) instead sums per-word embeddings with an LSTM over the field
names and adds a copy gate; we follow the paper's text and leave the copy gate out
[substitution]. The rest (BART layers, shared vocabulary, decoding) is chart2text.py's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.models.data_to_text.record_seq2seq import (
    ROW,
    DataToTextConfig,
    RecordSeq2Seq,
    header_words,
    value_words,
)
from chartjax.models.post_ln.blocks import Embedding


class FieldInfuse(RecordSeq2Seq):
    def __init__(self, cfg: DataToTextConfig, *, rngs: nnx.Rngs):
        kw = {"std": 0.02, "dtype": cfg.activation_dtype, "rngs": rngs}
        dim = cfg.lstm_dim + 2 * cfg.d_model + (cfg.box_dim if cfg.use_boxes else 0)
        super().__init__(cfg, dim, rngs=rngs)
        self.row = Embedding(cfg.max_index, cfg.d_model, ("abspos_buckets", "embed"), **kw)
        self.lstm = nnx.RNN(nnx.LSTMCell(cfg.d_model, cfg.lstm_dim, rngs=rngs), return_carry=True)

    def record_features(self, records: jax.Array, *, deterministic: bool) -> jax.Array:
        cfg, tok = self.cfg, self.core.token_embedder
        b, r = records.shape[:2]
        words = value_words(cfg, records).reshape(b * r, cfg.max_value_words)
        lengths = jnp.sum(words != cfg.pad_id, axis=-1)
        # An explicit zero carry, as relation_network.QuestionEncoder: LSTMCell would draw it
        # from an RNG stream, which cannot be mutated inside the RNN's scan.
        zeros = jnp.zeros((b * r, cfg.lstm_dim), jnp.float32)
        (_, h), _ = self.lstm(
            tok(words).astype(jnp.float32), initial_carry=(zeros, zeros), seq_lengths=lengths
        )
        field = h.reshape(b, r, cfg.lstm_dim).astype(cfg.activation_dtype)
        hw = header_words(cfg, records)
        hmask = (hw != cfg.pad_id)[..., None].astype(cfg.activation_dtype)
        header = jnp.sum(tok(hw) * hmask, axis=-2) / jnp.maximum(jnp.sum(hmask, axis=-2), 1.0)
        row = self.row(jnp.minimum(records[..., ROW], cfg.max_index - 1))
        return jnp.concatenate([field, header, row] + self.box_features(records), axis=-1)
