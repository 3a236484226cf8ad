"""Chart2text (Obeid & Hoque 2020), the data-to-text transformer of Chart-to-Text's Table 4.

A chart's data records (column header, cell value, column index; chartjax/tasks/chart_to_text/
records.py builds them) are embedded, one vector per record, and read by a transformer encoder; an
auxiliary binary head on every encoded record predicts whether the summary mentions it (the
content-selection loss, lambda_cs in the authors' `train.py`); a transformer decoder writes the
(templated) summary. Pew's OCR variant concatenates an embedding of each OCR phrase's box to its
record vector (`use_boxes`), as the paper says.

Record vector (our reading of "embedded into feature vectors"; Gong et al. 2019's records sum
or concatenate field embeddings, which one the Chart-to-Text runs used is [unverified]):
`relu(W [E(value); E(header); C(column)(; B(box))])`, plus a learned position of the record in
the sequence (the authors' `--encoder_positional_emb True`; they use sinusoids, we reuse BART's
learned table [substitution: the stack we reuse has learned positions]).

The encoder and decoder layers are BART's (chartjax/models/post_ln/bart.py, post-LN, biases,
scaled queries), sharing one token table between the record words, the decoder inputs and the tied
output projection (`--share_inout_emb True`; the authors keep separate source/target tables,
`--share_srctgt_emb False`, [substitution: one vocabulary of words for both]). Decoding is
`decoding.greedy_decode` / `beam_search` over `init_cache` / `decode_step`, unchanged.

Batch (`encoder_input_tokens [B, R, RECORD_WIDTH]` int32, one row per record, in the layout of
record_seq2seq.py: PRESENT, VALUE, ...; padding rows have `present == 0`),
`decoder_input_tokens [B, T]`, `decoder_target_tokens [B, T]`, `cs_labels [B, R]` (training
only). Token ids: pad 0, EOS 1, decoder start 0 (T5's conventions: `losses.seq2seq_loss` and
`decoding` read them from `cfg`). Boxes are stored as integers in [0, BOX_SCALE] (fractions of
the image's width / height).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.models.data_to_text.record_seq2seq import (
    COLUMN,
    HEADER,
    VALUE,
    DataToTextConfig,
    RecordSeq2Seq,
)
from chartjax.models.post_ln.blocks import Embedding


class Chart2Text(RecordSeq2Seq):
    """Record = [E(value); E(header); C(column)(; box)] (see the module docstring)."""

    def __init__(self, cfg: DataToTextConfig, *, rngs: nnx.Rngs):
        kw = {"std": 0.02, "dtype": cfg.activation_dtype, "rngs": rngs}
        dim = 3 * cfg.d_model + (cfg.box_dim if cfg.use_boxes else 0)
        super().__init__(cfg, dim, rngs=rngs)
        self.column = Embedding(cfg.max_index, cfg.d_model, ("abspos_buckets", "embed"), **kw)

    def record_features(self, records: jax.Array, *, deterministic: bool) -> jax.Array:
        tok = self.core.token_embedder
        col = jnp.minimum(records[..., COLUMN], self.cfg.max_index - 1)
        parts = [tok(records[..., VALUE]), tok(records[..., HEADER]), self.column(col)]
        return jnp.concatenate(parts + self.box_features(records), axis=-1)


def build(config: DataToTextConfig, rngs: nnx.Rngs | int = 0) -> nnx.Module:
    """Chart2text or Field-Infuse, by `config.kind`."""
    if isinstance(rngs, int):
        rngs = nnx.Rngs(params=rngs, dropout=rngs + 1)
    if config.kind == "field_infuse":
        from chartjax.models.data_to_text.field_infuse import FieldInfuse

        return FieldInfuse(config, rngs=rngs)
    return Chart2Text(config, rngs=rngs)
