"""Show, Attend and Tell (Xu et al. 2015) with soft attention: Chart-to-Text's image-captioning
row (Kantharaj et al. 2022, §4.1: a ResNet-50 encoder pretrained on the corpus's charts with
Barlow Twins, a unidirectional LSTM decoder).

Encoder: the last convolutional map of a ResNet (resnet.py; 2048 x h x w for ResNet-50),
flattened to N = h * w annotation vectors a_i. Decoder, one step t (Xu et al. §3.1.2,
eqs. 1-7):
    e_ti = w^T tanh(W_a a_i + W_h h_{t-1})      alpha_t = softmax over the real cells
    z_t  = sigmoid(f_beta(h_{t-1})) * sum_i alpha_ti a_i            (the "gating scalar" beta,
           one per channel as the common PyTorch re-implementations; [unverified] width)
    (c_t, h_t) = LSTM([E y_{t-1}; z_t], (c_{t-1}, h_{t-1}))
    p(y_t) = softmax(L_o dropout(E y_{t-1} + L_h h_t + L_z z_t))   (the deep output layer)
with (c_0, h_0) = (f_init_c(mean a), f_init_h(mean a)). Loss: token cross-entropy + alpha_c *
sum_i (1 - sum_t alpha_ti)^2 over the real cells and target steps, averaged over the batch (the
doubly stochastic attention regulariser, eq. 14). Dropout sits on the deep output only, outside
the recurrence, so the teacher-forced pass is one `lax.scan` with no RNG inside.

Xu et al. decode with beam search; `Decoding.beam_size` chooses (greedy with 1); the cache is
`{"self": {"c", "h"}, "feats", "proj", "mask"}`, so models/decoding.py's beam search reorders
only the recurrent state. Token ids: pad 0, EOS 1, decoder start 0 (the task's word vocabulary).
`freeze_encoder` runs the ResNet in eval mode under stop_gradient (features as fixed inputs);
by default it is fine-tuned with the decoder ([unverified]: the paper does not say).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.models.captioning.resnet import ResNet, ResNetConfig

P = nnx.with_partitioning
NEG = -1.0e9


@dataclasses.dataclass(frozen=True)
class ShowAttendTellConfig:
    vocab_size: int
    resnet: ResNetConfig = ResNetConfig()
    embed_dim: int = 512
    attention_dim: int = 512
    lstm_dim: int = 512
    dropout: float = 0.5
    alpha_c: float = 1.0
    freeze_encoder: bool = False
    pad_id: int = 0
    eos_id: int = 1
    decoder_start_token_id: int = 0

    def __post_init__(self):
        for f in ("vocab_size", "embed_dim", "attention_dim", "lstm_dim"):
            v = getattr(self, f)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"ShowAttendTellConfig.{f} must be a positive int, got {v!r}")


def _linear(din, dout, rngs, use_bias=True, axes=("embed", "mlp")):
    return nnx.Linear(
        din,
        dout,
        use_bias=use_bias,
        kernel_init=P(nnx.initializers.lecun_normal(), axes),
        bias_init=P(nnx.initializers.zeros, (axes[1],)),
        rngs=rngs,
    )


class Attention(nnx.Module):
    """Soft attention of eq. 4-6 over N cells with a padding mask."""

    def __init__(self, feat_dim: int, hidden_dim: int, att_dim: int, *, rngs: nnx.Rngs):
        self.feat = _linear(feat_dim, att_dim, rngs)
        self.hidden = _linear(hidden_dim, att_dim, rngs)
        self.score = _linear(att_dim, 1, rngs, axes=("mlp", None))

    def project(self, feats):
        return self.feat(feats)

    def __call__(self, proj, feats, mask, h):
        e = self.score(jnp.tanh(proj + self.hidden(h)[:, None, :]))[..., 0].astype(jnp.float32)
        alpha = jax.nn.softmax(jnp.where(mask, e, NEG), axis=-1)
        alpha = jnp.where(mask, alpha, 0.0)
        return jnp.einsum("bn,bnc->bc", alpha, feats.astype(jnp.float32)), alpha


class ShowAttendTell(nnx.Module):
    def __init__(self, cfg: ShowAttendTellConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        c, h, e = cfg.resnet.out_channels, cfg.lstm_dim, cfg.embed_dim
        self.encoder = ResNet(cfg.resnet, rngs=rngs)
        self.init_h, self.init_c = _linear(c, h, rngs), _linear(c, h, rngs)
        self.attention = Attention(c, h, cfg.attention_dim, rngs=rngs)
        self.f_beta = _linear(h, c, rngs)
        self.embed = nnx.Embed(
            cfg.vocab_size,
            e,
            embedding_init=P(nnx.initializers.normal(0.1), ("vocab", "embed")),
            rngs=rngs,
        )
        self.lstm = nnx.LSTMCell(e + c, h, rngs=rngs)
        self.out_h, self.out_z = _linear(h, e, rngs), _linear(c, e, rngs, use_bias=False)
        self.logits = _linear(e, cfg.vocab_size, rngs, axes=("embed", "vocab"))
        self.dropout = nnx.Dropout(cfg.dropout, rngs=rngs)

    # ------------------------------------------------------------------ encoder -----------

    def grid(self, height: int, width: int) -> tuple[int, int]:
        """The ResNet map's size for an image (every stride-2 layer pads: ceil)."""
        s = self.cfg.resnet.stride
        return math.ceil(height / s), math.ceil(width / s)

    def encoder_mask(self, batch) -> jax.Array:
        """Every cell is real (fixed-size images); the attention also takes a padding mask."""
        b, height, width = jnp.shape(batch["encoder_input_tokens"])[:3]
        gh, gw = self.grid(height, width)
        return jnp.ones((b, gh * gw), bool)

    def encode(self, batch, deterministic: bool = True) -> jax.Array:
        """Annotation vectors `[B, N, C]` of `encoder_input_tokens` (uint8 `[B, H, W, 3]`)."""
        images = jnp.asarray(batch["encoder_input_tokens"])
        if self.cfg.freeze_encoder:
            x = jax.lax.stop_gradient(self.encoder(images, train=False))
        else:
            x = self.encoder(images, train=not deterministic)
        return x.reshape(x.shape[0], -1, x.shape[-1])

    # ------------------------------------------------------------------ decoder -----------

    def init_cache(self, encoded, encoder_mask, max_len: int = 0) -> dict:
        m = encoder_mask.astype(jnp.float32)[..., None]
        mean = jnp.sum(encoded * m, 1) / jnp.maximum(jnp.sum(m, 1), 1.0)
        state = {"c": self.init_c(mean), "h": self.init_h(mean)}
        proj = self.attention.project(encoded)
        return {"self": state, "feats": encoded, "proj": proj, "mask": encoder_mask}

    def _recur(self, cache, tokens):
        """One recurrent step: (new cache, (h_t, z_t, E y_{t-1}, alpha_t))."""
        c, h = cache["self"]["c"], cache["self"]["h"]
        emb = self.embed(tokens)
        ctx, alpha = self.attention(cache["proj"], cache["feats"], cache["mask"], h)
        z = jax.nn.sigmoid(self.f_beta(h)) * ctx
        (c, h), _ = self.lstm((c, h), jnp.concatenate([emb, z], axis=-1))
        return {**cache, "self": {"c": c, "h": h}}, (h, z, emb, alpha)

    def _output(self, h, z, emb, deterministic: bool):
        x = self.dropout(emb + self.out_h(h) + self.out_z(z), deterministic=deterministic)
        return self.logits(x).astype(jnp.float32)

    def decode_step(self, tokens, cache, index=None):
        cache, (h, z, emb, _) = self._recur(cache, tokens)
        return self._output(h, z, emb, True), cache

    def forward(self, batch, *, deterministic: bool) -> tuple[jax.Array, jax.Array]:
        """(teacher-forced logits `[B, T, V]`, attention weights `[B, T, N]`)."""
        encoded = self.encode(batch, deterministic=deterministic)
        cache = self.init_cache(encoded, self.encoder_mask(batch))
        graphdef, params = nnx.split(self)  # the scan body reads the parameters only

        def body(cache, tokens):
            return nnx.merge(graphdef, params)._recur(cache, tokens)

        tokens = jnp.asarray(batch["decoder_input_tokens"]).T  # [T, B]
        _, (h, z, emb, alpha) = jax.lax.scan(body, cache, tokens)
        h, z, emb, alpha = (jnp.swapaxes(x, 0, 1) for x in (h, z, emb, alpha))
        return self._output(h, z, emb, deterministic), alpha

    def __call__(self, batch, *, deterministic: bool = True) -> jax.Array:
        return self.forward(batch, deterministic=deterministic)[0]


