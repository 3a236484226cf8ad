"""Chart-to-Text's image-captioning row (Kantharaj et al. 2022, §4.1, Table 4 "Image captioning":
Statista BLEU 15.94, Pew 4.09): two tasks, trained from scratch on the corpus alone.

* `chart_to_text_barlow_twins` (chart_to_text_barlow_twins_task): Barlow Twins pretraining of a
  ResNet-50 on the charts of one corpus's training split (images only; "we pretrained a separate
  ResNet50 for each dataset"). Loss and augmentations:
  chartjax/models/captioning/barlow_twins.py. The evaluation embeds two augmented views of every
  chart of a split (a fixed key, eval-mode BatchNorm) and reports the loss over the whole split
  (embeddings standardised over it) with its two terms per entry of the cross-correlation C:
  `on_diagonal_loss` (mean (1 - C_ii)^2) and `off_diagonal_loss` (mean C_ij^2, i != j);
  predictions.jsonl holds each chart's cosine similarity between its two views.
* `chart_to_text` (chart_to_text_caption_task): Show, Attend and Tell (chartjax/models/
  chart_to_text/show_attend_tell.py), chart image -> summary, scored as every Chart-to-Text row
  (chart_to_text.make_score_fn: BLEU, ROUGE, METEOR, CIDEr, content selection; BLEURT and perplexity
  with their models). The encoder starts from the Barlow Twins run
  (gin_configs/init/barlow_twins_encoder.gin: its `encoder` parameters and BatchNorm statistics).

Inputs: the chart resized to `image_size` x `image_size` (aspect ratio not kept, as Show,
Attend and Tell implementations resize to a square; the size is [unverified]: 256 here).
Targets: a word vocabulary of the training summaries (the `vocab_size` - 3 most frequent
whitespace tokens, ties by the word; Statista's summaries are pre-tokenized), ids 0 <pad> (also
the decoder start), 1 </s>, 2 <unk>; built when the task is built, so training and chartjax-eval
agree without a file. [inferred] Xu et al.'s captioners use word vocabularies; the Chart-to-Text
one is not described.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import gin
import numpy as np

from chartjax.data import resize, sources, word_vocab
from chartjax.data.images import decode_image_bytes
from chartjax.data.word_vocab import WordVocab
from chartjax.metrics.scores import Scores
from chartjax.tasks import chart_to_text
from chartjax.tasks.core import seq2seq
from chartjax.tasks.core.task import Evaluation, Task


# The model configs, registered here (chartjax/models/configurables.py is the usual home; the
# model modules import no gin): `build_caption_model.config = @ShowAttendTellConfig()`. Each is a
# factory that imports its model module when gin builds it: the catalog imports this module, and
# chartjax-score (through the catalog) must not pull in jax.
@gin.configurable("ResNetConfig", module="chartjax.models")
def resnet_config(**fields):
    from chartjax.models.captioning.resnet import ResNetConfig

    return ResNetConfig(**fields)


@gin.configurable("ShowAttendTellConfig", module="chartjax.models")
def show_attend_tell_config(**fields):
    from chartjax.models.captioning import show_attend_tell as sat

    return sat.ShowAttendTellConfig(**fields)


@gin.configurable("BarlowTwinsConfig", module="chartjax.models")
def barlow_twins_config(**fields):
    from chartjax.models.captioning import barlow_twins as bt

    return bt.BarlowTwinsConfig(**fields)


@gin.configurable(module="chartjax.models")
def build_caption_model(config=gin.REQUIRED, rngs=None):
    """Show, Attend and Tell or Barlow Twins, by the type of `config`."""
    from chartjax.models.captioning import barlow_twins as bt
    from chartjax.models.captioning import show_attend_tell as sat

    rngs = 0 if rngs is None else rngs
    if isinstance(config, bt.BarlowTwinsConfig):
        return bt.build(config, rngs)
    if isinstance(config, sat.ShowAttendTellConfig):
        return sat.build(config, rngs)
    raise TypeError(f"build_caption_model: unsupported config {type(config).__name__}")


# ------------------------------------------------------------------ vocabulary ------------


def build_vocab(texts: Iterable[str], size: int) -> WordVocab:
    """The `size` - 3 most frequent whitespace tokens of `texts` (ties by the token)."""
    return word_vocab.most_frequent((t.split() for t in texts), size)


# ------------------------------------------------------------------ features --------------


def _image(rec, image_size: int):
    """The chart as uint8 `[image_size, image_size, 3]`: TF's bilinear resize, as before the
    feature maps left TensorFlow (chartjax/data/resize.py)."""
    img = decode_image_bytes(rec["image_bytes"])
    return resize.to_uint8(resize.bilinear(img, (image_size, image_size)))


def _host(rec, keep_host: bool) -> dict:
    return {k: rec[k] for k in sources.RECORD_KEYS} if keep_host else {}


def _source(config, data_dir, train_split, shuffle_buffer) -> sources.TfdsSource:
    if config not in chart_to_text.CONFIGS:
        raise ValueError(f"config {config!r} is not one of {chart_to_text.CONFIGS}")
    return sources.TfdsSource(
        f"chart_to_text/{config}",
        data_dir,
        train_split=train_split,
        shuffle_buffer=shuffle_buffer,
        expand=chart_to_text.make_expand("image", config),
        field_keys=chart_to_text.COMMON_KEYS + chart_to_text.CONFIG_KEYS[config],
        image_key="image",
    )


def _records(host) -> list[dict]:
    return [
        {
            "id": sources.as_python(i),
            "prompt": sources.as_python(p),
            "target": sources.as_python(t),
            "meta": json.loads(sources.as_python(m)),
        }
        for i, p, t, m in zip(host["id"], host["prompt"], host["target"], host["meta"])
    ]


# ------------------------------------------------------------------ the tasks -------------


@gin.configurable("chart_to_text_barlow_twins_task", module="chartjax.tasks.chart_to_text_caption")
def make_pretrain_task(
    data_dir: str = "~/tensorflow_datasets",
    config: str = "statista",
    *,
    image_size: int = 256,
    lambd: float = 5.1e-3,
    train_split: str = "train",
    eval_splits: tuple[str, ...] = ("validation",),
    shuffle_buffer: int = 10_000,
) -> Task:
    """Barlow Twins on the charts of `config` (see the module docstring); `lambd` must equal
    the model's BarlowTwinsConfig.lambd (recipes bind both from one macro)."""
    source = _source(config, data_dir, train_split, shuffle_buffer)

    def features(keep_host):
        return lambda rec: {"image": _image(rec, image_size), **_host(rec, keep_host)}

    from chartjax.models.captioning import barlow_twins as bt

    def loss(model, batch, *, train):
        return bt.loss(model, batch, train=train)

    def evaluate(predictions, host, split):
        import jax.numpy as jnp

        z = np.asarray(predictions, np.float32)  # [N, 2, D]
        value, stats = bt.barlow_twins_loss(jnp.asarray(z[:, 0]), jnp.asarray(z[:, 1]), lambd)
        metrics = {"barlow_twins_loss": float(value)}
        metrics.update({k: float(stats[k]) for k in ("on_diagonal_loss", "off_diagonal_loss")})
        a, b = z[:, 0], z[:, 1]
        norms = np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)
        cos = np.sum(a * b, axis=-1) / norms
        rows = [
            {"id": r["id"], "prediction": round(float(c), 6)} for r, c in zip(_records(host), cos)
        ]
        return Evaluation(Scores(metrics=metrics), rows)

    return Task(
        name="chart_to_text_barlow_twins",
        source=source,
        features=features,
        loss=loss,
        predict=bt.predict,
        evaluate=evaluate,
        model_inputs=("image",),
        eval_splits=tuple(eval_splits),
    )


