"""The prefix-LM half of the text-generation tasks (`Features.modality = "prefix_lm"`):
PaliGemma (1, 2, ChartGemma) trained and evaluated on a benchmark's records, as big_vision's
PaliGemma transfers and HF's `PaliGemmaProcessor` lay them out (docs/models.md §8).

A record `{"id", "prompt", "target", "meta"}` (the benchmark module's `expand`, as for every
seq2seq task) becomes, in the loader's workers (chartjax/data/paligemma_inputs.py's processor, read
from `Features.vocab_file`: the checkpoint's tokenizer.json or tokenizer.model and processor file):
- `image` float32 `[S, S, 3]`: the chart as the processor makes it (RGB, resized to S, in [-1, 1]);
- `input_ids` int32 `[P + Q]`: the prefix `<bos>` + prompt + "\\n" (the prompt through
  `Features.prompt_template`; at most P = `max_input_len` tokens: a longer prompt loses its end,
  the "\\n" that ends the prefix kept, as chartjax-infer's PaliGemma featurizer cuts it), then the
  suffix target + `<eos>` (at most Q = `max_target_len`: a longer one loses its end, `<eos>`
  first, as big_vision's `tolen` cuts its text), then `<pad>`;
- `token_type_ids` (0 prefix, 1 suffix) and `attention_mask` (1 = a real token) alike.
The image placeholders are not in the batch: the loss and the prediction put the model's
`num_image_tokens` in front (models/paligemma.with_image_tokens), so the layout is the processor's
(image tokens, prefix, suffix; positions from 1, padding on the right) for any image size.

loss: models/paligemma.prefix_lm_loss, full attention over image + prefix, causal over the
suffix, the loss on the suffix tokens alone (label smoothing and z-loss as the model's config
says). predict: the prefix alone (the first P tokens, the suffix masked out) decoded with the KV
cache inside the jitted step (models/paligemma_decoding.decode_in_jit): greedy, or HF's beam
search with `Decoding.beam_size` > 1 (`Decoding.alpha`, T5X's length penalty, does not apply:
HF's length_penalty 1.0). The tokens up to `<eos>` are decoded, special tokens dropped, as
`batch_decode(..., skip_special_tokens=True)`, then scored by the benchmark's `score_fn`.
"""

from __future__ import annotations

import functools

import numpy as np

from chartjax.data.images import decode_image_bytes
from chartjax.data.sources import RECORD_KEYS, as_python
from chartjax.tasks.core.task import SequenceLengths, Task

MODEL_INPUTS = ("image", "input_ids", "token_type_ids", "attention_mask")


def open_processor(features):
    """The PaliGemma processor of `Features.vocab_file` at `Features.image_size`."""
    from chartjax.data import paligemma_inputs

    try:
        return paligemma_inputs.Processor.for_training(features.vocab_file, features.image_size)
    except (OSError, ValueError) as e:
        raise ValueError(f"Features.vocab_file = {features.vocab_file!r}: {e}") from None


def text_arrays(proc, prompt: str, target: str, prefix_len: int, suffix_len: int) -> dict:
    """`input_ids`, `token_type_ids`, `attention_mask` int32 `[prefix_len + suffix_len]` of one
    record (see the module docstring)."""
    prefix = proc.text(prompt)
    if len(prefix) > prefix_len:
        prefix = prefix[: prefix_len - 1] + prefix[-1:]
    suffix = [*proc.tokenizer.encode(target), proc.eos_id][:suffix_len]
    pad = prefix_len + suffix_len - len(prefix) - len(suffix)
    return {
        "input_ids": np.asarray(prefix + suffix + [proc.pad_id] * pad, np.int32),
        "token_type_ids": np.asarray([0] * len(prefix) + [1] * len(suffix) + [0] * pad, np.int32),
        "attention_mask": np.asarray([1] * (len(prefix) + len(suffix)) + [0] * pad, np.int32),
    }


def _featurize(features, proc, keep_host: bool, rec: dict) -> dict:
    prompt = features.prompt_template.format(prompt=as_python(rec["prompt"]))
    out = text_arrays(
        proc, prompt, as_python(rec["target"]), features.max_input_len, features.max_target_len
    )
    out["image"] = proc.pixels(decode_image_bytes(rec["image_bytes"]))
    if keep_host:
        out.update({k: rec[k] for k in RECORD_KEYS})
    return out


def loss(model, batch, *, train: bool):
    """The prefix-LM loss of a text batch (image placeholders added here)."""
    from chartjax.models import paligemma

    full = paligemma.with_image_tokens(model.cfg, batch)
    return paligemma.prefix_lm_loss(model, full, deterministic=not train)


def make_predict(decoding, prefix_len: int):
    """model, batch -> new tokens `[B, max_decode_len]`, from the prefix alone."""

    def predict(model, batch):
        import jax.numpy as jnp

        from chartjax.models import paligemma
        from chartjax.models.paligemma import decoding as paligemma_decoding

        cfg = model.cfg
        valid = (batch["attention_mask"][:, :prefix_len] != 0) & (
            batch["token_type_ids"][:, :prefix_len] == 0
        )
        ids = jnp.where(valid, batch["input_ids"][:, :prefix_len], cfg.pad_id)
        prompt = paligemma.with_image_tokens(
            cfg, {"input_ids": ids, "attention_mask": valid.astype(jnp.int32)}
        )
        return paligemma_decoding.decode_in_jit(
            model,
            batch["image"],
            prompt["input_ids"],
            prompt["attention_mask"],
            max_new_tokens=decoding.max_decode_len,
            num_beams=decoding.beam_size,
            eos_id=cfg.eos_id,
            pad_id=cfg.pad_id,
        )

    return predict


def make_task(
    *, name: str, source, eval_splits, evaluation, features, decoding, report_view=None
) -> Task:
    """The Task of seq2seq.make_task for `Features.modality = "prefix_lm"` (its arguments);
    `evaluation(texts, host, split)` scores the decoded texts (seq2seq.evaluation)."""
    proc = open_processor(features)

    def evaluate(predictions, host, split):
        return evaluation([proc.decode(row) for row in np.asarray(predictions)], host, split)

    return Task(
        name=name,
        source=source,
        features=lambda keep_host: functools.partial(_featurize, features, proc, keep_host),
        loss=loss,
        predict=make_predict(decoding, features.max_input_len),
        evaluate=evaluate,
        model_inputs=MODEL_INPUTS,
        eval_splits=tuple(eval_splits),
        # The text tokens (the image tokens are the model's: models/flops.for_task adds them).
        lengths=SequenceLengths(encoder=features.max_input_len, decoder=features.max_target_len),
        report_view=report_view,
    )
