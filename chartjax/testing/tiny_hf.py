"""Tiny HuggingFace checkpoint directories for tests and benchmarks: weights, config.json and
the family's own tokenizer files, trained here on a few sentences (nothing is downloaded).

* DeBERTa-v3: a SentencePiece unigram `spm.model` with DeBERTa-v3's ids ([PAD] 0, [CLS] 1,
  [SEP] 2, [UNK] 3; `[MASK]` is added by the HF tokenizer after the pieces).
* TAPAS: a WordPiece `vocab.txt` (BERT's specials plus TAPAS's `[EMPTY]`).
* BART: a byte-level BPE `vocab.json` + `merges.txt` trained with `tokenizers` (`<s>` 0,
  `<pad>` 1, `</s>` 2, `<unk>` 3, `<mask>` last).

Each checkpoint is written by the chartjax HF writers (chartjax/interop/hf.py), so the files are
the HF layouts the converters read.
"""

from __future__ import annotations

import json
import os
import re

# Words of claims, DePlot tables and chart summaries, with numbers, unicode and separators.
TEXTS = (
    "The chart shows that 12.5% of users in 2019 were under 25 years old.",
    "Coal is the second-lowest source of energy for electricity production in Romania.",
    "Hydro contributes 36% and nuclear 19%, gas 10% and other sources 2%.",
    "TITLE | Number of users in millions | Year | Value | Share of respondents",
    "Characteristic | 2018 | 2019 | 2020 | 2021 | Q1 | Q2 | Q3 | Q4",
    "Größe café naïve São Paulo Zürich – “quotes” € £ ¥ 日本 東京 −3.2 ½",
    "translate Chart to Text: <s> the number of users rose from 1,200 to 3,400 between years",
    "In 2020, revenue reached $4.5 billion, up 7 percent from the previous year.",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z 0 1 2 3 4 5 6 7 8 9 . , ( ) - : ; ' ?",
)


def write_sentencepiece(out_dir: str, vocab_size: int = 200, texts=TEXTS) -> str:
    """`out_dir/spm.model` with DeBERTa-v3's special ids; returns the file."""
    import sentencepiece as spm

    os.makedirs(out_dir, exist_ok=True)
    prefix = os.path.join(out_dir, "spm")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(texts) * 20),
        model_prefix=prefix,
        vocab_size=vocab_size,
        model_type="unigram",
        pad_id=0,
        bos_id=1,
        eos_id=2,
        unk_id=3,
        pad_piece="[PAD]",
        bos_piece="[CLS]",
        eos_piece="[SEP]",
        unk_piece="[UNK]",
        character_coverage=1.0,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    os.remove(prefix + ".vocab")
    return prefix + ".model"


def write_wordpiece(out_dir: str, texts=TEXTS) -> str:
    """`out_dir/vocab.txt`: BERT/TAPAS specials, then the lower-cased words and characters of
    `texts` with their `##` continuations; returns the file."""
    os.makedirs(out_dir, exist_ok=True)
    words: dict[str, None] = {}
    for t in texts:
        for w in re.findall(r"\w+|[^\w\s]", t.lower()):
            words.setdefault(w, None)
            for ch in w:
                words.setdefault(ch, None)
                words.setdefault("##" + ch, None)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[EMPTY]"]
    path = os.path.join(out_dir, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(specials + [w for w in words if w not in specials]) + "\n")
    return path


