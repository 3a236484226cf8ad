"""Encoder-classifier inputs from a checkpoint's own tokenizer files, through transformers.

* `deberta`: `transformers.DebertaV2Tokenizer` over the checkpoint's SentencePiece `spm.model`
  (or its `tokenizer.json`): `[CLS] text [SEP] pair [SEP]`, token types 0 / 1, the pair cut
  as HF's `truncation=True` (longest first) to `max_len`.
* `tapas`: `transformers.TapasTokenizer` over the checkpoint's `vocab.txt`: the query, then the
  table flattened cell by cell with the seven token types (segment, column, row, prev_labels,
  column/inverse column ranks, numeric relations) and TAPAS's rows dropped to fit `max_len`
  (`truncation=True`), the table given as a pandas DataFrame of strings (`table_frame`).

Both pad to exactly `max_len` (one compiled shape) and give numpy int32 arrays:
`input_ids [L]`, `attention_mask [L]`, `token_type_ids [L]` (`[L, 7]` for TAPAS). Converting
DeBERTa-v3's SentencePiece model needs the protobuf code of sentencepiece < 0.2.2 (pinned in
pyproject.toml; 0.2.3's generated code wants protobuf 7, TensorFlow pins 6.33). transformers
(the `hf` extra) is needed here; torch is not.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Mapping

import numpy as np

FAMILIES = ("deberta", "tapas")
_CLASSES = {"deberta": "DebertaV2Tokenizer", "tapas": "TapasTokenizer"}


class BadInput(ValueError):
    """One example cannot be encoded (e.g. a table with no header); names the reason."""


def _transformers():
    try:
        import transformers
    except ImportError:
        raise ImportError(
            "DeBERTa / TAPAS tokenizers need transformers (pip install 'chartjax[hf]')"
        ) from None
    return transformers


def table_frame(table):
    """A table for TapasTokenizer: a pandas DataFrame of strings.

    `table` is a DePlot-linearized text ("TITLE | t\\nh1 | h2\\nv1 | v2", rows split on newlines or
    `<0x0A>`, cells on " | " and kept unstripped) or `{"header": [...], "rows": [[...], ...]}`.
    As the ChartCheck authors' `table_based_classification_tapas.py` reads DePlot's tables: the
    "TITLE | ..." line is dropped, the next line is the header, short rows are padded with empty
    cells, and a table without a row after its header is the empty table.
    """
    import pandas as pd

    from chartjax.data import tables

    if isinstance(table, Mapping):
        header = [str(c) for c in table.get("header", [])]
        rows = [[str(c) for c in row] for row in table.get("rows", [])]
    else:
        lines = str(table).replace(tables.BYTE_NEWLINE, "\n").splitlines()
        cells = [line.split(tables.CELL_SEP) for line in lines]
        if cells and cells[0] and cells[0][0].strip().upper() == tables.TITLE_PREFIX:
            cells = cells[1:]
        if not cells:
            return pd.DataFrame({"": []}).astype(str)
        header, rows = cells[0], cells[1:]
    if not rows:
        return pd.DataFrame({"": []}).astype(str)
    width = max([len(header), *map(len, rows)])
    header = list(header) + [""] * (width - len(header))
    rows = [list(r) + [""] * (width - len(r)) for r in rows]
    return pd.DataFrame(rows, columns=header).astype(str)


class ClassifierTokenizer:
    """The tokenizer of a DeBERTa or TAPAS checkpoint directory, padding to `max_len`.

    Calls are serialized (the in-process loader may call from a thread while the training
    process tokenizes too; TapasTokenizer is Python). Pickled without its lock for the loader's
    worker processes.
    """

    def __init__(self, path: str, family: str, max_len: int):
        if family not in FAMILIES:
            raise ValueError(f"classifier family {family!r} is not one of {FAMILIES}")
        if not os.path.isdir(path):
            raise FileNotFoundError(f"tokenizer directory not found: {path}")
        cls = getattr(_transformers(), _CLASSES[family])
        try:
            self.tok = cls.from_pretrained(path)
        except (OSError, ValueError, TypeError) as e:
            raise ValueError(f"{path}: cannot read the {family} tokenizer files ({e})") from None
        self.family, self.max_len, self.where = family, int(max_len), path
        self._lock = threading.Lock()

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def vocab_size(self) -> int:
        return len(self.tok)

    def __call__(self, text: str, pair: str | None = None, table=None) -> dict[str, np.ndarray]:
        """DeBERTa: `text` (+ `pair`); TAPAS: `text` is the query over `table`."""
        with self._lock:
            if self.family == "tapas":
                if table is None:
                    raise BadInput("a TAPAS input needs a table")
                frame = table if hasattr(table, "columns") else table_frame(table)
                try:
                    enc = self.tok(
                        table=frame,
                        queries=[text],
                        padding="max_length",
                        truncation=True,
                        max_length=self.max_len,
                    )
                except (ValueError, KeyError, IndexError) as e:
                    raise BadInput(f"cannot encode the table ({type(e).__name__}: {e})") from None
                enc = {k: v[0] for k, v in enc.items()}
            else:
                enc = self.tok(
                    text,
                    pair,
                    padding="max_length",
                    truncation=True,
                    max_length=self.max_len,
                    return_token_type_ids=True,
                )
        out = {k: np.asarray(enc[k], np.int32) for k in FEATURES}
        if len(out["input_ids"]) != self.max_len:  # e.g. a query alone longer than max_len
            raise BadInput(
                f"encoded to {len(out['input_ids'])} tokens, more than max_len {self.max_len}"
            )
        return out


FEATURES = ("input_ids", "attention_mask", "token_type_ids")


@functools.lru_cache(maxsize=8)
def tokenizer(path: str, family: str, max_len: int) -> ClassifierTokenizer:
    """One ClassifierTokenizer per (path, family, max_len) in a process (training and
    evaluation pipelines share it; loading converts the files each time)."""
    return ClassifierTokenizer(path, family, max_len)


def feature_shapes(family: str, max_len: int, num_token_types: int = 7) -> dict[str, tuple]:
    return {
        "input_ids": (max_len,),
        "attention_mask": (max_len,),
        "token_type_ids": (max_len, num_token_types) if family == "tapas" else (max_len,),
    }
