"""Decoding invariants on a tiny T5: greedy = argmax of teacher forcing, EOS stop, scores,
beam search (1 beam = greedy, more beams never worse), top-k sampling."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from chartjax.models import decoding, t5, tiny

L = 8


@functools.partial(jax.jit, static_argnums=0)
def _logits(graphdef, state, batch):
    return nnx.merge(graphdef, state)(batch, deterministic=True)


@pytest.fixture(scope="module")
def setup():
    model = t5.build(tiny.tiny_t5(), 5)
    enc = np.random.default_rng(0).integers(2, 128, (3, 7)).astype(np.int32)
    enc[2, 4:] = 0
    return model, {"encoder_input_tokens": jnp.asarray(enc)}


def _teacher_logp(model, batch, seqs, start=0):
    """Log-probabilities [B, L, V] of the model when fed `seqs` shifted right."""
    seqs = np.asarray(seqs)
    dec_in = np.concatenate([np.full((seqs.shape[0], 1), start), seqs[:, :-1]], 1)
    b = {
        **batch,
        "decoder_input_tokens": jnp.asarray(dec_in, jnp.int32),
        "decoder_target_tokens": jnp.ones(seqs.shape, jnp.int32),
    }  # no target padding mask
    return np.asarray(jax.nn.log_softmax(_logits(*nnx.split(model), b), -1))


@pytest.fixture(scope="module")
def free_run(setup):
    """Greedy run that never stops (eos_id -1): the reference path."""
    model, batch = setup
    toks, scores = decoding.greedy_decode(model, batch, max_decode_len=L, eos_id=-1)
    return np.asarray(toks), np.asarray(scores)


@pytest.mark.slow
def test_greedy_is_argmax_of_teacher_forcing_and_scores_are_logprobs(setup, free_run):
    model, batch = setup
    toks, scores = free_run
    logp = _teacher_logp(model, batch, toks)
    np.testing.assert_array_equal(logp.argmax(-1), toks)
    picked = np.take_along_axis(logp, toks[..., None], -1)[..., 0]
    np.testing.assert_allclose(scores, picked.sum(-1), rtol=1e-5, atol=1e-5)


def test_greedy_stops_at_eos_and_pads_with_zero(setup, free_run):
    model, batch = setup
    toks, _ = free_run
    eos = int(toks[0, 3])
    stopped, _ = decoding.greedy_decode(model, batch, max_decode_len=L, eos_id=eos)
    stopped = np.asarray(stopped)
    for row_free, row in zip(toks, stopped):
        hits = np.flatnonzero(row_free == eos)
        end = hits[0] + 1 if hits.size else L
        np.testing.assert_array_equal(row[:end], row_free[:end])
        assert not row[end:].any()
    assert (stopped == eos).any()


@pytest.mark.slow
def test_beam_search_one_beam_without_eos_equals_greedy(setup, free_run):
    model, batch = setup
    b_toks, b_scores = decoding.beam_search(
        model, batch, max_decode_len=L, num_beams=1, alpha=0.0, eos_id=-1
    )
    np.testing.assert_array_equal(np.asarray(b_toks)[:, 0], free_run[0])
    np.testing.assert_allclose(np.asarray(b_scores)[:, 0], free_run[1], rtol=1e-5)


@pytest.mark.slow
def test_beam_search_finished_hypotheses_and_length_penalty(setup):
    """With EOS, a finished hypothesis can beat every longer one (unlike greedy); its score is its
    log-probability (EOS included) divided by the brevity penalty of its length."""
    model, batch = setup
    toks, scores = decoding.beam_search(model, batch, max_decode_len=L, num_beams=4, alpha=0.6)
    toks, scores = np.asarray(toks)[:, 0], np.asarray(scores)[:, 0]
    logp = _teacher_logp(model, batch, toks)
    for row, tok, sc, lp in zip(range(3), toks, scores, logp):
        hits = np.flatnonzero(tok == 1)
        n = hits[0] + 1 if hits.size else L
        assert not tok[n:].any(), row
        total = np.take_along_axis(lp[:n], tok[:n, None], -1).sum()
        np.testing.assert_allclose(sc, total / ((5 + n) / 6) ** 0.6, rtol=1e-5, atol=1e-5)
    assert (toks == 1).any()  # at least one row ended with EOS


def test_beam_search_scores_and_never_worse_than_greedy(setup, free_run):
    model, batch = setup
    toks, scores = decoding.beam_search(
        model, batch, max_decode_len=L, num_beams=4, alpha=0.0, eos_id=-1
    )
    toks, scores = np.asarray(toks), np.asarray(scores)
    assert toks.shape == (3, 4, L)
    assert np.all(np.diff(scores, axis=1) <= 1e-6)  # best first
    assert np.all(scores[:, 0] >= free_run[1] - 1e-5)
    logp = _teacher_logp(model, batch, toks[:, 0])
    picked = np.take_along_axis(logp, toks[:, 0, :, None], -1)[..., 0].sum(-1)
    np.testing.assert_allclose(scores[:, 0], picked, rtol=1e-5, atol=1e-5)


def test_beam_length_penalty_formula():
    np.testing.assert_allclose(float(decoding.brevity_penalty(7, 0.6)), 2.0**0.6)
    assert float(decoding.brevity_penalty(3, 0.0)) == 1.0


@pytest.mark.slow
def test_sampling_top_k(setup, free_run):
    model, batch = setup
    k1, _ = decoding.sample_decode(
        model, batch, jax.random.key(3), max_decode_len=L, top_k=1, temperature=0.7, eos_id=-1
    )
    np.testing.assert_array_equal(np.asarray(k1), free_run[0])
    s1, sc1 = decoding.sample_decode(
        model, batch, jax.random.key(4), max_decode_len=L, top_k=3, temperature=2.0, eos_id=-1
    )
    s2, _ = decoding.sample_decode(
        model, batch, jax.random.key(4), max_decode_len=L, top_k=3, temperature=2.0, eos_id=-1
    )
    s1 = np.asarray(s1)
    np.testing.assert_array_equal(s1, np.asarray(s2))
    logp = _teacher_logp(model, batch, s1)
    top3 = np.argsort(-logp, -1)[..., :3]
    assert np.all((top3 == s1[..., None]).any(-1))
    picked = np.take_along_axis(logp, s1[..., None], -1)[..., 0].sum(-1)
    np.testing.assert_allclose(np.asarray(sc1), picked, rtol=1e-5, atol=1e-5)
    assert not np.array_equal(s1, free_run[0])  # temperature 2 over 3 tokens departs from greedy
    with pytest.raises(ValueError, match="temperature"):
        decoding.sample_decode(model, batch, max_decode_len=L, temperature=-1.0)