def write_bpe(out_dir: str, vocab_size: int = 400, texts=TEXTS) -> str:
    """`out_dir/vocab.json` + `merges.txt` (BART's specials, `<mask>` last); returns out_dir."""
    from tokenizers import ByteLevelBPETokenizer

    os.makedirs(out_dir, exist_ok=True)
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(
        list(texts) * 20,
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
        show_progress=False,
    )
    tok.save_model(out_dir)
    vocab_file = os.path.join(out_dir, "vocab.json")
    with open(vocab_file, encoding="utf-8") as f:
        vocab = json.load(f)
    vocab["<mask>"] = len(vocab)
    with open(vocab_file, "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    return out_dir


def tokenizer_size(family: str, out_dir: str) -> int:
    """Ids the family's HF tokenizer uses for the files in `out_dir` (added tokens included)."""
    if family == "bart":
        from chartjax.data import bpe

        return bpe.BpeVocabulary(out_dir).vocab_size
    from chartjax.data import classifier_inputs

    return classifier_inputs.ClassifierTokenizer(out_dir, family, 8).vocab_size  # not cached


# One layer each: these models test wiring (files, tokenizers, loops), and tracing a layer is
# what the tests pay for; the parity tests of tests/models/ cover deeper configurations.
DEBERTA = dict(
    hidden_size=24,
    num_hidden_layers=1,
    num_attention_heads=3,
    intermediate_size=40,
    relative_attention=True,
    position_buckets=8,
    pos_att_type="p2c|c2p",
    share_att_key=True,
    norm_rel_ebd="layer_norm",
    position_biased_input=False,
    max_position_embeddings=64,
)
TAPAS = dict(
    hidden_size=24,
    num_hidden_layers=1,
    num_attention_heads=3,
    intermediate_size=40,
    max_position_embeddings=128,
    type_vocab_sizes=(3, 16, 32, 2, 16, 16, 10),
)
BART = dict(
    d_model=24,
    encoder_layers=1,
    decoder_layers=1,
    encoder_attention_heads=3,
    decoder_attention_heads=3,
    encoder_ffn_dim=40,
    decoder_ffn_dim=40,
    max_position_embeddings=128,
    forced_bos_token_id=0,
    forced_eos_token_id=2,
)
LABELS = {
    "deberta": ("entailment", "neutral", "contradiction"),  # the MNLI/ANLI heads' order
    "tapas": ("REFUTED", "ENTAILED"),
}


def randomize(model, seed: int) -> None:
    """Weights that make outputs depend on the input (HF's 0.02 init gives near-constant logits
    and decodes): unit-variance embeddings, fan-in-scaled kernels, LayerNorm near identity,
    small biases (BART's final_logits_bias too)."""
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    rng = np.random.default_rng(seed)
    state = nnx.state(model, nnx.Not(nnx.RngState))
    for path, var in nnx.to_flat_state(state):
        names = [str(p) for p in path]
        shape = tuple(var.shape)
        if any("norm" in n for n in names):
            base = 1.0 if names[-1] == "scale" else 0.0
            value = base + 0.1 * rng.standard_normal(shape)
        elif names[-1] == "embedding":
            value = rng.standard_normal(shape)
        elif len(shape) >= 2:
            value = rng.standard_normal(shape) / np.sqrt(np.prod(shape[:-1]))
        else:
            value = 0.1 * rng.standard_normal(shape)
        var.set_value(jnp.asarray(value, jnp.float32))
    nnx.update(model, state)


def tiny_checkpoint(
    family: str,
    out_dir: str,
    *,
    seed: int = 0,
    labels=None,
    dtype="float32",
    random_weights: bool = True,
    **overrides,
) -> str:
    """A random tiny HF checkpoint of `family` ("deberta", "tapas", "bart") with its tokenizer
    files in `out_dir` (config.json + model.safetensors); returns out_dir. `overrides` replace
    fields of the tiny config (the vocabulary size follows the tokenizer unless given);
    `random_weights`: `randomize` the weights (else HF's init)."""
    from chartjax.interop import hf
    from chartjax.models.post_ln import bart, deberta, tapas

    os.makedirs(out_dir, exist_ok=True)
    if family == "deberta":
        write_sentencepiece(out_dir)
    elif family == "tapas":
        write_wordpiece(out_dir)
    elif family == "bart":
        write_bpe(out_dir)
    else:
        raise ValueError(f"unknown family {family!r}")
    vocab = overrides.pop("vocab_size", None) or tokenizer_size(family, out_dir)
    if family == "bart":
        cfg = bart.BartConfig(vocab_size=vocab, dtype=dtype, **{**BART, **overrides})
        model = bart.build(cfg, seed)
    else:
        labels = tuple(labels or LABELS[family])
        base = DEBERTA if family == "deberta" else TAPAS
        mod = deberta if family == "deberta" else tapas
        config_cls = mod.DebertaConfig if family == "deberta" else mod.TapasConfig
        cfg = config_cls(
            vocab_size=vocab, num_labels=len(labels), dtype=dtype, **{**base, **overrides}
        )
        model = mod.build(cfg, seed)
    if random_weights:
        randomize(model, seed)
    hf.save(model, out_dir, labels=labels)
    return out_dir
