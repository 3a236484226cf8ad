"""Sequence packing of seq2seq training examples: several examples per row (as seqio's
`trim_and_pack`), so a batch of short examples is not mostly padding.

Input: featurized examples as the seq2seq tasks make them (chartjax/tasks/core/seq2seq.py), each
already trimmed to the task's fixed lengths and padded at the end: `encoder_input_tokens`
(`[S]` token ids, or Pix2Struct's `[P, 2 + patch_dim]` patches whose padding has row id 0),
optionally `encoder_input_boxes [S, 4]`, `decoder_target_tokens [T]` and `decoder_input_tokens
[T]` (the target shifted right behind the start id, nothing after the final EOS).

Output: rows of the same fixed lengths, each holding one or more whole examples back to back,
with T5X/seqio's feature names:
- `encoder_segment_ids` / `decoder_segment_ids` int32: 1, 2, ... per example in the row, 0 on
  padding;
- `encoder_positions` / `decoder_positions` int32: 0, 1, ... restarting in each example, 0 on
  padding.
Each example's decoder inputs are its own (they start with the decoder start token), so the
packed `decoder_input_tokens` is shifted per segment as seqio's. Padding is stripped first:
real tokens for text, real patches (row id > 0) for Pix2Struct, whose patches keep their own
row/column ids.

Greedy first-fit with a bounded set of open rows: each example goes to the first open row where
both its encoder and its decoder part fit; when none has room, the oldest open row is emitted
(if `max_open_rows` are open) and a new one opened. At the end of the stream the open rows are
emitted oldest first. No example is split or dropped, and the same input stream gives the same
rows. The models keep attention inside each segment (chartjax/models/segments.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

import numpy as np

ENCODER_KEYS = ("encoder_input_tokens", "encoder_input_boxes")
DECODER_KEYS = ("decoder_target_tokens", "decoder_input_tokens")
PACKED_KEYS = (
    "encoder_segment_ids",
    "encoder_positions",
    "decoder_segment_ids",
    "decoder_positions",
)


@dataclasses.dataclass(frozen=True)
class PackSpec:
    """Row lengths and padding of the packed features.

    encoder_len / decoder_len: the task's fixed lengths (tokens or patches, target tokens).
    pad_id: the vocabulary's padding id in the token features (0 for T5, 1 for BART).
    image: encoder_input_tokens are Pix2Struct patches (padding: all-zero rows, row id 0).
    max_open_rows: rows being filled at once (more: denser rows, more examples held back).
    """

    encoder_len: int
    decoder_len: int
    pad_id: int = 0
    image: bool = False
    max_open_rows: int = 16


def _used(valid: np.ndarray) -> int:
    """Length up to and including the last True (features are padded at the end)."""
    nz = np.flatnonzero(valid)
    return int(nz[-1]) + 1 if len(nz) else 0


def example_lengths(example: dict, spec: PackSpec) -> tuple[int, int]:
    """(encoder, decoder) length of one example without its padding."""
    enc = np.asarray(example["encoder_input_tokens"])
    enc_valid = enc[:, 0] > 0 if spec.image else enc != spec.pad_id
    dec_valid = np.asarray(example["decoder_target_tokens"]) != spec.pad_id
    return _used(enc_valid), _used(dec_valid)


def first_fit(
    lengths: Iterable[tuple[int, int]], capacity: tuple[int, int], max_open_rows: int
) -> Iterator[list[int]]:
    """Indices of the examples of each row, rows in the order they are emitted (docstring)."""
    if max_open_rows < 1:
        raise ValueError(f"max_open_rows must be >= 1, got {max_open_rows}")
    open_rows: list[tuple[list[int], list[int]]] = []  # (indices, [encoder used, decoder used])
    for i, (enc, dec) in enumerate(lengths):
        if enc > capacity[0] or dec > capacity[1]:
            raise ValueError(
                f"example {i} ({enc} encoder, {dec} decoder) exceeds the row {capacity}"
            )
        for idx, used in open_rows:
            if used[0] + enc <= capacity[0] and used[1] + dec <= capacity[1]:
                idx.append(i)
                used[0] += enc
                used[1] += dec
                break
        else:
            if len(open_rows) == max_open_rows:
                yield open_rows.pop(0)[0]
            open_rows.append(([i], [enc, dec]))
    for idx, _ in open_rows:
        yield idx


def _pad_value(key: str, spec: PackSpec):
    return (
        spec.pad_id if key.endswith("_tokens") and not (spec.image and key in ENCODER_KEYS) else 0
    )


def pack_row(examples: list[dict], spec: PackSpec) -> dict:
    """Examples that fit one row -> the packed row's features."""
    keys = [k for k in examples[0] if k in ENCODER_KEYS + DECODER_KEYS]
    other = set(examples[0]) - set(keys)
    if other:
        raise ValueError(
            f"cannot pack features {sorted(other)} (only {ENCODER_KEYS + DECODER_KEYS})"
        )
    out = {}
    for k in keys:
        v = np.asarray(examples[0][k])
        n = spec.encoder_len if k in ENCODER_KEYS else spec.decoder_len
        out[k] = np.full((n, *v.shape[1:]), _pad_value(k, spec), v.dtype)
    for side, n in (("encoder", spec.encoder_len), ("decoder", spec.decoder_len)):
        out[f"{side}_segment_ids"] = np.zeros(n, np.int32)
        out[f"{side}_positions"] = np.zeros(n, np.int32)
    at = {"encoder": 0, "decoder": 0}
    for seg, ex in enumerate(examples, start=1):
        lens = dict(zip(("encoder", "decoder"), example_lengths(ex, spec)))
        for k in keys:
            side = "encoder" if k in ENCODER_KEYS else "decoder"
            out[k][at[side] : at[side] + lens[side]] = np.asarray(ex[k])[: lens[side]]
        for side, n in lens.items():
            out[f"{side}_segment_ids"][at[side] : at[side] + n] = seg
            out[f"{side}_positions"][at[side] : at[side] + n] = np.arange(n)
            at[side] += n
    return out


def pack(examples: Iterable[dict], spec: PackSpec) -> Iterator[dict]:
    """A stream of featurized examples -> a stream of packed rows (module docstring)."""
    held: dict[int, dict] = {}

    def lengths():
        for i, ex in enumerate(examples):
            held[i] = ex
            yield example_lengths(ex, spec)

    for idx in first_fit(lengths(), (spec.encoder_len, spec.decoder_len), spec.max_open_rows):
        yield pack_row([held.pop(i) for i in idx], spec)


def unbatch(batches: Iterable[dict]) -> Iterator[dict]:
    """Stacked batches -> their examples, in order."""
    for batch in batches:
        for i in range(len(next(iter(batch.values())))):
            yield {k: v[i] for k, v in batch.items()}


def rebatch(rows: Iterable[dict], size: int) -> Iterator[dict]:
    """Packed rows -> stacked batches of `size` rows (an incomplete last batch is dropped)."""
    chunk = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield {k: np.stack([r[k] for r in chunk]) for k in chunk[0]}
            chunk = []


def num_examples(batch: dict) -> int:
    """The examples in a packed batch: the segments of every row."""
    return int(np.asarray(batch["decoder_segment_ids"]).max(axis=-1).sum())