@gin.configurable("chart_to_text_caption_task", module="chartjax.tasks.chart_to_text_caption")
def make_task(
    data_dir: str = "~/tensorflow_datasets",
    config: str = "statista",
    *,
    vocab_size: int = gin.REQUIRED,
    image_size: int = 256,
    max_target_len: int = 128,
    train_split: str = "train",
    eval_splits: tuple[str, ...] = ("validation", "test"),
    bleurt_checkpoint: str | None = None,
    ppl_model: str | None = None,
    bleu_tokenize: str = "13a",
    shuffle_buffer: int = 10_000,
    decoding=None,
) -> Task:
    """Show, Attend and Tell on `config`: chart image -> summary (see the module docstring)."""
    decoding = decoding or seq2seq.Decoding()
    source = _source(config, data_dir, train_split, shuffle_buffer)
    vocab = build_vocab((r["target"] for r in source.records(train_split)), vocab_size)
    score_fn = chart_to_text.make_score_fn(
        bleurt_checkpoint=bleurt_checkpoint, ppl_model=ppl_model, bleu_tokenize=bleu_tokenize
    )
    L = max_target_len

    def features(keep_host):
        def fn(rec):
            tgt, inp = seq2seq.target_arrays(vocab, sources.as_python(rec["target"]), L)
            return {
                "encoder_input_tokens": _image(rec, image_size),
                "decoder_target_tokens": tgt,
                "decoder_input_tokens": inp,
                **_host(rec, keep_host),
            }

        return fn

    def loss(model, batch, *, train):
        from chartjax.models.captioning import show_attend_tell as sat

        return sat.loss(model, batch, deterministic=not train)

    def evaluate(predictions, host, split):
        texts = vocab.decode_batch(np.asarray(predictions))
        records = _records(host)
        scores, _ = score_fn(texts, records, split)
        rows = [
            {"id": r["id"], "prediction": text, "target": r["target"]}
            for text, r in zip(texts, records)
        ]
        return Evaluation(scores, rows)

    return Task(
        name="chart_to_text",
        source=source,
        features=features,
        loss=loss,
        predict=seq2seq.make_predict(decoding),
        evaluate=evaluate,
        model_inputs=("encoder_input_tokens", "decoder_input_tokens", "decoder_target_tokens"),
        eval_splits=tuple(eval_splits),
    )
