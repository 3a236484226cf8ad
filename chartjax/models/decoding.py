"""KV-cached decoding: greedy, temperature/top-k sampling, and beam search with length penalty.

Each runs as one jitted function over the model's NNX state: the encoder once, then a
`lax.while_loop` over `model.decode_step` (no Python loop per token), batched, stopping when
every sequence has emitted EOS. Conventions of T5X/Pix2Struct: decoder start token 0, EOS 1,
outputs without the start token, padded with 0 after EOS; scores are summed log-probabilities of
the emitted tokens (EOS included) under the model's untempered distribution. Beam scores are
divided by T5X's brevity penalty `((5 + length) / 6) ** alpha`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import nnx

NEG = -1.0e9


def _encoder_batch(batch) -> dict:
    # T5 with OCR boxes (models/t5/__init__.py) also reads encoder_input_boxes.
    keys = ("encoder_input_tokens", "encoder_input_boxes")
    return {k: jnp.asarray(batch[k]) for k in keys if k in batch}


def _ids(model, eos_id, start_id):
    cfg = model.cfg
    return (
        cfg.eos_id if eos_id is None else eos_id,
        cfg.decoder_start_token_id if start_id is None else start_id,
    )


# --------------------------------------------------------------------------- greedy / sampling


@functools.partial(jax.jit, static_argnums=(0,), static_argnames=("max_len", "greedy", "top_k"))
def _sample_jit(
    graphdef, state, batch, rng, temperature, eos_id, start_id, *, max_len, greedy, top_k
):
    model = nnx.merge(graphdef, state)
    encoded = model.encode(batch, deterministic=True)
    b = encoded.shape[0]
    cache = model.init_cache(encoded, model.encoder_mask(batch), max_len)

    def cond(c):
        i, _, _, _, done, _, _ = c
        return (i < max_len) & ~jnp.all(done)

    def body(c):
        i, out, cur, cache, done, score, rng = c
        logits, cache = model.decode_step(cur, cache, i)
        logp = jax.nn.log_softmax(logits, axis=-1)
        if greedy:
            nxt = jnp.argmax(logits, axis=-1)
        else:
            rng, sub = jax.random.split(rng)
            scaled = logits / temperature
            if top_k > 0:
                kth = jax.lax.top_k(scaled, top_k)[0][:, -1:]
                scaled = jnp.where(scaled < kth, -jnp.inf, scaled)
            nxt = jax.random.categorical(sub, scaled, axis=-1)
        nxt = nxt.astype(jnp.int32)
        tok_logp = jnp.take_along_axis(logp, nxt[:, None], axis=-1)[:, 0]
        score = score + jnp.where(done, 0.0, tok_logp)
        nxt = jnp.where(done, 0, nxt)
        out = out.at[:, i].set(nxt)
        return i + 1, out, nxt, cache, done | (nxt == eos_id), score, rng

    init = (
        jnp.int32(0),
        jnp.zeros((b, max_len), jnp.int32),
        jnp.full((b,), start_id, jnp.int32),
        cache,
        jnp.zeros((b,), bool),
        jnp.zeros((b,), jnp.float32),
        rng,
    )
    _, out, _, _, _, score, _ = jax.lax.while_loop(cond, body, init)
    return out, score


def sample_decode(
    model,
    batch,
    rng=None,
    *,
    max_decode_len: int,
    temperature: float = 1.0,
    top_k: int = 0,
    eos_id: int | None = None,
    start_id: int | None = None,
):
    """Temperature / top-k sampling (`temperature=0` is greedy) -> (tokens [B, L], scores [B])."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    eos_id, start_id = _ids(model, eos_id, start_id)
    graphdef, state = nnx.split(model)
    rng = jax.random.key(0) if rng is None else rng
    return _sample_jit(
        graphdef,
        state,
        _encoder_batch(batch),
        rng,
        jnp.float32(max(temperature, 1e-6)),
        jnp.int32(eos_id),
        jnp.int32(start_id),
        max_len=max_decode_len,
        greedy=temperature == 0.0,
        top_k=int(top_k),
    )


def greedy_decode(
    model, batch, *, max_decode_len: int, eos_id: int | None = None, start_id: int | None = None
):
    """Greedy decoding (= T5X beam search with one beam) -> (tokens [B, L], scores [B])."""
    return sample_decode(
        model,
        batch,
        None,
        max_decode_len=max_decode_len,
        temperature=0.0,
        eos_id=eos_id,
        start_id=start_id,
    )


# --------------------------------------------------------------------------- beam search


def brevity_penalty(length, alpha: float):
    """T5X / GNMT length penalty `((5 + length) / 6) ** alpha`."""
    return ((5.0 + jnp.asarray(length, jnp.float32)) / 6.0) ** alpha


def _gather_beams(x, idx, b, k):
    """`x [B*K, ...]`, `idx [B, K']` -> `[B*K', ...]` (rows of the chosen beams)."""
    x = x.reshape(b, k, *x.shape[1:])
    y = jnp.take_along_axis(x, idx.reshape(b, -1, *([1] * (x.ndim - 2))), axis=1)
    return y.reshape(b * idx.shape[1], *x.shape[2:])


