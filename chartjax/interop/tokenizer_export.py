"""The tokenizer and processor files that make an exported checkpoint complete, so that HF's
`AutoTokenizer` / `Pix2StructProcessor.from_pretrained` and `chartjax-infer` (without --vocab)
read it alone (`chartjax-convert --to hf|chartjax`).

Where they come from: the input's own tokenizer files (an HF or chartjax directory, or the HF
checkpoint a train run started from) are copied as they are; a SentencePiece model (`--vocab`,
or the `Features.vocab_file` a run's config.gin names) of a T5 or Pix2Struct model is written in
HF's layout: `spiece.model`, a `tokenizer.json` that encodes and decodes as SentencePiece
(chartjax/interop/sentencepiece_json.py: byte fallback, so newlines survive both ways; transformers
5 reads a Pix2Struct tokenizer from it alone), `tokenizer_config.json` (no extra ids: the ids are
the model's pieces, numbered as chartjax numbers them) and `special_tokens_map.json`. A Pix2Struct
export also gets `preprocessor_config.json` (patch size, `max_patches`, `is_vqa`: whether the
prompt is rendered above the image), and an HF one `is_vqa` in config.json.

One difference from chartjax's own encoding remains: HF matches the special pieces ("</s>",
"<pad>", "<unk>") when they are written in the text; SentencePiece spells them out.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

from chartjax.interop import formats

SPIECE = "spiece.model"  # the name HF's T5Tokenizer reads
SENTENCEPIECE_NAMES = ("sentencepiece.model", "spiece.model", "spm.model")
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json")
PREPROCESSOR = "preprocessor_config.json"
# The header font a Pix2Struct export with prompts (is_vqa) carries (matplotlib's DejaVu Sans).
HEADER_FONT = "DejaVuSans.ttf"
# HF's Pix2StructImageProcessor defaults; chartjax's own are the same but for the patch size,
# which comes from the model.
MAX_PATCHES = 2048


@dataclasses.dataclass(frozen=True)
class Inputs:
    """How a model's inputs were made. vocab: a SentencePiece file or a directory of tokenizer
    files; max_patches, is_vqa: Pix2Struct's patches and header prompts; max_input_len: a text
    model's input tokens (HF `model_max_length`). None: not known."""

    vocab: str | None = None
    max_patches: int | None = None
    is_vqa: bool | None = None
    max_input_len: int | None = None


def of_checkpoint(loc: formats.Located, *, vocab: str | None = None) -> Inputs:
    """What a located checkpoint says about its inputs: its tokenizer files, or for a train run
    the vocabulary and features its config.gin binds; `vocab` (given) replaces its vocabulary."""
    run = formats.run_inputs(loc)
    ints = {k: run[k] for k in ("max_patches", "max_input_len") if isinstance(run.get(k), int)}
    vocab = vocab if vocab is not None else formats.tokenizer_source(loc)
    return Inputs(vocab=vocab, is_vqa=run.get("is_vqa"), **ints)


def _sources(vocab: str | None, sentencepiece: bool) -> tuple[list[str], str | None]:
    """(tokenizer/processor files to copy as they are, the SentencePiece model to write as
    spiece.model) of `vocab`; `sentencepiece`: the model family reads SentencePiece."""
    if vocab is None:
        return [], None
    if os.path.isdir(vocab):
        found = formats.tokenizer_files(vocab)
        found += [os.path.join(vocab, f) for f in PROCESSOR_FILES]
        found = [f for f in found if os.path.isfile(f)]
    elif os.path.basename(vocab) in ("tokenizer.json", "vocab.json"):  # BART's BPE files
        return formats.tokenizer_files(os.path.dirname(os.path.abspath(vocab))), None
    else:
        found = [vocab]
    if not sentencepiece:
        return found, None
    spm = [f for f in found if os.path.basename(f) in SENTENCEPIECE_NAMES or f == vocab]
    rest = [f for f in found if f not in spm]
    return rest, (spm[0] if spm else None)


