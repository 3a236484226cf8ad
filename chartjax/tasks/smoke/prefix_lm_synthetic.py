"""A synthetic prefix-LM task for PaliGemma with token-id text (no corpus, no tokenizer): the
memory bench and the GPU check train PaliGemma 2 at its real sizes through chartjax-train on it.

Each example is a pure function of (seed, index), as the other smoke tasks': an image of
uniform noise in [-1, 1] (the processor's range) at `image_size`, and the text the prefix-LM
tasks feed PaliGemma (tasks/core/prefix_lm.py, without image placeholders: the loss puts them
in front): the prefix `<bos>` + `prefix_len - 1` random ids, then the suffix, which copies the
first `target_len - 1` of those ids and ends with `<eos>`. The copy is learnable from the text
alone; the image only sets the sequence length and the compute, which is what it is for.
"""

from __future__ import annotations

import gin
import numpy as np

from chartjax.data import sources
from chartjax.metrics.scores import Scores
from chartjax.tasks.core.task import Evaluation, SequenceLengths, Task

EOS, BOS = 1, 2  # Gemma's ids (pad 0)
FIRST_ID = 3


def _example(i: int, seed: int, image_size: int, prefix_len: int, target_len: int, vocab: int):
    rng = np.random.default_rng([seed, i])
    words = rng.integers(FIRST_ID, vocab, prefix_len - 1).astype(np.int32)
    prefix = np.concatenate([[BOS], words])
    suffix = np.concatenate([words[: target_len - 1], [EOS]])
    suffix = np.pad(suffix, (0, target_len - len(suffix)))  # a copy longer than the prefix
    n = prefix_len + target_len
    return {
        "image": rng.uniform(-1, 1, (image_size, image_size, 3)).astype(np.float32),
        "input_ids": np.concatenate([prefix, suffix]).astype(np.int32),
        "token_type_ids": (np.arange(n) >= prefix_len).astype(np.int32),
        "attention_mask": np.concatenate([np.ones(prefix_len), suffix != 0]).astype(np.int32),
    }


@gin.configurable("synthetic_prefix_lm_task", module="chartjax.tasks.prefix_lm_synthetic")
def make_task(
    num_train: int = 256,
    num_eval: int = 16,
    image_size: int = 16,
    prefix_len: int = 8,
    target_len: int = 6,
    vocab_size: int = 128,
    seed: int = 0,
) -> Task:
    """`image_size` must be the model's (PaliGemmaConfig.image_size), `vocab_size` at most the
    model's (ids below PaliGemma's `<image>` id)."""
    eval_offset = 10_000_000

    def featurize(example):
        # Drawn in the loader workers: an 896-pixel image is 2.4M floats.
        out = _example(example["index"], seed, image_size, prefix_len, target_len, vocab_size)
        out["id"] = example["id"]
        return out

    def loss(model, batch, *, train):
        from chartjax.tasks.core import prefix_lm

        return prefix_lm.loss(model, batch, train=train)

    def predict(model, batch):
        import jax.numpy as jnp

        from chartjax.models import paligemma

        # Teacher-forced argmax at the text positions: enough for a smoke task.
        full = paligemma.with_image_tokens(model.cfg, batch)
        logits = model(full, deterministic=True)[:, model.cfg.num_image_tokens :]
        return jnp.argmax(logits, -1).astype(jnp.int32)

    def evaluate(predictions, host, split):
        ids, types = np.asarray(host["input_ids"]), np.asarray(host["token_type_ids"])
        preds = np.asarray(predictions)[:, :-1]  # the token after each position
        weights = (types[:, 1:] == 1) & (np.asarray(host["attention_mask"])[:, 1:] == 1)
        acc = float(((preds == ids[:, 1:]) & weights).sum() / max(weights.sum(), 1))
        rows = [
            {"id": i.decode() if isinstance(i, bytes) else str(i), "prediction": p[w].tolist()}
            for i, p, w in zip(host["id"], preds, weights)
        ]
        return Evaluation(Scores(metrics={"token_accuracy": acc}), rows)

    return Task(
        name="synthetic_prefix_lm",
        source=sources.IndexedSource(
            lambda i: {"index": int(i), "id": f"prefix_lm/{int(i) - eval_offset}"},
            num_train,
            num_eval,
            eval_offset=eval_offset,
        ),
        features=lambda keep_host: featurize,
        loss=loss,
        predict=predict,
        evaluate=evaluate,
        model_inputs=("image", "input_ids", "token_type_ids", "attention_mask"),
        eval_splits=("validation",),
        host_inputs=("input_ids", "token_type_ids", "attention_mask"),
        # The text tokens (models/flops.for_task adds the image tokens).
        lengths=SequenceLengths(encoder=prefix_len, decoder=target_len),
    )
