"""Synthetic seq2seq smoke tasks with token-id targets (no vocabulary, no corpus needed).

`text`: the encoder reads random tokens, the target copies the first `target_len` of them.
`patches`: the encoder reads Pix2Struct-style flattened patches (row id, col id, pixels), the
target names each of the first `target_len` patches by its mean brightness bucket.
Each example is a pure function of (seed, index), so sharded and multi-process runs read exactly
the same global batches (like `synthetic`), and both tasks are learnable.
"""

from __future__ import annotations

import gin
import numpy as np

from chartjax.data import sources
from chartjax.metrics.scores import Scores
from chartjax.tasks.core.task import Evaluation, SequenceLengths, Task

PAD, EOS, START = 0, 1, 0  # T5 conventions: pad 0, EOS 1, decoder start 0
FIRST_ID = 3


def _example(
    i: int,
    seed: int,
    modality: str,
    input_len: int,
    target_len: int,
    vocab_size: int,
    patch_dim: int,
) -> dict:
    rng = np.random.default_rng([seed, i])
    if modality == "text":
        enc = rng.integers(FIRST_ID, vocab_size, input_len).astype(np.int32)
        target = enc[:target_len]
    else:
        n = int(rng.integers(target_len, input_len + 1))  # real patches; the rest is padding
        grid = int(np.ceil(np.sqrt(n)))
        enc = np.zeros((input_len, patch_dim), np.float32)
        pixels = rng.random((n, patch_dim - 2)).astype(np.float32)
        enc[:n, 0] = np.arange(n) // grid + 1  # 1-based row ids; 0 marks padding
        enc[:n, 1] = np.arange(n) % grid + 1
        enc[:n, 2:] = pixels
        buckets = vocab_size - FIRST_ID
        target = (
            FIRST_ID
            + np.minimum((pixels[:target_len].mean(-1) - 0.4) / 0.2, 0.999).clip(0) * buckets
        ).astype(np.int32)
    targets = np.concatenate([target, [EOS]]).astype(np.int32)
    inputs = np.concatenate([[START], targets[:-1]]).astype(np.int32)
    return {
        "encoder_input_tokens": enc,
        "decoder_input_tokens": inputs,
        "decoder_target_tokens": targets,
    }


@gin.configurable("synthetic_seq2seq_task", module="chartjax.tasks.seq2seq_synthetic")
def make_task(
    modality: str = "text",
    num_train: int = 256,
    num_eval: int = 32,
    input_len: int = 16,
    target_len: int = 6,
    vocab_size: int = 128,
    patch_dim: int = 50,
    seed: int = 0,
) -> Task:
    if modality not in ("text", "patches"):
        raise ValueError(f"modality must be 'text' or 'patches', not {modality!r}")

    eval_offset = 10_000_000

    def ex(i):
        return {"index": int(i), "id": f"{modality}/{int(i) - eval_offset}"}

    def featurize(example):
        # Drawn here, in the loader workers, not in the source: at Pix2Struct-base's 2,048
        # patches an example is 1.5M random floats, too slow for one process to feed a GPU.
        out = _example(
            example["index"], seed, modality, input_len, target_len, vocab_size, patch_dim
        )
        out["id"] = example["id"]
        return out

    def loss(model, batch, *, train):
        from chartjax.models import losses

        return losses.seq2seq_loss(model, batch, deterministic=not train)

    def predict(model, batch):
        import jax.numpy as jnp

        # Teacher-forced argmax: enough for a smoke task (decoding has its own tests).
        return jnp.argmax(model(batch, deterministic=True), -1).astype(jnp.int32)

    def evaluate(predictions, host, split):
        targets = np.asarray(host["decoder_target_tokens"])
        preds = np.asarray(predictions)
        weights = targets != PAD
        token_acc = float(((preds == targets) & weights).sum() / weights.sum())
        exact = float(np.mean([(p[w] == t[w]).all() for p, t, w in zip(preds, targets, weights)]))
        rows = [
            {
                "id": i.decode() if isinstance(i, bytes) else str(i),
                "prediction": p[w].tolist(),
                "target": t[w].tolist(),
            }
            for i, p, t, w in zip(host["id"], preds, targets, weights)
        ]
        metrics = {"token_accuracy": token_acc, "sequence_accuracy": exact}
        return Evaluation(Scores(metrics=metrics), rows)

    return Task(
        name=f"synthetic_seq2seq_{modality}",
        source=sources.IndexedSource(ex, num_train, num_eval, eval_offset=eval_offset),
        features=lambda keep_host: featurize,
        loss=loss,
        predict=predict,
        evaluate=evaluate,
        model_inputs=("encoder_input_tokens", "decoder_input_tokens", "decoder_target_tokens"),
        eval_splits=("validation",),
        host_inputs=("decoder_target_tokens",),
        lengths=SequenceLengths(encoder=input_len, decoder=target_len + 1),  # MFU in the log
    )
