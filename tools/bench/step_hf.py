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
    if a.model == "pix2struct":
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


def patch_fn(max_patches: int):
    """HF's Pix2Struct patch extraction of one RGB image (PIL + NumPy)."""
    from transformers.models.pix2struct.image_processing_pil_pix2struct import (
        Pix2StructImageProcessorPil,
    )

    proc = Pix2StructImageProcessorPil()
    return lambda img: proc(images=img, max_patches=max_patches, return_tensors="np")
