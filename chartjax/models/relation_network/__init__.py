"""FigureQA baselines (Kahou et al. 2017): Relation Network, CNN+LSTM and text-only LSTM.

Architecture as the co-author's public implementation (docs/models.md §4): a conv stack of
stride-2 3x3 convolutions, each conv -> bias -> ReLU -> BatchNorm (BN *after* the activation);
objects = feature-map cells + (row/h, col/w) coordinates; an LSTM question encoder (forget-gate
bias 1, as TF's LSTMCell) whose [c; h] state after the last real token is the question vector;
g over all ordered object pairs (i = j included), averaged; f with dropout before the activation
of its second layer; two-way logits (no, yes).
Initialization as that code too: the RN's convs and every g and f layer draw weights from a
truncated normal of std 0.1 with biases 0.1 (`REFERENCE_INIT`); the CNN+LSTM and text-only
baselines keep Glorot convs and zero biases. With LeCun-normal g/f layers and zero biases the RN
stayed at chance on an easy corpus (issue 15: the former figureqa_sanity bench; its independent
minimal RN is now the test oracle tests/models/mini_rn.py).
`RNConfig` and `build` are registered with gin in `chartjax.models.configurables`.

The room (models/relation_network/): these three baselines; vgg16.py, the CNN+LSTM on frozen
VGG-16 features, built from their question encoder and head.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.sharding import constrain

P = nnx.with_partitioning


@dataclasses.dataclass(frozen=True)
class RNConfig:
    kind: str = "rn"  # rn | cnn_lstm | text_only
    image_size: int = 256
    conv_layers: int = 5
    conv_channels: int = 64
    vocab_size: int = 128
    embed_dim: int = 64  # the CNN+LSTM baseline uses 32
    lstm_dim: int = 256
    g_layers: int = 4
    g_dim: int = 256
    f_dim: int = 256  # 512 for CNN+LSTM and text-only
    cnn_fc_dim: int = 512  # CNN+LSTM image projection
    dropout: float = 0.5
    num_classes: int = 2
    bn_momentum: float = 0.9

    @property
    def grid(self) -> int:
        return self.image_size // 2**self.conv_layers


class ConvStack(nnx.Module):
    def __init__(self, cfg: RNConfig, *, glorot: bool, rngs: nnx.Rngs):
        # RN: truncated normal std 0.1, bias 0.1; CNN+LSTM: Glorot, zero bias (docs/models.md §4).
        kinit = (
            nnx.initializers.glorot_uniform() if glorot else nnx.initializers.truncated_normal(0.1)
        )
        binit = nnx.initializers.zeros if glorot else nnx.initializers.constant(0.1)
        self.convs, self.norms = nnx.List(), nnx.List()
        cin = 3
        for _ in range(cfg.conv_layers):
            self.convs.append(
                nnx.Conv(
                    cin,
                    cfg.conv_channels,
                    (3, 3),
                    strides=(2, 2),
                    padding="SAME",
                    kernel_init=P(kinit, (None, None, "conv_in", "conv_out")),
                    bias_init=P(binit, ("conv_out",)),
                    rngs=rngs,
                )
            )
            self.norms.append(
                nnx.BatchNorm(cfg.conv_channels, momentum=cfg.bn_momentum, epsilon=1e-3, rngs=rngs)
            )
            cin = cfg.conv_channels

    def __call__(self, images: jax.Array, *, train: bool) -> jax.Array:
        x = images.astype(jnp.float32) / 255.0  # [batch, h, w, 3]
        for conv, norm in zip(self.convs, self.norms):
            x = norm(jax.nn.relu(conv(x)), use_running_average=not train)
            x = constrain(x, ("batch", None, None, None))
        return x  # [batch, grid, grid, channels]


class QuestionEncoder(nnx.Module):
    def __init__(self, cfg: RNConfig, embed_dim: int, *, rngs: nnx.Rngs):
        self.embed = nnx.Embed(
            cfg.vocab_size,
            embed_dim,
            embedding_init=P(nnx.initializers.normal(1.0), ("vocab", "embed")),
            rngs=rngs,
        )
        cell = nnx.LSTMCell(embed_dim, cfg.lstm_dim, rngs=rngs)
        # TF's LSTMCell (the co-author's encoder) adds forget_bias=1.0 to the forget gate; flax
        # has no such constant, so the forget-gate bias starts at 1 (the same function and
        # gradients). At 0 the gate halves the state at every token and the colour words,
        # three or four tokens before <END>, reached the RN's g at half the weight: on the
        # sanity corpus the RN left chance after ~550-1,000 steps instead of ~250.
        cell.hf.bias[...] = jnp.ones(cell.hf.bias.shape, cell.hf.bias.dtype)
        self.lstm = nnx.RNN(cell, return_carry=True)
        self.lstm_dim = cfg.lstm_dim

    def __call__(self, tokens: jax.Array, lengths: jax.Array) -> jax.Array:
        # An explicit zero carry: LSTMCell would otherwise draw its (zero) init from an RNG
        # stream, which cannot be mutated from inside the RNN's scan.
        zeros = jnp.zeros((tokens.shape[0], self.lstm_dim), jnp.float32)
        (c, h), _ = self.lstm(self.embed(tokens), initial_carry=(zeros, zeros), seq_lengths=lengths)
        return jnp.concatenate([c, h], axis=-1)  # [batch, 2 * lstm_dim]


# The co-author's RN (models/rn.py): every conv, g and f layer is initialized with
# tf.truncated_normal_initializer(stddev=0.1) and tf.constant_initializer(0.1). At fan-in 256
# a std of 0.1 gains ~1.3x in variance per ReLU layer where LeCun normal loses ~2x, and g and f
# stack seven of them: with LeCun g/f layers the logits hardly depended on the input at init
# (on the sanity corpus, yes-minus-no logit std 0.05 over examples, 0.012 change when the
# question is swapped, vs 0.39 and 0.31 with this init) and the RN stayed at chance for 1,000
# Adam steps, also with LeCun over the whole 644-d input of g's first layer; with std 0.1
# (with or without the 0.1 biases) it left chance after ~400-600 steps.
REFERENCE_INIT = (nnx.initializers.truncated_normal(0.1), nnx.initializers.constant(0.1))
DEFAULT_INIT = (nnx.initializers.lecun_normal(), nnx.initializers.zeros)


def _dense(din, dout, axes, rngs, init=DEFAULT_INIT, use_bias=True):
    kernel_init, bias_init = init
    return nnx.Linear(
        din,
        dout,
        use_bias=use_bias,
        kernel_init=P(kernel_init, axes),
        bias_init=P(bias_init, (axes[1],)),
        rngs=rngs,
    )


class Head(nnx.Module):
    """f: fc -> ReLU -> fc (dropout before ReLU) -> fc to logits."""

    def __init__(self, din: int, dim: int, cfg: RNConfig, *, rngs: nnx.Rngs, init=DEFAULT_INIT):
        self.fc1 = _dense(din, dim, ("embed", "mlp"), rngs, init)
        self.fc2 = _dense(dim, dim, ("mlp", "embed"), rngs, init)
        self.out = _dense(dim, cfg.num_classes, ("embed", None), rngs, init)
        self.dropout = nnx.Dropout(cfg.dropout, rngs=rngs)

    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        x = jax.nn.relu(self.fc1(x))
        x = jax.nn.relu(self.dropout(self.fc2(x), deterministic=not train))
        return self.out(x)


class RelationNetwork(nnx.Module):
    def __init__(self, cfg: RNConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.convs = ConvStack(cfg, glorot=False, rngs=rngs)
        self.question = QuestionEncoder(cfg, cfg.embed_dim, rngs=rngs)
        obj_dim, q_dim = cfg.conv_channels + 2, 2 * cfg.lstm_dim
        # g's first layer acts on [o_j; o_i; q]; it is applied to each part separately and
        # summed, which is the same affine map as on the concatenation but costs O(n) instead
        # of O(n^2) matmuls for that layer.
        # The one bias of that layer lives in g_obj_j.
        init = REFERENCE_INIT
        self.g_obj_j = _dense(obj_dim, cfg.g_dim, (None, "mlp"), rngs, init)
        self.g_obj_i = _dense(obj_dim, cfg.g_dim, (None, "mlp"), rngs, init, use_bias=False)
        self.g_q = _dense(q_dim, cfg.g_dim, ("embed", "mlp"), rngs, init, use_bias=False)
        self.g_rest = nnx.List(
            [
                _dense(
                    cfg.g_dim,
                    cfg.g_dim,
                    ("mlp", "embed") if k % 2 == 0 else ("embed", "mlp"),
                    rngs,
                    init,
                )
                for k in range(cfg.g_layers - 1)
            ]
        )
        self.f = Head(cfg.g_dim, cfg.f_dim, cfg, rngs=rngs, init=init)

    def objects(self, images: jax.Array, *, train: bool) -> jax.Array:
        fmap = self.convs(images, train=train)
        b, h, w, c = fmap.shape
        rows, cols = jnp.meshgrid(jnp.arange(h) / h, jnp.arange(w) / w, indexing="ij")
        coords = jnp.stack([rows, cols], -1).reshape(1, h * w, 2)
        return jnp.concatenate(
            [fmap.reshape(b, h * w, c), jnp.broadcast_to(coords, (b, h * w, 2))], axis=-1
        )

    def __call__(self, batch: dict, *, train: bool) -> jax.Array:
        objs = self.objects(batch["image"], train=train)  # [batch, n, obj_dim]
        q = self.question(batch["question_tokens"], batch["question_length"])
        # pair (i, j) input is [o_j; o_i; q]: rows index i, columns index j.
        a_j = self.g_obj_j(objs)[:, None, :, :]  # [batch, 1, n, g]
        a_i = self.g_obj_i(objs)[:, :, None, :]  # [batch, n, 1, g]
        x = jax.nn.relu(a_j + a_i + self.g_q(q)[:, None, None, :])  # [batch, n, n, g]
        x = constrain(x, ("batch", None, None, None))
        for layer in self.g_rest:
            x = jax.nn.relu(layer(x))
        # The mean, as the co-author's "aggregation_type": "avg"; the RN paper sums. With
        # REFERENCE_INIT a sum over the 256 pairs of a 4x4 grid starts the logits at ~500
        # (loss 276 vs 1.3; the former figureqa_sanity bench, mini_rn_sum).
        return self.f(jnp.mean(x, axis=(1, 2)), train=train)


class CNNLSTM(nnx.Module):
    def __init__(self, cfg: RNConfig, *, rngs: nnx.Rngs):
        self.convs = ConvStack(cfg, glorot=True, rngs=rngs)
        self.question = QuestionEncoder(cfg, cfg.embed_dim, rngs=rngs)
        feat = cfg.grid * cfg.grid * cfg.conv_channels
        self.img_fc = _dense(feat, cfg.cnn_fc_dim, (None, "mlp"), rngs)
        self.f = Head(cfg.cnn_fc_dim + 2 * cfg.lstm_dim, cfg.f_dim, cfg, rngs=rngs)

    def __call__(self, batch: dict, *, train: bool) -> jax.Array:
        fmap = self.convs(batch["image"], train=train)
        img = jax.nn.relu(self.img_fc(fmap.reshape(fmap.shape[0], -1)))
        q = self.question(batch["question_tokens"], batch["question_length"])
        return self.f(jnp.concatenate([img, q], -1), train=train)


class TextOnly(nnx.Module):
    def __init__(self, cfg: RNConfig, *, rngs: nnx.Rngs):
        self.question = QuestionEncoder(cfg, cfg.embed_dim, rngs=rngs)
        self.f = Head(2 * cfg.lstm_dim, cfg.f_dim, cfg, rngs=rngs)

    def __call__(self, batch: dict, *, train: bool) -> jax.Array:
        q = self.question(batch["question_tokens"], batch["question_length"])
        return self.f(q, train=train)


KINDS = {"rn": RelationNetwork, "cnn_lstm": CNNLSTM, "text_only": TextOnly}


def build(cfg: RNConfig = RNConfig(), rngs: nnx.Rngs | None = None) -> nnx.Module:
    if cfg.kind not in KINDS:
        raise ValueError(f"unknown FigureQA baseline {cfg.kind!r}; choose from {sorted(KINDS)}")
    return KINDS[cfg.kind](cfg, rngs=rngs or nnx.Rngs(0))
