"""The text-generation half shared by every Pix2Struct / T5 task: records -> features -> decode.

A benchmark module (chartcheck, chart_to_text, chart_info, deplot) says only what is particular
to it: which TFDS dataset and splits, and an `expand` function that turns one TFDS example
(Python values) into records `{"id", "prompt", "target", "meta"}`, usually one, several when a
chart holds several examples (CHART-Info text blocks), none to drop it. Everything else lives
here, identical for all benchmarks:

* featurize: `image` models render the prompt as a header above the chart (data/render.py; no
  header when the prompt is empty) and cut Pix2Struct patches (data/patches.py); `text` models
  tokenize the prompt. Targets are SentencePiece ids + EOS; the decoder input is the target
  shifted right behind the start id 0 (T5 conventions, data/vocab.py). A BART vocabulary
  (data/bpe.py) gives `<s> target </s>` padded with 1 behind its start id 2, as HF's
  run_summarization trains BART.
* examples: the TFDS dataset through `expand` (chartjax/data/sources.py TfdsSource); batching,
  padding and prefetching are chartjax/data/pipeline.py's, as for every task.
* predict: KV-cached greedy decoding or beam search (models/decoding.py) inside the jitted step;
  evaluate: detokenize, then the benchmark's `score_fn(texts, records, split)`.

The feature map (header rendering with PIL, patches in NumPy, SentencePiece) runs in the loader's
worker processes (chartjax/data/loader.py).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Sequence

import gin
import numpy as np

from chartjax import config_checks as checks
from chartjax.data import packing, sources
from chartjax.data.images import decode_image_bytes
from chartjax.data.sources import RECORD_KEYS, as_python
from chartjax.metrics.scores import Scores
from chartjax.tasks.core.task import Evaluation, SequenceLengths, Task

# Prediction rows keep this much of the prompt (`input` of predictions.jsonl is "short").
INPUT_CHARS = 300
PREFIX_LM = "prefix_lm"
MODALITIES = ("image", "text", PREFIX_LM)


@gin.configurable(module="chartjax.tasks.seq2seq")
@dataclasses.dataclass(frozen=True)
class Features:
    """How records become model features (gin: `Features.max_patches = 2048`, ...).

    modality: "image" (Pix2Struct family: prompt rendered as header), "text" (T5, BART: prompt
      tokenized) or "prefix_lm" (PaliGemma: the chart as image tokens, the prompt as the text
      prefix, the target as the suffix; chartjax/tasks/core/prefix_lm.py). Recipes set it; the task
      module gives the default.
    vocab_file: a SentencePiece model (T5, Pix2Struct), or BART's BPE files (a checkpoint
      directory with tokenizer.json or vocab.json + merges.txt): data/vocab.py open_vocabulary;
      for "prefix_lm" the PaliGemma checkpoint's folder (tokenizer.json, else tokenizer.model,
      and its processor file: data/paligemma_inputs.py).
    max_input_len / max_target_len: "text": the prompt's and the target's tokens; "prefix_lm":
      the text prefix's (`<bos>` + prompt + "\\n") and the suffix's (target + `<eos>`).
    image_size: "prefix_lm" only: the side images are resized to (None: the processor file's
      size, else the folder's config.json `vision_config.image_size`, else 224); it must be the
      model's `image_size` (SigLIP refuses other shapes).
    prompt_template: "prefix_lm" only: the prefix made of a record's prompt, `{prompt}` standing
      for it (e.g. "answer en {prompt}", the PaliGemma mix checkpoints' question prompt).
    pack: pack several training examples per row (docs/packing.md, data/packing.py); evaluation
      and inference never pack. The batch size then counts rows.
    pack_encoder_len / pack_decoder_len: the row lengths (None: max_patches or max_input_len,
      and max_target_len). Pix2Struct charts fill most of max_patches, so two share a row only
      when the row is longer than one chart's max_patches.
    pack_open_rows: rows the first-fit packer fills at once.
    """

    modality: str = "image"
    vocab_file: str = gin.REQUIRED
    max_patches: int = 2048
    patch_size: int = 16
    max_position_id: int = 4096
    header_font_size: int = 36
    font_path: str | None = None
    max_input_len: int = 512
    max_target_len: int = 128
    pack: bool = False
    pack_encoder_len: int | None = None
    pack_decoder_len: int | None = None
    pack_open_rows: int = 16
    image_size: int | None = None
    prompt_template: str = "{prompt}"

    def __post_init__(self):
        if self.modality not in MODALITIES:
            raise ValueError(
                f"Features.modality must be one of {MODALITIES}, not {self.modality!r}"
            )
        if self.pack and self.modality == PREFIX_LM:
            raise checks.ConfigError(
                "Features.pack = True: prefix-LM (PaliGemma) examples are not packed; "
                "docs/packing.md lists the tasks that pack"
            )
        if self.pack:
            self._check_packing()
        if "{prompt}" not in self.prompt_template:
            raise ValueError(
                f"Features.prompt_template = {self.prompt_template!r}: it must hold {{prompt}}"
            )
        if self.image_size is not None and checks.positive_int(self.image_size):
            raise ValueError(f"Features.image_size = {self.image_size!r}: a positive int or None")

    def _check_packing(self) -> None:
        """A row shorter than one example is refused here, when the task is made (before the
        model is built), rather than by the packer at its first batch; one line per problem."""
        encoder = ("max_patches", "patches") if self.modality == "image" else ("max_input_len", "")
        problems = []
        for name, (bound, unit) in {  # row length -> the longest example it must hold
            "pack_encoder_len": encoder,
            "pack_decoder_len": ("max_target_len", ""),
        }.items():
            row, most = getattr(self, name), getattr(self, bound)
            if checks.optional(checks.positive_int)(row):
                problems.append(f"Features.{name} = {row!r}: must be a positive integer or None")
            elif row is not None and row < most:
                problems.append(
                    f"Features.{name} = {row}: a packing row shorter than one example, which "
                    f"may hold Features.{bound} = {most}{unit and ' ' + unit}; make it at least "
                    f"{most} or leave it unset (rows of {most})"
                )
        if checks.positive_int(self.pack_open_rows):
            problems.append(
                f"Features.pack_open_rows = {self.pack_open_rows!r}: must be a positive integer"
            )
        if problems:
            raise checks.ConfigError("\n".join(problems))

    def pack_spec(self, pad_id: int):
        """The packing of training rows (chartjax/data/packing.py), None when `pack` is off."""
        if not self.pack:
            return None
        encoder = self.max_patches if self.modality == "image" else self.max_input_len
        return packing.PackSpec(
            encoder_len=self.pack_encoder_len or encoder,
            decoder_len=self.pack_decoder_len or self.max_target_len,
            pad_id=pad_id,
            image=self.modality == "image",
            max_open_rows=self.pack_open_rows,
        )


@gin.configurable(module="chartjax.tasks.seq2seq")
@dataclasses.dataclass(frozen=True)
class Decoding:
    """Decoding at evaluation (gin: `Decoding.max_decode_len = 128`, `Decoding.beam_size = 4`)."""

    max_decode_len: int = 128
    beam_size: int = 1
    alpha: float = 0.6


# ------------------------------------------------------------------------ host-side helpers --


def image_with_header(image: np.ndarray, prompt: str, features: Features) -> np.ndarray:
    """The model's view of a chart: prompt rendered above it, or the chart alone."""
    if not prompt:
        return np.asarray(image, np.uint8)
    from chartjax.data import render

    return render.render_header(
        image, prompt, font_size=features.header_font_size, font_path=features.font_path
    )


def target_arrays(vocab, target: str, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(decoder_target_tokens, decoder_input_tokens), int32 `[max_len]` each."""
    tgt = vocab.encode_batch([target], max_len=max_len, add_eos=True)[0]
    inp = np.concatenate([[vocab.decoder_start_id], tgt[:-1]]).astype(np.int32)
    inp[1:][tgt[:-1] == vocab.pad_id] = vocab.pad_id  # nothing after the final EOS
    return tgt, inp


def image_features(image, features: Features) -> np.ndarray:
    """Rendered chart (uint8 `[H, W, 3]`) -> Pix2Struct `encoder_input_tokens` (NumPy)."""
    from chartjax.data import patches

    return patches.preprocess_image(
        image,
        features.max_patches,
        (features.patch_size, features.patch_size),
        max_position_id=features.max_position_id,
    )


# ------------------------------------------------------------------------ feature map ------


def _featurize_fn(features: Features, vocab, keep_host: bool):
    """record -> model features (+ the host-side strings when `keep_host`); run in the loader's
    worker processes."""
    return functools.partial(_featurize, features, vocab, keep_host)


def _featurize(features: Features, vocab, keep_host: bool, rec: dict) -> dict:
    tgt, inp = target_arrays(vocab, as_python(rec["target"]), features.max_target_len)
    out = {"decoder_target_tokens": tgt, "decoder_input_tokens": inp}
    prompt = as_python(rec["prompt"])
    if features.modality == "image":
        image = image_with_header(decode_image_bytes(rec["image_bytes"]), prompt, features)
        out["encoder_input_tokens"] = image_features(image, features)
    else:
        ids = vocab.encode_batch([prompt], max_len=features.max_input_len, add_eos=True)[0]
        out["encoder_input_tokens"] = np.asarray(ids, np.int32)
    if keep_host:
        out.update({k: rec[k] for k in RECORD_KEYS})
    return out


# ------------------------------------------------------------------------ the task --------


def make_task(
    *,
    name: str,
    dataset: str,
    data_dir: str,
    train_split: str,
    eval_splits: Sequence[str],
    field_keys: Sequence[str],
    expand: Callable[[dict], list[dict]],
    score_fn: Callable[[list[str], list[dict], str], tuple[Scores, list[dict] | None]],
    features: Features,
    decoding: Decoding,
    image_key: str | None = "image",
    shuffle_buffer: int = 10_000,
    encoded_keys: Sequence[str] = (),
    report_view=None,
) -> Task:
    """A seq2seq Task over the built TFDS dataset `dataset` (`name/config` for configs).

    encoded_keys: field keys `expand` receives still encoded (bytes, TFDS decoding skipped),
    e.g. the image of a text-modality task that needs only its size.
    report_view: the task's `html_report.RowView` (Task.report_view).

    score_fn(texts, records, split) -> (Scores, extra) where `records` are the eval records
    (id, prompt, target, meta dict) and `extra` is None or one dict per record added to its
    predictions.jsonl row (e.g. the parsed label or table).
    """
    from chartjax.data import vocab as vocab_lib

    source = sources.TfdsSource(
        dataset,
        data_dir,
        train_split=train_split,
        shuffle_buffer=shuffle_buffer,
        expand=expand,
        field_keys=tuple(field_keys),
        image_key=image_key if features.modality != "text" else None,
        encoded_keys=tuple(encoded_keys),
    )
    if features.modality == PREFIX_LM:
        from chartjax.tasks.core import prefix_lm

        return prefix_lm.make_task(
            name=name,
            source=source,
            eval_splits=tuple(eval_splits),
            evaluation=functools.partial(evaluation, score_fn=score_fn),
            features=features,
            decoding=decoding,
            report_view=report_view,
        )
    vocab = vocab_lib.open_vocabulary(features.vocab_file)

    def loss(model, batch, *, train):
        from chartjax.models import losses

        return losses.seq2seq_loss(model, batch, deterministic=not train)

    def evaluate(predictions, host, split):
        return evaluation(vocab.decode_batch(np.asarray(predictions)), host, split, score_fn)

    encoder_len = features.max_patches if features.modality == "image" else features.max_input_len
    spec = features.pack_spec(vocab.pad_id)
    packed = () if spec is None else packing.PACKED_KEYS
    if spec is not None:  # analytic FLOPs count rows, which have the packed lengths
        encoder_len = spec.encoder_len
    return Task(
        name=name,
        source=source,
        features=lambda keep_host: _featurize_fn(features, vocab, keep_host),
        loss=loss,
        predict=make_predict(decoding),
        evaluate=evaluate,
        model_inputs=(
            "encoder_input_tokens",
            "decoder_input_tokens",
            "decoder_target_tokens",
            *packed,
        ),
        eval_splits=tuple(eval_splits),
        lengths=SequenceLengths(
            encoder=encoder_len,
            decoder=features.max_target_len if spec is None else spec.decoder_len,
        ),
        pack=None if spec is None else functools.partial(packing.pack, spec=spec),
        report_view=report_view,
    )


def evaluation(texts: list[str], host, split: str, score_fn) -> Evaluation:
    """The decoded `texts` of an eval split scored by `score_fn` against the host columns'
    records, and its predictions.jsonl rows (the prompt shortened to INPUT_CHARS)."""
    records = [
        {
            "id": as_python(i),
            "prompt": as_python(p),
            "target": as_python(t),
            "meta": json.loads(as_python(m)),
        }
        for i, p, t, m in zip(host["id"], host["prompt"], host["target"], host["meta"])
    ]
    scores, extra = score_fn(texts, records, split)
    rows = []
    for k, (text, rec) in enumerate(zip(texts, records)):
        row = {
            "id": rec["id"],
            "input": rec["prompt"][:INPUT_CHARS],
            "prediction": text,
            "target": rec["target"],
        }
        if extra is not None:
            row.update(extra[k])
        rows.append(row)
    return Evaluation(scores, rows)


def make_predict(decoding: Decoding) -> Callable:
    """model, batch -> token ids `[B, max_decode_len]`: greedy, or the best beam."""

    def predict(model, batch):
        from chartjax.models import decoding as dec

        if decoding.beam_size > 1:
            tokens, _ = dec.beam_search(
                model,
                batch,
                max_decode_len=decoding.max_decode_len,
                num_beams=decoding.beam_size,
                alpha=decoding.alpha,
            )
            return tokens[:, 0]
        return dec.greedy_decode(model, batch, max_decode_len=decoding.max_decode_len)[0]

    return predict
