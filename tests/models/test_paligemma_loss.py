"""The training side of PaliGemma (issue 42 item 1): the text batches of the prefix-LM tasks take
their image placeholders from the model (`with_image_tokens`), and big_vision's label smoothing
in `prefix_lm_loss`, against values computed here in NumPy from the same logits."""

from __future__ import annotations

import dataclasses
import types

import numpy as np

from chartjax.models import paligemma
from chartjax.testing import tiny_paligemma

CFG = paligemma.PaliGemmaConfig(
    vocab_size=tiny_paligemma.VOCAB,
    image_token_id=tiny_paligemma.IMAGE_TOKEN,
    emb_dim=16,
    num_heads=2,
    num_kv_heads=1,
    head_dim=8,
    mlp_dim=32,
    num_layers=1,
    vision_emb_dim=16,
    vision_num_heads=2,
    vision_mlp_dim=32,
    vision_num_layers=1,
    image_size=tiny_paligemma.IMAGE_SIZE,
    patch_size=tiny_paligemma.PATCH,
    dtype="float32",
)


def _batches():
    """tiny_paligemma's two examples in the model's layout, and as a task's text batch."""
    full = tiny_paligemma.chartjax_batch(tiny_paligemma.inputs(seed=1))
    n = tiny_paligemma.NUM_IMAGE_TOKENS
    text = {k: v[:, n:] for k, v in full.items() if k != "image"}
    return full, {"image": full["image"], **text}


def test_with_image_tokens_lays_out_a_text_batch_as_the_processor_does():
    full, text = _batches()
    out = paligemma.with_image_tokens(CFG, text)
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        np.testing.assert_array_equal(np.asarray(out[key]), full[key])
    assert out["image"] is text["image"]


class _Logits:
    """A stand-in model: fixed logits and a config (prefix_lm_loss reads nothing else). Its
    hidden states are the logits themselves and its output projection the identity, so the
    loss sees these logits at the positions it keeps (the text after the image tokens)."""

    def __init__(self, logits, cfg):
        self.logits, self.cfg = logits, cfg
        self.decoder = types.SimpleNamespace(logits=lambda h: h)

    def hidden_states(self, batch, *, deterministic):
        return self.logits


def test_label_smoothing_is_big_vision_s_per_token_cross_entropy():
    full, _ = _batches()
    s, v = 0.2, CFG.vocab_size
    logits = np.random.default_rng(0).normal(0, 3, (*full["input_ids"].shape, v))
    model = _Logits(logits.astype(np.float32), dataclasses.replace(CFG, label_smoothing=s))
    loss, aux = paligemma.prefix_lm_loss(model, full, deterministic=True)
    x = logits[:, :-1]
    m = x.max(-1, keepdims=True)
    logp = x - m - np.log(np.sum(np.exp(x - m), -1, keepdims=True))
    targets = full["input_ids"][:, 1:]
    weights = ((full["token_type_ids"] == 1) & (full["attention_mask"] == 1))[:, 1:]
    smoothed = np.where(np.eye(v)[targets] == 1.0, 1.0 - s, s / (v - 1))  # big_vision's off value
    want = np.sum(-np.sum(smoothed * logp, -1) * weights) / np.sum(weights)
    np.testing.assert_allclose(float(loss), want, rtol=1e-5)
    assert float(aux["num_tokens"]) == weights.sum() == 13  # the 6 + 7 suffix tokens
    # Against the plain cross-entropy of the same logits: smoothing moves the loss.
    plain, _ = paligemma.prefix_lm_loss(_Logits(model.logits, CFG), full, deterministic=True)
    want_plain = -np.sum(np.take_along_axis(logp, targets[..., None], -1)[..., 0] * weights)
    np.testing.assert_allclose(float(plain), want_plain / weights.sum(), rtol=1e-5)
    assert abs(float(plain) - float(loss)) > 0.1
