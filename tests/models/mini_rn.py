"""An independent minimal Relation Network in plain JAX, written from the paper (Santoro et al.
2017) and the FigureQA co-author's code, as a test oracle for
chartjax/models/relation_network/__init__.py (it was the third model of the former FigureQA sanity
benchmark, which trained it beside the package's RN on the same batches;
chartjax.models.relation_network's docstring cites what it
showed). Integer coordinates, g/f/conv weights truncated normal 0.1 and biases 0.1, BatchNorm
after ReLU with running averages at eval, the LSTM's [c; h] at the last real token, mean (or
sum, `agg`) over all ordered pairs of objects."""

from __future__ import annotations

import numpy as np


def mini_rn_init(
    key,
    *,
    vocab: int,
    conv_layers: int,
    ch: int,
    emb: int,
    hid: int,
    g: int,
    f: int,
    embed_std: float = 1.0,
):
    """Parameters and BatchNorm state of the independent RN: conv, g and f weights from a
    normal of std 0.1 truncated at 2 std, biases 0.1 (the co-author's models/rn.py); word
    embeddings normal with `embed_std`; LSTM weights uniform in +-1/sqrt(fan-in), forget-gate
    bias 1 (TF's LSTMCell). With embed_std ~0.1 (TF's default scale) the logits hardly depend
    on the question at init and the RN stays at chance (the `--mini-embed-std` flag)."""
    import jax
    import jax.numpy as jnp

    keys = iter(jax.random.split(key, 32))

    def tn(shape):
        return 0.1 * jax.random.truncated_normal(next(keys), -2.0, 2.0, shape)

    def uniform(shape, fan_in):
        limit = 1.0 / np.sqrt(fan_in)
        return jax.random.uniform(next(keys), shape, minval=-limit, maxval=limit)

    params = {"conv": [], "bn": []}
    state = {"bn": []}
    cin = 3
    for _ in range(conv_layers):
        params["conv"].append({"w": tn((3, 3, cin, ch)), "b": jnp.full(ch, 0.1)})
        params["bn"].append({"scale": jnp.ones(ch), "bias": jnp.zeros(ch)})
        state["bn"].append({"mean": jnp.zeros(ch), "var": jnp.ones(ch)})
        cin = ch
    params["embed"] = embed_std * jax.random.normal(next(keys), (vocab, emb))
    params["lstm"] = {
        "wx": uniform((emb, 4 * hid), emb + hid),
        "wh": uniform((hid, 4 * hid), emb + hid),
        "b": jnp.zeros(4 * hid).at[hid : 2 * hid].set(1.0),  # gates i, f, g, o
    }
    dims = [2 * (ch + 2) + 2 * hid, g, g, g, g]  # g acts on [o_j; o_i; q]
    params["g"] = [{"w": tn((a, b)), "b": jnp.full(b, 0.1)} for a, b in zip(dims, dims[1:])]
    dims = [g, f, f, 2]
    params["f"] = [{"w": tn((a, b)), "b": jnp.full(b, 0.1)} for a, b in zip(dims, dims[1:])]
    return params, state


def mini_question(params, tokens, lengths):
    """[c; h] of the LSTM after the last real token (padding steps leave the state alone)."""
    import jax
    import jax.numpy as jnp

    lstm = params["lstm"]
    hid = lstm["wh"].shape[0]
    emb = params["embed"][tokens]

    def cell(carry, inp):
        c_, h_ = carry
        xt, t = inp
        i, f_, g_, o = jnp.split(xt @ lstm["wx"] + h_ @ lstm["wh"] + lstm["b"], 4, -1)
        c2 = jax.nn.sigmoid(f_) * c_ + jax.nn.sigmoid(i) * jnp.tanh(g_)
        h2 = jax.nn.sigmoid(o) * jnp.tanh(c2)
        live = (t < lengths)[:, None]
        return (jnp.where(live, c2, c_), jnp.where(live, h2, h_)), None

    zeros = jnp.zeros((tokens.shape[0], hid))
    steps = (jnp.swapaxes(emb, 0, 1), jnp.arange(emb.shape[1]))
    (c_last, h_last), _ = jax.lax.scan(cell, (zeros, zeros), steps)
    return jnp.concatenate([c_last, h_last], -1)


def mini_rn_apply(params, state, batch, train: bool, momentum: float = 0.9, agg: str = "mean"):
    """(logits, new BatchNorm state). conv 3x3/2 -> ReLU -> BN; objects + integer (row, col)
    (paper eq. 2); LSTM [c; h] at the last real token; g on every ordered pair; f."""
    import jax
    import jax.numpy as jnp

    x = batch["image"].astype(jnp.float32) / 255.0
    new_bn = []
    for conv, bn, st in zip(params["conv"], params["bn"], state["bn"]):
        x = jax.lax.conv_general_dilated(
            x, conv["w"], (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        x = jax.nn.relu(x + conv["b"])
        if train:
            mean, var = x.mean((0, 1, 2)), x.var((0, 1, 2))
            new_bn.append(
                {
                    "mean": momentum * st["mean"] + (1 - momentum) * mean,
                    "var": momentum * st["var"] + (1 - momentum) * var,
                }
            )
        else:
            mean, var = st["mean"], st["var"]
            new_bn.append(st)
        x = (x - mean) / jnp.sqrt(var + 1e-3) * bn["scale"] + bn["bias"]
    b, h, w, c = x.shape
    rows, cols = jnp.meshgrid(jnp.arange(h), jnp.arange(w), indexing="ij")
    coords = jnp.stack([rows, cols], -1).reshape(1, h * w, 2).astype(jnp.float32)
    objs = jnp.concatenate([x.reshape(b, h * w, c), jnp.broadcast_to(coords, (b, h * w, 2))], -1)

    q = mini_question(params, batch["question_tokens"], batch["question_length"])

    n = h * w
    pairs = jnp.concatenate(
        [
            jnp.broadcast_to(objs[:, None, :, :], (b, n, n, c + 2)),  # o_j
            jnp.broadcast_to(objs[:, :, None, :], (b, n, n, c + 2)),  # o_i
            jnp.broadcast_to(q[:, None, None, :], (b, n, n, q.shape[-1])),
        ],
        -1,
    )
    z = pairs
    for layer in params["g"]:
        z = jax.nn.relu(z @ layer["w"] + layer["b"])
    z = z.sum((1, 2)) if agg == "sum" else z.mean((1, 2))
    for k, layer in enumerate(params["f"]):
        z = z @ layer["w"] + layer["b"]
        if k < len(params["f"]) - 1:
            z = jax.nn.relu(z)
    return z, {"bn": new_bn}
