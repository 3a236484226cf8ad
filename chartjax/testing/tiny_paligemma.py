"""Tiny random PaliGemma checkpoints built and saved by transformers itself (nothing is
downloaded), and inputs laid out as `PaliGemmaProcessor` lays them out, for the parity tests and
benchmarks.

`write(out_dir, text="gemma" | "gemma2")`: a `PaliGemmaForConditionalGeneration` (eager
attention) with a 2-layer SigLIP (16x16 images, 4x4 patches: 16 image tokens) and a Gemma
(multi-query) or Gemma 2 (grouped-query, 3 layers: sliding, full, sliding; a window of 4 tokens,
shorter than any test sequence; soft-caps small enough to bend the logits) decoder. Every weight is
redrawn from normal(0, `std`) (norm weights included), so that no layer sits at HF's
near-identity init and every term of the forward pass shows in the logits.
"""

from __future__ import annotations

import numpy as np

IMAGE_TOKEN = 100
VOCAB = 128
IMAGE_SIZE, PATCH = 16, 4
NUM_IMAGE_TOKENS = (IMAGE_SIZE // PATCH) ** 2
BOS, NEWLINE = 2, 108

VISION = dict(
    model_type="siglip_vision_model",
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    image_size=IMAGE_SIZE,
    patch_size=PATCH,
    num_channels=3,
    vision_use_head=False,
)
TEXT = {
    "gemma": dict(
        model_type="gemma",
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=8,
        vocab_size=VOCAB,
    ),
    "gemma2": dict(
        model_type="gemma2",
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        vocab_size=VOCAB,
        sliding_window=4,
        query_pre_attn_scalar=16,
        attn_logit_softcapping=2.0,
        final_logit_softcapping=3.0,
    ),
}


def hf_model(text: str = "gemma", *, seed: int = 0, std: float = 0.2):
    """The random HF model (eval mode, float32, eager attention)."""
    import torch
    from transformers import PaliGemmaConfig, PaliGemmaForConditionalGeneration

    cfg = PaliGemmaConfig(
        vision_config=dict(VISION),
        text_config=dict(TEXT[text]),
        image_token_index=IMAGE_TOKEN,
        projection_dim=TEXT[text]["hidden_size"],
        vocab_size=VOCAB,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = PaliGemmaForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, std)
    return model


def write(out_dir: str, text: str = "gemma", *, seed: int = 0) -> str:
    """Save the tiny model of `hf_model` to `out_dir` (save_pretrained); returns out_dir."""
    hf_model(text, seed=seed).save_pretrained(out_dir)
    return out_dir


def inputs(seed: int = 0) -> dict[str, np.ndarray]:
    """Two examples as PaliGemmaProcessor lays them out (image tokens, `<bos>` + prefix + `\\n`,
    suffix), the second with a shorter prefix and right padding: `pixel_values` NCHW in [-1, 1]
    (HF's layout), `input_ids`, `token_type_ids` (0 image + prefix, 1 suffix), `attention_mask`.
    Ids avoid the image token and `<pad>`."""
    rng = np.random.default_rng(seed)
    rows, types, masks = [], [], []
    for prefix_len, suffix_len, pad in ((5, 6, 0), (2, 7, 2)):
        prefix = [BOS, *rng.integers(3, IMAGE_TOKEN, prefix_len), NEWLINE]
        suffix = list(rng.integers(3, IMAGE_TOKEN, suffix_len))
        ids = [IMAGE_TOKEN] * NUM_IMAGE_TOKENS + prefix + suffix + [0] * pad
        n_prefix = NUM_IMAGE_TOKENS + len(prefix)
        rows.append(ids)
        types.append([0] * n_prefix + [1] * (len(ids) - n_prefix))
        masks.append([1] * (len(ids) - pad) + [0] * pad)
    pixels = rng.uniform(-1, 1, (2, 3, IMAGE_SIZE, IMAGE_SIZE)).astype(np.float32)
    return {
        "pixel_values": pixels,
        "input_ids": np.asarray(rows, np.int32),
        "token_type_ids": np.asarray(types, np.int32),
        "attention_mask": np.asarray(masks, np.int32),
    }


def chartjax_batch(hf_inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The same inputs in chartjax's PaliGemma batch layout (chartjax/models/paligemma: NHWC
    `image`)."""
    out = {k: v for k, v in hf_inputs.items() if k != "pixel_values"}
    out["image"] = np.transpose(hf_inputs["pixel_values"], (0, 2, 3, 1))
    return out
