"""Rematerialization (activation checkpointing) of the layers of every stack, by config.

Every family's config has `remat_policy` (gin: `Pix2StructConfig.remat_policy = 'full'`). The
stacks call each layer through `checkpointed(fn, policy)`: the layer's forward pass runs under
`nnx.remat` (`jax.checkpoint` lifted to NNX modules), so the backward pass recomputes what the
policy did not save instead of keeping every intermediate alive from forward to backward:
- "none": no remat; every intermediate the backward pass needs is kept (fastest, most memory);
- "full": only each layer's inputs are kept, the whole layer is recomputed in the backward pass
  (least memory, about one extra forward pass of compute);
- "dots_saveable": matmul outputs are kept, the elementwise work between them (norms, GELU,
  softmax, dropout) is recomputed;
- "dots_with_no_batch_dims_saveable": only matmuls without batch dimensions are kept (the
  projections and MLP matmuls, not the attention score / value einsums, whose outputs grow with
  the square of the length), MaxText's and big_vision's usual middle ground.
Names and policies are MaxText's / big_vision's `remat_policy` (jax.checkpoint_policies).

The layers stay an unscanned `nnx.List`, so parameter trees and checkpoint names do not change
with the policy. Dropout still works: nnx.remat carries the layer's RNG stream in and its
advanced count out, and the recomputation replays the same key, so the masks are the ones the
forward pass drew. `deterministic` and other Python flags must be closed over by `fn` (static),
not passed as arguments.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
from flax import nnx

REMAT_POLICIES = {
    "none": None,
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots_saveable": jax.checkpoint_policies.dots_saveable,
    "dots_with_no_batch_dims_saveable": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


def check_remat_policy(owner: str, value) -> None:
    """ValueError naming `owner`.remat_policy unless it is one of REMAT_POLICIES."""
    if value not in REMAT_POLICIES:
        raise ValueError(f"{owner}.remat_policy={value!r}: expected one of {tuple(REMAT_POLICIES)}")


def checkpointed(fn: Callable, policy: str) -> Callable:
    """`fn(layer, *arrays)` rematerialized under `policy` ("none": `fn` itself). The arrays may
    be pytrees with None; Python flags (deterministic, causal) belong in `fn`'s closure."""
    check_remat_policy("checkpointed", policy)
    if policy == "none":
        return fn
    # prevent_cse: the layers are unrolled, not scanned, so XLA could otherwise merge the
    # recomputation back into the forward pass and undo the saving (jax.checkpoint docs).
    return nnx.remat(fn, policy=REMAT_POLICIES[policy], prevent_cse=True)
