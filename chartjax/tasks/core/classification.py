"""Loss and prediction shared by the yes/no classification tasks (FigureQA, smoke tasks).

jax and optax are imported inside the functions (traced in jit): the task modules are also read
by `chartjax-score`, which must run without jax.
"""

from __future__ import annotations


def softmax_xent_loss(model, batch, *, train: bool):
    import jax.numpy as jnp
    import optax

    logits = model(batch, train=train).astype(jnp.float32)
    labels = batch["label"]
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    accuracy = jnp.mean((jnp.argmax(logits, -1) == labels).astype(jnp.float32))
    return loss, {"accuracy": accuracy}


def logits(model, batch):
    """The fp32 logits of an evaluation (no dropout, BatchNorm's running averages)."""
    import jax.numpy as jnp

    return model(batch, train=False).astype(jnp.float32)


def argmax_predict(model, batch):
    import jax.numpy as jnp

    return jnp.argmax(logits(model, batch), axis=-1).astype(jnp.int32)