def _read_json(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _write_json(path: str, obj: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def t5_tokenizer_config(
    spm_file: str, *, fast: bool, processor: str | None, max_len: int | None
) -> tuple[dict, dict]:
    """(tokenizer_config.json, special_tokens_map.json) of a T5-convention SentencePiece model:
    its own pad / EOS / UNK pieces, no extra ids (`<extra_id_N>` would add ids chartjax never
    made). `fast`: a tokenizer.json (sentencepiece_json) is beside it: HF is to load that one
    (`PreTrainedTokenizerFast`; its `T5Tokenizer` would rebuild one without byte fallback)."""
    from chartjax.data.vocab import Vocabulary

    sp = Vocabulary(spm_file).sp  # checks pad 0, EOS 1, UNK 2 (names the file if not)
    special = {
        "eos_token": sp.id_to_piece(sp.eos_id()),
        "unk_token": sp.id_to_piece(sp.unk_id()),
        "pad_token": sp.id_to_piece(sp.pad_id()),
    }
    config = {"tokenizer_class": "PreTrainedTokenizerFast" if fast else "T5Tokenizer"}
    config.update(special, extra_ids=0)
    config["additional_special_tokens"] = []
    if max_len is not None:
        config["model_max_length"] = max_len
    if processor is not None:
        config["processor_class"] = processor
    return config, {**special, "additional_special_tokens": []}


def write(out: str, cfg, inputs: Inputs, *, hf: bool) -> list[str]:
    """Write into the export directory `out` (weights and config.json already there) the
    tokenizer and processor files of a model with config `cfg`; `hf`: `out` is an HF
    checkpoint (its config.json gets `is_vqa`). Returns the file names written, sorted."""
    from chartjax.models.model_configs import Pix2StructConfig, T5Config

    pix2struct = isinstance(cfg, Pix2StructConfig)
    copied, spm = _sources(inputs.vocab, isinstance(cfg, T5Config | Pix2StructConfig))
    names = set()
    for f in copied:
        shutil.copy(f, os.path.join(out, os.path.basename(f)))
        names.add(os.path.basename(f))
    if spm is not None:
        shutil.copy(spm, os.path.join(out, SPIECE))
        names.add(SPIECE)
        if "tokenizer.json" not in names:
            from chartjax.interop import sentencepiece_json

            try:
                sentencepiece_json.build(spm).save(os.path.join(out, "tokenizer.json"))
                names.add("tokenizer.json")
            except ValueError:  # a BPE SentencePiece model: HF's T5Tokenizer reads spiece.model
                pass
        if "tokenizer_config.json" not in names:
            config, special = t5_tokenizer_config(
                spm,
                fast="tokenizer.json" in names,
                processor="Pix2StructProcessor" if pix2struct else None,
                max_len=None if pix2struct else inputs.max_input_len,
            )
            _write_json(os.path.join(out, "tokenizer_config.json"), config)
            names.add("tokenizer_config.json")
            if "special_tokens_map.json" not in names:
                _write_json(os.path.join(out, "special_tokens_map.json"), special)
                names.add("special_tokens_map.json")
    if pix2struct:
        is_vqa = _write_preprocessor(out, cfg, inputs, copied=PREPROCESSOR in names)
        names.add(PREPROCESSOR)
        if is_vqa and HEADER_FONT not in names:
            # HF's processor renders headers in Arial downloaded from the Hub unless given a
            # font: the export carries the one chartjax renders with (DejaVu Sans, whose
            # licence allows redistribution), for `processor(..., font_path=<export>/...)`.
            from chartjax.data import render

            shutil.copyfile(render.default_font_path(), os.path.join(out, HEADER_FONT))
            names.add(HEADER_FONT)
        if hf:
            cfg_file = os.path.join(out, "config.json")
            _write_json(cfg_file, {**_read_json(cfg_file), "is_vqa": is_vqa})
    return sorted(names)


def _write_preprocessor(out: str, cfg, inputs: Inputs, *, copied: bool) -> bool:
    """preprocessor_config.json of a Pix2Struct export: a copied one with what `inputs` knows
    set over it, else HF's Pix2StructImageProcessor defaults with the model's patch size.
    Returns its is_vqa."""
    path = os.path.join(out, PREPROCESSOR)
    pre = _read_json(path) if copied else {}
    pre.setdefault("image_processor_type", "Pix2StructImageProcessor")
    pre.setdefault("processor_class", "Pix2StructProcessor")
    pre.setdefault("do_normalize", True)
    pre.setdefault("do_convert_rgb", True)
    pre["patch_size"] = {"height": cfg.patch_size, "width": cfg.patch_size}
    pre.setdefault("max_patches", MAX_PATCHES)
    pre.setdefault("is_vqa", False)
    if inputs.max_patches is not None:
        pre["max_patches"] = inputs.max_patches
    if inputs.is_vqa is not None:
        pre["is_vqa"] = inputs.is_vqa
    _write_json(path, pre)
    return bool(pre["is_vqa"])
