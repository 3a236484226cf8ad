"""Loss and prediction shared by the yes/no classification tasks (FigureQA, smoke tasks)."""

from __future__ import annotations

import jax.numpy as jnp
import optax


def softmax_xent_loss(model, batch, *, train: bool):
    logits = model(batch, train=train).astype(jnp.float32)
    labels = batch["label"]
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    accuracy = jnp.mean((jnp.argmax(logits, -1) == labels).astype(jnp.float32))
    return loss, {"accuracy": accuracy}


def argmax_predict(model, batch):
    return jnp.argmax(model(batch, train=False), axis=-1).astype(jnp.int32)
