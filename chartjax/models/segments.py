"""Attention masks of packed rows (several examples per row, chartjax/data/packing.py).

A packed batch carries T5X/seqio's `encoder_segment_ids` / `decoder_segment_ids` (1, 2, ... per
example in the row, 0 on padding) and `encoder_positions` / `decoder_positions` (restarting at 0
in each segment). Attention never crosses a segment: encoder self-attention and decoder
self-attention keep same-segment pairs (the decoder also stays causal), cross-attention keeps
decoder segment == encoder segment. Unpacked batches have no segment ids and get `None` here,
so the models compute exactly what they did before.

T5's relative-position bias needs no positions: inside a segment the token-index difference
k - q equals the position difference (segments are contiguous and their positions count up by
1 from 0), and pairs across segments are masked, so the bias of every attended pair is the
unpacked one.
"""

from __future__ import annotations

import jax


def same_segment(q_segments: jax.Array | None, k_segments: jax.Array | None) -> jax.Array | None:
    """`[B, 1, Q, K]` bool, True where query and key are in the same segment; None if unpacked."""
    if q_segments is None or k_segments is None:
        return None
    return q_segments[:, None, :, None] == k_segments[:, None, None, :]


def and_masks(*masks: jax.Array | None) -> jax.Array | None:
    """The conjunction of the masks that are not None (broadcasting), or None."""
    out = None
    for m in masks:
        if m is not None:
            out = m if out is None else out & m
    return out
