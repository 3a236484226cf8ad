"""T5 with OCR boxes (T5Config.box_embedding, models/t5/__init__.py): exactly the plain model at
zero init or with zero boxes, the boxes entering only through the encoder's input embeddings, in the
loss, greedy decoding, and HF checkpoint import (initialised, with a warning) / export (refused)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from chartjax.interop import hf
from chartjax.models import decoding, losses, t5, tiny

CFG = tiny.tiny_t5(num_encoder_layers=1, num_decoder_layers=1)


def _models():
    plain = t5.build(CFG, 0)
    boxed = t5.build(tiny.tiny_t5(num_encoder_layers=1, num_decoder_layers=1, box_embedding=True))
    # Same weights everywhere else (the box layer is created last, but copy to be sure).
    nnx.update(boxed, nnx.state(plain, nnx.Param))
    return plain, boxed


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(3, CFG.vocab_size, (2, 12)).astype(np.int32)
    tokens[1, 9:] = 0  # padding
    boxes = rng.uniform(0, 1, (2, 12, 4)).astype(np.float32)
    boxes[:, :3] = 0  # prefix tokens: no box
    targets = rng.integers(3, CFG.vocab_size, (2, 6)).astype(np.int32)
    dec_in = np.concatenate([np.zeros((2, 1), np.int32), targets[:, :-1]], axis=1)
    return {
        "encoder_input_tokens": jnp.asarray(tokens),
        "encoder_input_boxes": jnp.asarray(boxes),
        "decoder_input_tokens": jnp.asarray(dec_in),
        "decoder_target_tokens": jnp.asarray(targets),
    }


def _no_boxes(batch):
    return {k: v for k, v in batch.items() if k != "encoder_input_boxes"}


@functools.partial(jax.jit, static_argnums=0)
def _forward(graphdef, state, batch):
    return nnx.merge(graphdef, state)(batch, deterministic=True)


def _logits(model, batch):
    """Jitted: one compile per model structure and batch keys, not one per eager op."""
    return np.asarray(_forward(*nnx.split(model), batch))


@pytest.mark.slow
def test_zero_init_is_the_plain_model():
    plain, boxed = _models()
    kernel = boxed.box_embedding.kernel[...]
    assert kernel.shape == (4, CFG.emb_dim) and not np.asarray(kernel).any()
    assert boxed.box_embedding.bias is None
    batch = _batch()
    np.testing.assert_array_equal(_logits(boxed, batch), _logits(plain, _no_boxes(batch)))
    np.testing.assert_array_equal(
        _logits(boxed, _no_boxes(batch)), _logits(plain, _no_boxes(batch))
    )


def test_boxes_enter_only_through_the_encoder_input():
    plain, boxed = _models()
    w = np.random.default_rng(1).normal(0, 0.5, (4, CFG.emb_dim)).astype(np.float32)
    boxed.box_embedding.kernel[...] = jnp.asarray(w)
    batch = _batch()
    # Zero boxes add nothing at any weights (no bias).
    zero = batch | {"encoder_input_boxes": jnp.zeros_like(batch["encoder_input_boxes"])}
    np.testing.assert_array_equal(_logits(boxed, zero), _logits(plain, _no_boxes(batch)))
    # Nonzero boxes: the plain model's encoder on embeddings + boxes @ W, then its decoder.

    @nnx.jit
    def by_hand(plain, boxed, batch, w):
        emb = plain.token_embedder(batch["encoder_input_tokens"])
        x = emb + jnp.einsum("bsc,ce->bse", batch["encoder_input_boxes"], w)
        mask = batch["encoder_input_tokens"] > 0
        encoded = plain.encoder(x, mask, deterministic=True)
        want = plain.decoder(
            batch["decoder_input_tokens"],
            encoded,
            mask,
            batch["decoder_target_tokens"] > 0,
            deterministic=True,
            embedder=plain.token_embedder,
        )
        return boxed.encode(batch), encoded, want

    got_encoded, encoded, want = by_hand(plain, boxed, batch, jnp.asarray(w))
    np.testing.assert_allclose(np.asarray(got_encoded), np.asarray(encoded), rtol=1e-6, atol=1e-6)
    got = _logits(boxed, batch)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-5)
    assert np.abs(got - _logits(plain, _no_boxes(batch))).max() > 1e-3


@pytest.mark.slow
def test_zero_init_still_learns_and_decoding_reads_boxes():
    _, boxed = _models()
    batch = _batch()

    def loss(m):
        return losses.seq2seq_loss(m, batch, deterministic=True)[0]

    grads = nnx.jit(nnx.grad(loss))(boxed)
    g = np.asarray(grads["box_embedding"]["kernel"][...])
    assert np.abs(g).max() > 0  # zero init is not stuck: d loss / d W = boxes^T . d loss / d x
    boxed.box_embedding.kernel[...] = jnp.asarray(
        np.random.default_rng(2).normal(0, 1.0, (4, CFG.emb_dim)), jnp.float32
    )
    _, with_boxes = decoding.greedy_decode(boxed, batch, max_decode_len=5)
    zero = batch | {"encoder_input_boxes": jnp.zeros_like(batch["encoder_input_boxes"])}
    _, without = decoding.greedy_decode(boxed, zero, max_decode_len=5)
    assert not np.allclose(np.asarray(with_boxes), np.asarray(without))


def test_boxes_without_the_layer_are_refused():
    plain, _ = _models()
    with pytest.raises(ValueError, match="T5Config.box_embedding = True"):
        plain(_batch(), deterministic=True)


def test_hf_import_initialises_and_export_refuses(tmp_path):
    plain, boxed = _models()
    hf.save(plain, str(tmp_path / "plain"))
    with pytest.warns(UserWarning, match="no box_embedding.kernel .*initialised to zeros"):
        loaded, cfg = hf.load(str(tmp_path / "plain"), box_embedding=True)
    assert cfg.box_embedding and not np.asarray(loaded.box_embedding.kernel[...]).any()
    batch = _batch()
    np.testing.assert_array_equal(_logits(loaded, batch), _logits(plain, _no_boxes(batch)))
    # Without the option an HF checkpoint loads as before, with no box layer.
    assert hf.load(str(tmp_path / "plain"))[0].box_embedding is None
    with pytest.raises(hf.NotInHF, match="box_embedding.kernel: HF T5 has no input for OCR"):
        hf.save(boxed, str(tmp_path / "boxed"))
    assert not (tmp_path / "boxed").exists()  # nothing half-written


def test_init_checkpoint_fills_the_box_layer(tmp_path):
    from chartjax import init_checkpoint

    plain, _ = _models()
    hf.save(plain, str(tmp_path / "plain"))
    box_cfg = tiny.tiny_t5(num_encoder_layers=1, num_decoder_layers=1, box_embedding=True)

    def model_fn(rngs=None):
        return t5.build(box_cfg, rngs if rngs is not None else 0)

    with pytest.warns(UserWarning, match="box_embedding"):
        params = init_checkpoint.load_params("hf", str(tmp_path / "plain"), model_fn)
    abstract = nnx.to_pure_dict(nnx.state(nnx.eval_shape(lambda: model_fn(nnx.Rngs(0))), nnx.Param))
    init_checkpoint.check_shapes(params, abstract, "test")  # every name and shape
    assert not np.asarray(params["box_embedding"]["kernel"]).any()
    want = nnx.to_pure_dict(nnx.state(plain, nnx.Param))
    jax.tree.map(np.testing.assert_array_equal, {k: params[k] for k in want}, want)


def test_t5x_import_initialises_and_round_trips(tmp_path):
    from chartjax.interop import t5x

    plain, boxed = _models()
    t5x.save(plain, str(tmp_path / "plain"))
    _, fresh = _models()
    fresh.box_embedding.kernel[...] = jnp.ones((4, CFG.emb_dim))
    with pytest.warns(UserWarning, match="no box_embedding/kernel .*initialised to zeros"):
        t5x.load_params(fresh, str(tmp_path / "plain"))
    assert not np.asarray(fresh.box_embedding.kernel[...]).any()
    batch = _batch()
    np.testing.assert_array_equal(_logits(fresh, batch), _logits(plain, _no_boxes(batch)))
    # A T5X checkpoint written by chartjax keeps a trained box layer.
    w = np.random.default_rng(3).normal(0, 1.0, (4, CFG.emb_dim)).astype(np.float32)
    boxed.box_embedding.kernel[...] = jnp.asarray(w)
    t5x.save(boxed, str(tmp_path / "boxed"))
    _, back = _models()
    t5x.load_params(back, str(tmp_path / "boxed"))
    np.testing.assert_array_equal(np.asarray(back.box_embedding.kernel[...]), w)
