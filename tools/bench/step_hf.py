"""The HF transformers (PyTorch) counterparts of bench/step.py's timed calls, on its shapes.

Imported by step.py's `--compare-hf` only; torch and transformers are imported inside the
functions, so importing this module costs nothing where they are not installed.
"""

from __future__ import annotations

import os


def decode_fns(a, batch):
    """(decode_once, info) of the HF transformers model with the same shapes."""
    import torch
    import transformers

    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count() or 1)
    h, d_kv = a.hidden, a.hidden // a.heads
    if a.model == "paligemma":
        model = paligemma_model(a)
        inputs = {
            "pixel_values": torch.tensor(batch["pixel_values"]),
            "input_ids": torch.tensor(batch["input_ids"], dtype=torch.long),
            "attention_mask": torch.ones(batch["input_ids"].shape, dtype=torch.long),
            "token_type_ids": torch.zeros(batch["input_ids"].shape, dtype=torch.long),
        }
    elif a.model == "pix2struct":
        cfg = transformers.Pix2StructConfig(
            text_config=dict(
                vocab_size=a.vocab,
                hidden_size=h,
                d_kv=d_kv,
                d_ff=a.mlp,
                num_layers=a.layers,
                num_heads=a.heads,
                dropout_rate=0.0,
            ),
            vision_config=dict(
                hidden_size=h,
                patch_embed_hidden_size=768,
                d_ff=a.mlp,
                d_kv=d_kv,
                num_hidden_layers=a.layers,
                num_attention_heads=a.heads,
                dropout_rate=0.0,
            ),
        )
        model = transformers.Pix2StructForConditionalGeneration(cfg)
        enc = torch.tensor(batch["encoder_input_tokens"])
        inputs = {"flattened_patches": enc, "attention_mask": enc[..., 0] > 0}
    else:
        cfg = transformers.T5Config(
            vocab_size=a.vocab,
            d_model=h,
            d_kv=d_kv,
            d_ff=a.mlp,
            num_layers=a.layers,
            num_heads=a.heads,
            dropout_rate=0.0,
            feed_forward_proj="gated-gelu",
            decoder_start_token_id=0,
        )
        model = transformers.T5ForConditionalGeneration(cfg)
        ids = torch.tensor(batch["encoder_input_tokens"], dtype=torch.long)
        inputs = {"input_ids": ids, "attention_mask": ids > 0}

    def decode_once():
        if model.training:
            model.eval()
        with torch.no_grad():
            model.generate(
                **inputs,
                max_new_tokens=a.decode_tokens,
                min_new_tokens=a.decode_tokens,
                do_sample=False,
                num_beams=1,
            )

    def beam_once():
        if model.training:
            model.eval()
        with torch.no_grad():
            model.generate(
                **inputs,
                max_new_tokens=a.decode_tokens,
                min_new_tokens=a.decode_tokens,
                do_sample=False,
                num_beams=a.beams,
                length_penalty=0.6,  # chartjax's alpha; the work is the same either way
            )

    return (
        decode_once,
        {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "torch_threads": torch.get_num_threads(),
            "beam_once": beam_once,
        },
    )


def paligemma_model(a):
    """HF's PaliGemma (Gemma decoder, multi-query) of step.py's `--model paligemma` shapes,
    float32, HF's own init and attention (sdpa)."""
    import transformers

    heads = dict(num_attention_heads=a.heads, intermediate_size=a.mlp, hidden_size=a.hidden)
    cfg = transformers.PaliGemmaConfig(
        vision_config=dict(
            model_type="siglip_vision_model",
            num_hidden_layers=a.layers,
            image_size=a.image_size,
            patch_size=a.patch,
            vision_use_head=False,
            **heads,
        ),
        text_config=dict(
            model_type="gemma",
            num_hidden_layers=a.layers,
            num_key_value_heads=1,
            head_dim=a.hidden // a.heads,
            vocab_size=a.vocab,
            **heads,
        ),
        image_token_index=a.vocab - 1,
        projection_dim=a.hidden,
        vocab_size=a.vocab,
    )
    return transformers.PaliGemmaForConditionalGeneration(cfg)


def paligemma_train_fn(a, batch):
    """One HF training step (forward with the suffix as labels, backward, AdamW step, grads
    zeroed) on step.py's training batch: what HF Trainer runs per step, without its loop."""
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count() or 1)
    model = paligemma_model(a).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    ids = torch.tensor(batch["train_ids"], dtype=torch.long)
    types = torch.tensor(batch["train_types"], dtype=torch.long)
    inputs = {
        "pixel_values": torch.tensor(batch["pixel_values"]),
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": types,
        "labels": torch.where(types == 1, ids, torch.full_like(ids, -100)),
    }

    def step():
        loss = model(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def patch_fn(max_patches: int):
    """HF's Pix2Struct patch extraction of one RGB image (PIL + NumPy)."""
    from transformers.models.pix2struct.image_processing_pil_pix2struct import (
        Pix2StructImageProcessorPil,
    )

    proc = Pix2StructImageProcessorPil()
    return lambda img: proc(images=img, max_patches=max_patches, return_tensors="np")
