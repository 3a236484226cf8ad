"""Encoder classifiers over text and tables (DeBERTa, TAPAS): the half every classification task
shares, and `chartjax-infer --task classify`.

An example is a record `{"id", "prompt", "target", "meta"}` as the seq2seq tasks make them
(chartjax/data/sources.py TfdsSource `expand`); here `prompt` is the first text (DeBERTa) or the
query (TAPAS), `meta["pair"]` the second text of a DeBERTa pair, `meta["table"]` the table of a
TAPAS query (DePlot-linearized text or `{"header", "rows"}`), `meta["label_id"]` the class index
to train on. `Features` says how such a record becomes model inputs, through the checkpoint's own
tokenizer (chartjax/data/classifier_inputs.py); training (`loss`), evaluation (`predict`: the
fp32 logits) and inference use the same featurization, so a model sees what it was trained on.

`chartjax-infer --task classify --template "{claim}" [--pair_template "{table}"] [--table_field
table]` writes per row `prediction` (the checkpoint's `id2label` name of the argmax) and `scores`
(the logits, one per label). jax is imported inside the functions (traced in jit).
"""

from __future__ import annotations

import dataclasses
import json

import gin
import numpy as np

from chartjax.data import classifier_inputs
from chartjax.data.sources import RECORD_KEYS, as_python
from chartjax.tasks.core.task import InferenceSpec


@gin.configurable("ClassifierFeatures", module="chartjax.tasks.text_classification")
@dataclasses.dataclass(frozen=True)
class Features:
    """How records become classifier inputs (gin: `ClassifierFeatures.max_len = 1024`).

    tokenizer: the checkpoint directory holding the tokenizer files (spm.model / vocab.txt).
    family: "deberta" (text pair) or "tapas" (query over a table).
    max_len: tokens per example; every batch is padded to it (one compiled shape).
    num_token_types: TAPAS's token types per token (7).
    """

    tokenizer: str = gin.REQUIRED
    family: str = "deberta"
    max_len: int = 512
    num_token_types: int = 7

    def __post_init__(self):
        if self.family not in classifier_inputs.FAMILIES:
            raise ValueError(
                f"ClassifierFeatures.family must be one of {classifier_inputs.FAMILIES}, "
                f"not {self.family!r}"
            )
        if self.max_len < 8:
            raise ValueError(f"ClassifierFeatures.max_len={self.max_len} is too small")


def family_of(cfg) -> str | None:
    """ "deberta" / "tapas" for a classifier model config, else None."""
    from chartjax.models.post_ln import deberta, tapas

    if isinstance(cfg, deberta.DebertaConfig):
        return "deberta"
    if isinstance(cfg, tapas.TapasConfig):
        return "tapas"
    return None


def encode(tokenizer, prompt: str, meta: dict) -> dict[str, np.ndarray]:
    return tokenizer(prompt, meta.get("pair"), meta.get("table"))


def features_fn(features: Features, keep_host: bool):
    """record -> `input_ids`, `attention_mask`, `token_type_ids`, `label` (+ the record's host
    fields when `keep_host`)."""
    tok = classifier_inputs.tokenizer(features.tokenizer, features.family, features.max_len)
    shapes = classifier_inputs.feature_shapes(
        features.family, features.max_len, features.num_token_types
    )

    def fn(rec):
        meta = json.loads(as_python(rec["meta"]))
        encoded = encode(tok, as_python(rec["prompt"]), meta)
        out = {}
        for k in classifier_inputs.FEATURES:
            out[k] = np.asarray(encoded[k], np.int32)
            if out[k].shape != tuple(shapes[k]):
                raise ValueError(f"{k} of {rec['id']!r} has shape {out[k].shape}, not {shapes[k]}")
        out["label"] = np.int32(meta.get("label_id", 0))
        if keep_host:
            out.update({k: rec[k] for k in RECORD_KEYS})
        return out

    return fn


MODEL_INPUTS = (*classifier_inputs.FEATURES, "label")


def loss(model, batch, *, train: bool):
    """Softmax cross-entropy of the fp32 logits against `label` (mean over the batch), accuracy."""
    import jax.numpy as jnp
    import optax

    logits = model(batch, deterministic=not train).astype(jnp.float32)
    labels = batch["label"]
    xent = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    accuracy = jnp.mean((jnp.argmax(logits, -1) == labels).astype(jnp.float32))
    return xent, {"accuracy": accuracy}


def predict(model, batch):
    """The fp32 logits `[B, num_labels]`."""
    import jax.numpy as jnp

    return model(batch, deterministic=True).astype(jnp.float32)


def label_names(labels, num_labels: int) -> tuple[str, ...]:
    """The checkpoint's `id2label` names, or HF's defaults `LABEL_<i>`."""
    if labels and len(labels) == num_labels:
        return tuple(labels)
    return tuple(f"LABEL_{i}" for i in range(num_labels))


# `chartjax-infer --task classify`: any DeBERTa / TAPAS classifier on fields of JSONL rows or a
# TFDS split; `--template` is the first text (DeBERTa) or the query (TAPAS), `--pair_template` the
# second text, `--table_field` the field holding a TAPAS table.
CLASSIFY = InferenceSpec(name="classify", modality="text", default_template=None, output="labels")
