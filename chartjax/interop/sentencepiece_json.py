"""A SentencePiece unigram model as a HuggingFace `tokenizer.json` that encodes and decodes as
SentencePiece does, byte fallback included (a newline is the piece `<0x0A>` both ways).

transformers 5 loads a Pix2Struct checkpoint's tokenizer from `tokenizer.json` only, and its own
T5Tokenizer, built from `spiece.model`, has no byte fallback (newlines become spaces, other
uncovered characters `<unk>`). The file is assembled with the `tokenizers` library from the
model's own settings: its normalizer (the precompiled character map, extra-space removal,
whitespace escaped as "▁", the dummy prefix), the pieces with their scores, user-defined pieces
kept whole, and T5's post-processing (EOS after the text). This is the normalization order of
SentencePiece, as transformers' `SpmConverter` also reproduces it.
"""

from __future__ import annotations

# SentencePiece piece types (sentencepiece_model.proto).
_UNIGRAM = 1
_USER_DEFINED = 4


def build(model_file: str):
    """The `tokenizers.Tokenizer` of SentencePiece model `model_file` (T5 conventions: pad 0,
    EOS 1, UNK 2), adding EOS to every encoded text. ValueError: not a unigram model."""
    import re

    from sentencepiece import sentencepiece_model_pb2
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    proto = sentencepiece_model_pb2.ModelProto()
    with open(model_file, "rb") as f:
        proto.ParseFromString(f.read())
    if proto.trainer_spec.model_type != _UNIGRAM:
        raise ValueError(f"{model_file}: not a unigram SentencePiece model")
    spec = proto.normalizer_spec
    vocab = [(p.piece, p.score) for p in proto.pieces]
    byte_fallback = proto.trainer_spec.byte_fallback
    tok = Tokenizer(
        models.Unigram(vocab, unk_id=proto.trainer_spec.unk_id, byte_fallback=byte_fallback)
    )

    norm = []
    if spec.precompiled_charsmap:
        norm.append(normalizers.Precompiled(spec.precompiled_charsmap))
    if spec.remove_extra_whitespaces:  # spaces only: newlines and tabs stay
        norm += [
            normalizers.Replace(Regex(r"\A +| +\z"), ""),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    if spec.escape_whitespaces:
        norm.append(normalizers.Replace(" ", "▁"))
    if spec.add_dummy_prefix:  # Metaspace adds none to a text that starts with "▁"; SP does
        norm.append(normalizers.Replace(Regex(r"\A▁"), "▁▁"))
    tok.normalizer = normalizers.Sequence(norm)

    pre = []
    if spec.add_dummy_prefix:
        pre.append(pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=False))
    user = [p.piece for p in proto.pieces if p.type == _USER_DEFINED]
    if user:  # SentencePiece emits user-defined pieces whole
        pattern = "|".join(re.escape(p) for p in sorted(user, key=len, reverse=True))
        pre.append(pre_tokenizers.Split(Regex(pattern), behavior="isolated"))
    if pre:
        tok.pre_tokenizer = pre_tokenizers.Sequence(pre)

    dec = [decoders.Replace("▁", " ")]
    if byte_fallback:
        dec.append(decoders.ByteFallback())
    if spec.add_dummy_prefix:
        dec += [decoders.Fuse(), decoders.Strip(content=" ", left=1)]
    elif byte_fallback:
        dec.append(decoders.Fuse())
    tok.decoder = decoders.Sequence(dec)

    ids = proto.trainer_spec
    tok.add_special_tokens(
        [
            AddedToken(proto.pieces[i].piece, special=True, normalized=False)
            for i in sorted({ids.pad_id, ids.eos_id, ids.unk_id})
            if 0 <= i < len(proto.pieces)
        ]
    )
    eos = proto.pieces[ids.eos_id].piece
    tok.post_processor = processors.TemplateProcessing(
        single=["$A", eos], pair=["$A", eos, "$B", eos], special_tokens=[(eos, ids.eos_id)]
    )
    return tok


def is_bpe(tokenizer_json: str) -> bool:
    """Whether a `tokenizer.json` holds a BPE model (BART's), not a unigram one."""
    import json

    with open(tokenizer_json, encoding="utf-8") as f:
        return (json.load(f).get("model") or {}).get("type") == "BPE"
