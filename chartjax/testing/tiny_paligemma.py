"""Tiny random PaliGemma checkpoints built and saved by transformers itself (nothing is
downloaded), and inputs laid out as `PaliGemmaProcessor` lays them out, for the parity tests and
benchmarks.

`write(out_dir, text="gemma" | "gemma2")`: a `PaliGemmaForConditionalGeneration` (eager
attention) with a 2-layer SigLIP (16x16 images, 4x4 patches: 16 image tokens) and a Gemma
(multi-query) or Gemma 2 (grouped-query, 3 layers: sliding, full, sliding; a window of 4 tokens,
shorter than any test sequence; soft-caps small enough to bend the logits) decoder. Every weight is
redrawn from normal(0, `std`) (norm weights included), so that no layer sits at HF's
near-identity init and every term of the forward pass shows in the logits.

`write(..., processor=True)` saves a `PaliGemmaProcessor` beside the model, as the Hub's folders
carry one: a tiny Gemma tokenizer made offline (`sentencepiece_model`: a SentencePiece BPE trained
here with Gemma's settings: `<pad>` 0, `<eos>` 1, `<bos>` 2, `<unk>` 3, `<mask>` 4, byte
fallback, digits split, no dummy prefix, spaces kept) loaded as transformers' `GemmaTokenizer`, to
which the processor adds `<image>` (id `PROCESSOR_IMAGE_TOKEN`) and the 1,152 `<locNNNN>` /
`<segNNN>` tokens; a SiglipImageProcessor (PIL backend, bicubic, [-1, 1]) at 16x16 with 16 image
tokens. The folder then holds tokenizer.json, tokenizer_config.json and processor_config.json
(transformers 5's layout) and the SentencePiece `tokenizer.model` (as the Hub's do), and the
model's vocabulary (`PROCESSOR_VOCAB`) covers every id the tokenizer has; its weights are drawn
so that greedy decoding varies (`PROCESSOR_STD`).
"""

from __future__ import annotations

import numpy as np

IMAGE_TOKEN = 100
VOCAB = 128
IMAGE_SIZE, PATCH = 16, 4
NUM_IMAGE_TOKENS = (IMAGE_SIZE // PATCH) ** 2
BOS, NEWLINE = 2, 108
# With a processor (`write(..., processor=True)`): the SentencePiece pieces, `<image>` right after
# them (where PaliGemmaProcessor adds it), and a vocabulary over the 1,152 loc/seg tokens after it.
SPM_PIECES = 320
PROCESSOR_IMAGE_TOKEN = SPM_PIECES
PROCESSOR_VOCAB = 1480
# Their weights: larger than the parity models', the token embeddings smaller, so that greedy
# decoding writes varied tokens (at std 0.2 a random model repeats one token, and Gemma 2's small
# soft-caps saturate into ties); the top two logits of a step stay >= 1e-3 apart on the tests'
# prompts, far above the 1e-5 that chartjax and HF differ by.
PROCESSOR_STD, PROCESSOR_EMBED_STD = 0.5, 0.05
# What the tiny SentencePiece model is trained on: chart questions, answers and captions.
TOKENIZER_TEXTS = (
    "What is the value of the blue bar in 2019?",
    "Which year had the highest revenue, and by how much did it exceed 2015?",
    "How many categories are above 50% in the chart?",
    "The chart shows sales from 2010 to 2020 in millions of dollars.",
    "The red line peaks at 3.5 million in March.",
    "answer en What is the difference between the two largest segments?",
    "caption en",
    "Is the median of the green bars greater than the average of the orange bars? Yes",
    "Coal is the second-lowest source of energy for electricity production.",
    "Revenue fell by 3.2 billion in Q4 (from 1,200 to 3,400).",
)

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


def hf_model(
    text: str = "gemma",
    *,
    seed: int = 0,
    std: float = 0.2,
    vocab: int = VOCAB,
    image_token: int = IMAGE_TOKEN,
    embed_std: float | None = None,
):
    """The random HF model (eval mode, float32, eager attention); `embed_std`: the token
    embeddings' own std (default `std`)."""
    import torch
    from transformers import PaliGemmaConfig, PaliGemmaForConditionalGeneration

    cfg = PaliGemmaConfig(
        vision_config=dict(VISION),
        text_config={**TEXT[text], "vocab_size": vocab},
        image_token_index=image_token,
        projection_dim=TEXT[text]["hidden_size"],
        vocab_size=vocab,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = PaliGemmaForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, std)
        if embed_std is not None:
            model.get_input_embeddings().weight.normal_(0.0, embed_std)
    return model


def write(out_dir: str, text: str = "gemma", *, seed: int = 0, processor: bool = False) -> str:
    """Save the tiny model of `hf_model` to `out_dir` (save_pretrained); returns out_dir.
    `processor`: with the processor of `hf_processor` (and a vocabulary that covers it)."""
    if not processor:
        hf_model(text, seed=seed).save_pretrained(out_dir)
        return out_dir
    proc = hf_processor(out_dir)
    assert proc.image_token_id == PROCESSOR_IMAGE_TOKEN and len(proc.tokenizer) <= PROCESSOR_VOCAB
    proc.save_pretrained(out_dir)
    model = hf_model(
        text,
        seed=seed,
        std=PROCESSOR_STD,
        embed_std=PROCESSOR_EMBED_STD,
        vocab=PROCESSOR_VOCAB,
        image_token=PROCESSOR_IMAGE_TOKEN,
    )
    model.save_pretrained(out_dir)
    return out_dir


def sentencepiece_model() -> bytes:
    """The serialized tiny Gemma-style SentencePiece BPE model (see the module docstring);
    the same bytes on every call (one thread)."""
    import io

    import sentencepiece as spm

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TOKENIZER_TEXTS * 4),
        model_writer=out,
        model_type="bpe",
        vocab_size=SPM_PIECES,
        byte_fallback=True,
        split_digits=True,
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        allow_whitespace_only_pieces=True,
        normalization_rule_name="identity",
        character_coverage=1.0,
        pad_id=0,
        eos_id=1,
        bos_id=2,
        unk_id=3,
        pad_piece="<pad>",
        eos_piece="<eos>",
        bos_piece="<bos>",
        unk_piece="<unk>",
        user_defined_symbols=["<mask>"],
        num_threads=1,
        minloglevel=2,
    )
    return out.getvalue()


def hf_processor(folder: str):
    """transformers' `PaliGemmaProcessor` over the tiny tokenizer (its `tokenizer.model` is
    written into `folder`, which GemmaTokenizer is loaded from) and a 16x16 SigLIP image
    processor (PIL backend)."""
    import os

    from transformers import GemmaTokenizer, PaliGemmaProcessor
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.model"), "wb") as f:
        f.write(sentencepiece_model())
    tokenizer = GemmaTokenizer.from_pretrained(folder)
    images = SiglipImageProcessorPil(
        size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        image_seq_length=NUM_IMAGE_TOKENS,
        resample=3,  # bicubic, as PaliGemma's preprocessor_config.json
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    return PaliGemmaProcessor(image_processor=images, tokenizer=tokenizer)


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
