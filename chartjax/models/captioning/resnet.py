"""ResNet v1.5 with bottleneck blocks (He et al. 2016), the image encoder of Chart-to-Text's
image-captioning row (Show, Attend and Tell on a ResNet-50 pretrained with Barlow Twins).

v1.5: the stride of a downsampling block sits on its 3x3 convolution (torchvision's and
big_vision's ResNet-50), not on the first 1x1 as in the 2015 paper. Every convolution is
bias-free and followed by BatchNorm (momentum 0.9, epsilon 1e-5 as torchvision); the last
BatchNorm of each residual branch starts at scale 0 (Goyal et al. 2017, used by the Barlow Twins
code's torchvision ResNet-50 only when `zero_init_residual=True`: [unverified] which it ran; we
take it, it steadies training from scratch). Stem: 7x7/2 convolution, BatchNorm, ReLU, 3x3/2
max pool. `depths=(3, 4, 6, 3)`, `width=64` is ResNet-50 (2048 output channels); tests use
`depths=(1, 1)`, `width=4`. The output is the last convolutional map `[B, h, w, 4 * width *
2**(len(depths) - 1)]`, not pooled: Show, Attend and Tell attends over its cells, Barlow Twins
averages it.

Pixels are uint8 (or floats in [0, 255]); they are scaled to [0, 1] and standardised with the
ImageNet channel statistics, as torchvision pipelines do (the constants matter little when
training from scratch on charts).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.sharding import constrain

P = nnx.with_partitioning
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


@dataclasses.dataclass(frozen=True)
class ResNetConfig:
    depths: tuple[int, ...] = (3, 4, 6, 3)  # ResNet-50
    width: int = 64  # stem channels; stage s has width * 2**s bottleneck channels
    expansion: int = 4
    bn_momentum: float = 0.9
    bn_epsilon: float = 1e-5
    zero_init_residual: bool = True

    def __post_init__(self):
        object.__setattr__(self, "depths", tuple(int(d) for d in self.depths))
        if not self.depths or min(self.depths) < 1 or self.width < 1:
            raise ValueError(
                f"ResNetConfig: depths {self.depths} and width {self.width} must be >= 1"
            )

    @property
    def out_channels(self) -> int:
        return self.width * 2 ** (len(self.depths) - 1) * self.expansion

    @property
    def stride(self) -> int:
        """Input pixels per output cell: 4 (stem) x 2 per stage after the first."""
        return 4 * 2 ** (len(self.depths) - 1)


def _conv(cin, cout, k, stride, rngs):
    return nnx.Conv(
        cin,
        cout,
        (k, k),
        strides=(stride, stride),
        padding=((k // 2, k // 2), (k // 2, k // 2)),
        use_bias=False,
        kernel_init=P(nnx.initializers.kaiming_normal(), (None, None, "conv_in", "conv_out")),
        rngs=rngs,
    )


def _norm(c, cfg: ResNetConfig, rngs, zero=False):
    return nnx.BatchNorm(
        c,
        momentum=cfg.bn_momentum,
        epsilon=cfg.bn_epsilon,
        scale_init=nnx.initializers.zeros if zero else nnx.initializers.ones,
        rngs=rngs,
    )


class Bottleneck(nnx.Module):
    """1x1 -> 3x3 (stride) -> 1x1 (x expansion), with a 1x1 projection shortcut where the shape
    changes."""

    def __init__(self, cin: int, mid: int, stride: int, cfg: ResNetConfig, *, rngs: nnx.Rngs):
        cout = mid * cfg.expansion
        self.conv1, self.bn1 = _conv(cin, mid, 1, 1, rngs), _norm(mid, cfg, rngs)
        self.conv2, self.bn2 = _conv(mid, mid, 3, stride, rngs), _norm(mid, cfg, rngs)
        self.conv3 = _conv(mid, cout, 1, 1, rngs)
        self.bn3 = _norm(cout, cfg, rngs, zero=cfg.zero_init_residual)
        self.proj = self.proj_bn = nnx.data(None)
        if stride != 1 or cin != cout:
            self.proj = nnx.data(_conv(cin, cout, 1, stride, rngs))
            self.proj_bn = nnx.data(_norm(cout, cfg, rngs))

    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        ra = not train
        y = jax.nn.relu(self.bn1(self.conv1(x), use_running_average=ra))
        y = jax.nn.relu(self.bn2(self.conv2(y), use_running_average=ra))
        y = self.bn3(self.conv3(y), use_running_average=ra)
        skip = x if self.proj is None else self.proj_bn(self.proj(x), use_running_average=ra)
        return jax.nn.relu(y + skip)


class ResNet(nnx.Module):
    def __init__(self, cfg: ResNetConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.stem, self.stem_bn = _conv(3, cfg.width, 7, 2, rngs), _norm(cfg.width, cfg, rngs)
        self.blocks = nnx.List()
        cin = cfg.width
        for s, depth in enumerate(cfg.depths):
            mid = cfg.width * 2**s
            for b in range(depth):
                stride = 2 if (b == 0 and s > 0) else 1
                self.blocks.append(Bottleneck(cin, mid, stride, cfg, rngs=rngs))
                cin = mid * cfg.expansion

    def __call__(self, images: jax.Array, *, train: bool) -> jax.Array:
        """uint8 / [0, 255] `[B, H, W, 3]` -> feature map `[B, H/stride, W/stride, C]` (fp32)."""
        x = images.astype(jnp.float32) / 255.0
        x = (x - jnp.asarray(MEAN)) / jnp.asarray(STD)
        x = jax.nn.relu(self.stem_bn(self.stem(x), use_running_average=not train))
        x = nnx.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
        for block in self.blocks:
            x = constrain(block(x, train=train), ("batch", None, None, None))
        return x
