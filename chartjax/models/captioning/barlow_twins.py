"""Barlow Twins (Zbontar et al. 2021): self-supervised pretraining of the ResNet-50 that
Chart-to-Text's image-captioning row uses as its encoder, on the corpus's own charts.

Two augmented views of every chart go through the same ResNet (resnet.py, global average pool) and
projector (Linear -> BatchNorm -> ReLU twice, then a bias-free Linear; 8192-8192-8192 in the paper);
each embedding dimension is standardised over the batch (the paper's affine-free BatchNorm: batch
mean, biased variance) and the cross-correlation matrix C = z1n^T z2n / N is pushed to the identity:

    loss = sum_i (1 - C_ii)^2 + lambda * sum_{i != j} C_ij^2      (lambda = 5.1e-3)

Augmentations (`augment`, in jax on the device, drawn from the model's RNG stream that the train
loop reseeds every step): a random resized crop (area fraction `crop_scale`, aspect ratio 3/4 to
4/3, bilinear, back to the input size) and, with probability 0.8, colour jitter (brightness 0.4,
contrast 0.4, saturation 0.2, in random order as in torchvision: here a fixed order), then
greyscale with probability 0.2. Departures from the paper's ImageNet pipeline, chosen for charts
and [unverified] (the Chart-to-Text paper names none): no horizontal flip (it mirrors text and
axes), no hue jitter (chart colours encode series), no Gaussian blur or solarisation (they erase
thin text and marks), crop area from 0.3 (not 0.08) so a view keeps some of the plot.

The loss and its statistics (`cross_correlation`, `barlow_twins_loss`) are plain jax functions
so the evaluation can compute them over a whole split (chartjax/tasks/chart_to_text/caption.py).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.models.captioning.resnet import ResNet, ResNetConfig

P = nnx.with_partitioning


@dataclasses.dataclass(frozen=True)
class BarlowTwinsConfig:
    resnet: ResNetConfig = ResNetConfig()
    projector: tuple[int, ...] = (8192, 8192, 8192)
    lambd: float = 5.1e-3
    bn_epsilon: float = 1e-5  # of the standardisation before C (BatchNorm1d's default)
    crop_scale: tuple[float, float] = (0.3, 1.0)
    jitter_prob: float = 0.8
    brightness: float = 0.4
    contrast: float = 0.4
    saturation: float = 0.2
    grey_prob: float = 0.2

    def __post_init__(self):
        object.__setattr__(self, "projector", tuple(int(d) for d in self.projector))
        object.__setattr__(self, "crop_scale", tuple(float(s) for s in self.crop_scale))
        lo, hi = self.crop_scale
        if not self.projector or not 0 < lo <= hi <= 1:
            raise ValueError(
                f"BarlowTwinsConfig: projector {self.projector} must be non-empty and crop_scale "
                f"{self.crop_scale} within (0, 1]"
            )


# ---------------------------------------------------------------------------- the loss -------


def cross_correlation(z1: jax.Array, z2: jax.Array, eps: float = 1e-5) -> jax.Array:
    """C `[D, D]` of the batch-standardised embeddings `[N, D]` (biased variance, as BatchNorm)."""

    def standardise(z):
        z = z.astype(jnp.float32)
        return (z - z.mean(0)) / jnp.sqrt(z.var(0) + eps)

    return standardise(z1).T @ standardise(z2) / z1.shape[0]


def barlow_twins_loss(z1, z2, lambd: float, eps: float = 1e-5) -> tuple[jax.Array, dict]:
    """(loss, stats) of one batch of paired embeddings. stats: `on_diagonal_loss` (mean of
    (1 - C_ii)^2), `off_diagonal_loss` (mean of C_ij^2, i != j): the loss's two terms per
    entry, and `on_diagonal_mean` (mean C_ii, in [-1, 1]: 1 when the views agree)."""
    c = cross_correlation(z1, z2, eps)
    d = c.shape[0]
    diag = jnp.diagonal(c)
    on_sq = jnp.sum((1.0 - diag) ** 2)
    off_sq = jnp.sum(c**2) - jnp.sum(diag**2)
    stats = {
        "on_diagonal_loss": on_sq / d,
        "off_diagonal_loss": off_sq / max(d * d - d, 1),
        "on_diagonal_mean": jnp.mean(diag),
    }
    return on_sq + lambd * off_sq, stats


# ---------------------------------------------------------------------- augmentations -------


def _crop(key, image, scale):
    """Random resized crop of one `[H, W, 3]` float image back to `[H, W]` (bilinear)."""
    h, w = image.shape[:2]
    k_area, k_ratio, k_x, k_y = jax.random.split(key, 4)
    area = jax.random.uniform(k_area, minval=scale[0], maxval=scale[1])
    ratio = jnp.exp(jax.random.uniform(k_ratio, minval=math.log(3 / 4), maxval=math.log(4 / 3)))
    cw = jnp.minimum(jnp.sqrt(area * ratio), 1.0)  # fractions of the width / height
    ch = jnp.minimum(jnp.sqrt(area / ratio), 1.0)
    x0 = jax.random.uniform(k_x) * (1.0 - cw)
    y0 = jax.random.uniform(k_y) * (1.0 - ch)
    s = jnp.stack([1.0 / ch, 1.0 / cw])  # output pixel o reads input (o - t) / s
    t = jnp.stack([-y0 * h / ch, -x0 * w / cw])
    return jax.image.scale_and_translate(
        image, image.shape, (0, 1), s, t, method="linear", antialias=True
    )


def _grey(x):
    g = x @ jnp.asarray([0.299, 0.587, 0.114])  # ITU-R 601 luma, as PIL / torchvision
    return jnp.broadcast_to(g[..., None], x.shape)


def _jitter(key, x, cfg: BarlowTwinsConfig):
    kb, kc, ks = jax.random.split(key, 3)

    def factor(k, amount):
        return jax.random.uniform(k, minval=1.0 - amount, maxval=1.0 + amount)

    x = jnp.clip(x * factor(kb, cfg.brightness), 0.0, 255.0)
    mean = jnp.mean(_grey(x))
    x = jnp.clip((x - mean) * factor(kc, cfg.contrast) + mean, 0.0, 255.0)
    g = _grey(x)
    return jnp.clip((x - g) * factor(ks, cfg.saturation) + g, 0.0, 255.0)


def augment_one(key, image, cfg: BarlowTwinsConfig):
    """One view of one chart `[H, W, 3]` (uint8 or [0, 255] floats) -> float `[H, W, 3]`."""
    k_crop, k_jit, k_pj, k_pg = jax.random.split(key, 4)
    x = _crop(k_crop, image.astype(jnp.float32), cfg.crop_scale)
    x = jnp.where(jax.random.uniform(k_pj) < cfg.jitter_prob, _jitter(k_jit, x, cfg), x)
    return jnp.where(jax.random.uniform(k_pg) < cfg.grey_prob, _grey(x), x)


def augment(key, images, cfg: BarlowTwinsConfig):
    """A view of every chart of `[B, H, W, 3]`, each with its own key."""
    keys = jax.random.split(key, images.shape[0])
    return jax.vmap(lambda k, im: augment_one(k, im, cfg))(keys, images)


# ------------------------------------------------------------------------------ the model ---


class BarlowTwins(nnx.Module):
    """`encoder` (the ResNet the captioning model takes over) + `projector`."""

    def __init__(self, cfg: BarlowTwinsConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.encoder = ResNet(cfg.resnet, rngs=rngs)
        dims = (cfg.resnet.out_channels, *cfg.projector)
        self.linears, self.norms = nnx.List(), nnx.List()
        for i, (din, dout) in enumerate(zip(dims[:-1], dims[1:])):
            last = i == len(dims) - 2
            self.linears.append(
                nnx.Linear(
                    din,
                    dout,
                    use_bias=not last,
                    kernel_init=P(nnx.initializers.lecun_normal(), ("embed", "mlp")),
                    bias_init=P(nnx.initializers.zeros, ("mlp",)),
                    rngs=rngs,
                )
            )
            if not last:
                self.norms.append(nnx.BatchNorm(dout, momentum=0.9, epsilon=1e-5, rngs=rngs))
        self.augment_rng = rngs.dropout.fork()  # reseeded by the train loop every step

    def embed(self, images, *, train: bool) -> jax.Array:
        """Projector output `[B, D]` of (already augmented) images."""
        x = jnp.mean(self.encoder(images, train=train), axis=(1, 2))
        for i, linear in enumerate(self.linears):
            x = linear(x)
            if i < len(self.norms):
                x = jax.nn.relu(self.norms[i](x, use_running_average=not train))
        return x.astype(jnp.float32)

    def views(self, images, key, *, train: bool) -> tuple[jax.Array, jax.Array]:
        """(z1, z2) of two augmented views of `images` (drawn from `key`)."""
        k1, k2 = jax.random.split(key)
        z1 = self.embed(augment(k1, images, self.cfg), train=train)
        z2 = self.embed(augment(k2, images, self.cfg), train=train)
        return z1, z2


def loss(model: BarlowTwins, batch, *, train: bool) -> tuple[jax.Array, dict]:
    """The Barlow Twins loss of `batch["image"]`, with the C statistics as aux metrics."""
    z1, z2 = model.views(jnp.asarray(batch["image"]), model.augment_rng(), train=train)
    return barlow_twins_loss(z1, z2, model.cfg.lambd, model.cfg.bn_epsilon)


EVAL_SEED = 0  # evaluation views are drawn from a fixed key: the same views at every step


def predict(model: BarlowTwins, batch) -> jax.Array:
    """`[B, 2, D]`: the two views' embeddings (eval-mode BatchNorm); the evaluation
    standardises them over the whole split."""
    z1, z2 = model.views(jnp.asarray(batch["image"]), jax.random.key(EVAL_SEED), train=False)
    return jnp.stack([z1, z2], axis=1)


def build(cfg: BarlowTwinsConfig, rngs: nnx.Rngs | int = 0) -> BarlowTwins:
    if isinstance(rngs, int):
        rngs = nnx.Rngs(params=rngs, dropout=rngs + 1)
    return BarlowTwins(cfg, rngs=rngs)