def loss(model: ShowAttendTell, batch, *, deterministic: bool) -> tuple[jax.Array, dict]:
    """Mean token cross-entropy + alpha_c x the doubly stochastic attention term (see the
    module docstring). aux: `caption_loss`, `attention_loss`, `accuracy`, `num_tokens`."""
    import optax

    logits, alpha = model.forward(batch, deterministic=deterministic)
    targets = jnp.asarray(batch["decoder_target_tokens"])
    w = (targets != model.cfg.pad_id).astype(jnp.float32)
    n = jnp.maximum(jnp.sum(w), 1.0)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
    caption = jnp.sum(ce * w) / n
    mask = model.encoder_mask(batch).astype(jnp.float32)
    coverage = jnp.sum(alpha * w[..., None], axis=1)  # [B, N]: sum over real steps
    att = jnp.mean(jnp.sum(((1.0 - coverage) ** 2) * mask, axis=-1))
    acc = jnp.sum((jnp.argmax(logits, -1) == targets) * w) / n
    total = caption + model.cfg.alpha_c * att
    aux = {"caption_loss": caption, "attention_loss": att, "accuracy": acc}
    return total, {**aux, "num_tokens": jnp.sum(w)}


def build(cfg: ShowAttendTellConfig, rngs: nnx.Rngs | int = 0) -> ShowAttendTell:
    if isinstance(rngs, int):
        rngs = nnx.Rngs(params=rngs, dropout=rngs + 1)
    return ShowAttendTell(cfg, rngs=rngs)
