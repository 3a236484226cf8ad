"""PaliGemma through the engine: an example -> `PaliGemmaProcessor`'s inputs, made by
chartjax/data/paligemma_inputs.py from the checkpoint's own tokenizer (tokenizer.json, else
tokenizer.model) and processor file (processor_config.json / preprocessor_config.json); decoded
by chartjax/models/paligemma_decoding.generate; the new tokens -> text.

The prompt is the task's (e.g. ChartQA's question) as the processor's prefix: `<image>` x
num_image_tokens, `<bos>`, prompt + "\\n". Its text part (`<bos>` + prompt + "\\n") holds at
most `max_input_len` tokens (a longer prompt loses its end, the last token, which ends the
prefix with "\\n", kept; counted as truncated), and rows
are padded on the left to `num_image_tokens + max_input_len`, so a run compiles once. Decoding:
greedy (HF `do_sample=False`), beam search with `beam_size` > 1 (HF's, `length_penalty` 1.0:
`alpha`, T5X's length penalty, is refused), or sampling with `temperature` > 0 (`top_k`,
`top_p`, `seed`: every batch draws from the same seed), up to `max_decode_len` new tokens; the
text is the tokens up to the model's EOS, special tokens dropped, as HF's `batch_decode(...,
skip_special_tokens=True)`.
"""

from __future__ import annotations

import numpy as np

from chartjax.inference import inputs as inputs_lib
from chartjax.inference.features import BadExample, BadImage, Featurizer
from chartjax.inference.inputs import Example, InputError
from chartjax.inference.settings import Resolved


def processor(cfg, tokenizer_path: str, processor_dir: str | None = None):
    """The checkpoint's processor (paligemma_inputs.Processor), checked against the model: its
    `<image>` id must be the model's `image_token_index`."""
    from chartjax.data import paligemma_inputs

    try:
        proc = paligemma_inputs.Processor.from_dir(
            tokenizer_path,
            image_size=cfg.image_size,
            num_image_tokens=cfg.num_image_tokens,
            processor_dir=processor_dir,
        )
    except (OSError, ValueError) as e:
        raise InputError(str(e)) from None
    if proc.image_token_id != cfg.image_token_id:
        raise InputError(
            f"{proc.tokenizer.where}: the tokenizer's {paligemma_inputs.IMAGE} is id "
            f"{proc.image_token_id}, the model's image_token_index {cfg.image_token_id}: not "
            "this checkpoint's tokenizer (give its own with --vocab)"
        )
    return proc


def decoding(s: Resolved) -> dict:
    """generate()'s decoding arguments of the settings."""
    if s.origin["alpha"] == "given":
        raise InputError(
            "alpha (T5X's beam length penalty) does not apply to PaliGemma, whose beam search "
            "ranks as HF's (length_penalty 1.0)"
        )
    if s.temperature > 0 and s.beam_size > 1:
        raise InputError(
            "sampling (temperature > 0) and beam search (beam_size > 1) exclude each other"
        )
    if s.temperature > 0:
        method = "sample"
    else:
        method = "beam" if s.beam_size > 1 else "greedy"
        if s.top_k > 0 or s.top_p < 1:
            raise InputError("top_k / top_p sample: give temperature > 0 with them")
    return {
        "max_new_tokens": s.max_decode_len,
        "method": method,
        "num_beams": s.beam_size if method == "beam" else 1,
        "temperature": float(s.temperature) if method == "sample" else 1.0,
        "top_k": s.top_k,
        "top_p": float(s.top_p),
        "rng": s.seed,
    }


def featurizer(cfg, tokenizer_path: str, s: Resolved, processor_dir: str | None = None):
    """The Featurizer of a PaliGemma (see the module docstring); `processor_dir`: where the
    processor file is when the tokenizer's folder has none (the checkpoint's folder)."""
    from PIL import Image

    from chartjax.data.images import decode_image_bytes

    proc = processor(cfg, tokenizer_path, processor_dir)
    kwargs = decoding(s)
    text_len = s.max_input_len
    length = cfg.num_image_tokens + text_len

    def feats(ex: Example):
        try:
            image = decode_image_bytes(inputs_lib.read_image_bytes(ex))
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
            raise BadImage(f"{ex.source}: cannot read image ({type(e).__name__}: {e})") from None
        try:
            text = proc.text(ex.prompt)
        except ValueError as e:
            raise BadExample(f"{ex.source}: {e}") from None
        cut = len(text) > text_len
        if cut:  # the prompt's end goes; its last token (the "\n" ending the prefix) stays
            text = text[: text_len - 1] + text[-1:]
        if max(text) >= cfg.vocab_size:
            raise BadExample(
                f"{ex.source}: the prompt has token id {max(text)}, beyond the model's "
                f"vocabulary of {cfg.vocab_size}"
            )
        ids = [cfg.image_token_id] * cfg.num_image_tokens + text
        pad = length - len(ids)
        return {
            "pixel_values": np.transpose(proc.pixels(image), (2, 0, 1)),  # HF's CHW
            "input_ids": np.asarray([cfg.pad_id] * pad + ids, np.int32),
            "attention_mask": np.asarray([0] * pad + [1] * len(ids), np.int32),
        }, cut

    def outputs(exs, tokens):
        return [(proc.decode(row[: _until_eos(row, cfg.eos_id)]), {}) for row in tokens[: len(exs)]]

    def run(model, batch):
        from chartjax.models.paligemma import decoding as paligemma_decoding

        return paligemma_decoding.generate(
            model,
            batch["pixel_values"],
            batch["input_ids"],
            batch["attention_mask"],
            eos_id=cfg.eos_id,
            pad_id=cfg.pad_id,
            **kwargs,
        )

    forward = ("generate", *sorted(kwargs.items()))
    return Featurizer(feats, forward, outputs, run=run)


def _until_eos(row, eos_id: int) -> int:
    hits = np.flatnonzero(np.asarray(row) == eos_id)
    return int(hits[0]) if hits.size else len(row)


def global_batch(batch: dict) -> dict:
    """Every process's rows of a batch, in process order (generate takes the global batch on
    every process); this process's batch where it is the only one."""
    import jax

    if jax.process_count() == 1:
        return batch
    from jax.experimental import multihost_utils

    return {
        k: np.asarray(multihost_utils.process_allgather(v, tiled=True)) for k, v in batch.items()
    }