@functools.partial(jax.jit, static_argnums=(0,), static_argnames=("max_len", "num_beams"))
def _beam_jit(graphdef, state, batch, alpha, eos_id, start_id, *, max_len, num_beams):
    model = nnx.merge(graphdef, state)
    k = num_beams
    encoded = model.encode(batch, deterministic=True)
    mask = model.encoder_mask(batch)
    b = encoded.shape[0]
    cache = model.init_cache(jnp.repeat(encoded, k, 0), jnp.repeat(mask, k, 0), max_len)
    # Only the first beam is live at the start, so the first step does not pick duplicates.
    alive_logp = jnp.tile(jnp.array([0.0] + [NEG] * (k - 1), jnp.float32), (b, 1))
    max_pen = brevity_penalty(max_len, alpha)

    def cond(c):
        i, _, alive_logp, _, fin_scores, fin_flags, _ = c
        best_alive = alive_logp[:, 0] / max_pen
        worst_fin = jnp.where(jnp.all(fin_flags, -1), jnp.min(fin_scores, -1), NEG)
        return (i < max_len) & ~jnp.all(worst_fin >= best_alive)

    def body(c):
        i, alive_seqs, alive_logp, fin_seqs, fin_scores, fin_flags, cache = c
        cur = jnp.where(i == 0, start_id, alive_seqs[:, :, jnp.maximum(i - 1, 0)]).reshape(-1)
        logits, cache = model.decode_step(cur, cache, i)
        v = logits.shape[-1]
        logp = jax.nn.log_softmax(logits, axis=-1).reshape(b, k, v)
        cand = (alive_logp[:, :, None] + logp).reshape(b, k * v)
        vals, idx = jax.lax.top_k(cand, 2 * k)
        beam, tok = idx // v, (idx % v).astype(jnp.int32)
        seqs = jnp.take_along_axis(alive_seqs, beam[:, :, None], axis=1)
        seqs = jax.lax.dynamic_update_slice_in_dim(seqs, tok[:, :, None], i, axis=2)
        is_eos = tok == eos_id
        # Finished candidates enter the finished pool with a length-penalized score.
        new_fin = jnp.where(is_eos, vals / brevity_penalty(i + 1, alpha), NEG)
        all_scores = jnp.concatenate([fin_scores, new_fin], axis=1)
        all_seqs = jnp.concatenate([fin_seqs, seqs], axis=1)
        all_flags = jnp.concatenate([fin_flags, is_eos], axis=1)
        fin_scores, top = jax.lax.top_k(all_scores, k)
        fin_seqs = jnp.take_along_axis(all_seqs, top[:, :, None], axis=1)
        fin_flags = jnp.take_along_axis(all_flags, top, axis=1)
        # The best k candidates that did not end continue.
        alive_vals, keep = jax.lax.top_k(jnp.where(is_eos, NEG, vals), k)
        alive_seqs = jnp.take_along_axis(seqs, keep[:, :, None], axis=1)
        src_beam = jnp.take_along_axis(beam, keep, axis=1)
        cache = {
            **cache,
            "self": jax.tree.map(lambda x: _gather_beams(x, src_beam, b, k), cache["self"]),
        }
        return i + 1, alive_seqs, alive_vals, fin_seqs, fin_scores, fin_flags, cache

    zeros = jnp.zeros((b, k, max_len), jnp.int32)
    init = (
        jnp.int32(0),
        zeros,
        alive_logp,
        zeros,
        jnp.full((b, k), NEG, jnp.float32),
        jnp.zeros((b, k), bool),
        cache,
    )
    _, alive_seqs, alive_logp, fin_seqs, fin_scores, fin_flags, _ = jax.lax.while_loop(
        cond, body, init
    )
    # A batch row with no finished beam returns its alive beams (as T5X does).
    any_fin = jnp.any(fin_flags, axis=1)
    seqs = jnp.where(any_fin[:, None, None], fin_seqs, alive_seqs)
    scores = jnp.where(any_fin[:, None], fin_scores, alive_logp / max_pen)
    return seqs, scores


def beam_search(
    model,
    batch,
    *,
    max_decode_len: int,
    num_beams: int = 4,
    alpha: float = 0.6,
    eos_id: int | None = None,
    start_id: int | None = None,
):
    """Beam search -> (tokens [B, num_beams, L] best first, length-penalized scores [B, K])."""
    if num_beams < 1:
        raise ValueError(f"num_beams must be >= 1, got {num_beams}")
    eos_id, start_id = _ids(model, eos_id, start_id)
    graphdef, state = nnx.split(model)
    return _beam_jit(
        graphdef,
        state,
        _encoder_batch(batch),
        jnp.float32(alpha),
        jnp.int32(eos_id),
        jnp.int32(start_id),
        max_len=max_decode_len,
        num_beams=num_beams,
    )
