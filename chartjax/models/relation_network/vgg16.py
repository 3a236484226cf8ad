"""FigureQA's "CNN+LSTM on VGG-16 features" baseline (Kahou et al. 2017 §4, Table 3: 52.31
validation, 52.47 test, alternated colours).

The ImageNet VGG-16 conv stack (13 3x3 convs, SAME padding, ReLU; 2x2 max-pools after convs
2, 4, 7, 10 and 13) is a frozen feature extractor: its pool5 map (512 x 10 x 15 for a 320 x 480
input) goes through the paper's head, four 3x3 convs of 128, 128, 64, 64 channels, each conv ->
ReLU -> BatchNorm (BN after the activation, as the co-author's `ops.conv2d` for the other
baselines), then fc 512 (ReLU), concatenated with the CNN+LSTM's question vector (LSTM 256,
[c; h]) and the CNN+LSTM's MLP 512 -> 512 (dropout 0.5) -> 2.

Frozen: the VGG weights are `Frozen` variables, not `nnx.Param`, so the train state keeps them
in `model_state` (chartjax/state.py): the loss is differentiated with respect to `params` only,
the optimizer never sees them (no Adam moments, no update) and checkpoints store them with the
BatchNorm statistics, not as trainable parameters. The forward pass also stops their gradient.

Inputs: the task's uint8 RGB image is resized (bilinear) to `input_hw` when its shape differs,
then normalised as the weights file expects (`preprocess`): Keras's
`vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5` wants 'caffe' mode (RGB -> BGR, minus the
ImageNet BGR means, no scaling), torchvision's `vgg16-397923af.pth` wants x / 255 normalised by
the ImageNet RGB mean and std. Weights come from chartjax/interop/vgg16_weights.py.

Not from the paper [inferred]: the head's conv stride (the paper gives only "3x3 kernels"; it
states stride 2 for the CNN+LSTM's convs but not here, so stride 1, `head_stride`), its
initialisation (Glorot, zero bias, as the CNN+LSTM in the co-author's code), and 320 x 480
(10 x 15 = pool5 of 320 x 480, the size at which the code of Hu et al. 2017 extracts CLEVR
features [unverified]).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from chartjax.models.relation_network import Head, QuestionEncoder, RNConfig, _dense
from chartjax.sharding import constrain

P = nnx.with_partitioning

BLOCKS = (2, 2, 3, 3, 3)  # convs per block; a 2x2 max-pool ends each block
WIDTHS = (64, 128, 256, 512, 512)  # channels per block (ImageNet VGG-16)
# Keras `imagenet_utils.preprocess_input(mode="caffe")`: BGR order, these means, no scaling.
CAFFE_MEAN_BGR = (103.939, 116.779, 123.68)
# torchvision's ImageNet normalisation (RGB, on x / 255).
TORCH_MEAN = (0.485, 0.456, 0.406)
TORCH_STD = (0.229, 0.224, 0.225)
PREPROCESSING = ("caffe", "torch")


class Frozen(nnx.Variable):
    """A pretrained weight that is never trained: kept in the train state's model_state."""


def preprocess(images: jax.Array, mode: str) -> jax.Array:
    """RGB images in [0, 255] -> the input the weights were trained on ('caffe' for the Keras
    file, 'torch' for the torchvision file)."""
    x = images.astype(jnp.float32)
    if mode == "caffe":
        return x[..., ::-1] - jnp.asarray(CAFFE_MEAN_BGR, jnp.float32)
    if mode == "torch":
        mean, std = jnp.asarray(TORCH_MEAN), jnp.asarray(TORCH_STD)
        return (x / 255.0 - mean) / std
    raise ValueError(f"unknown VGG-16 preprocessing {mode!r}; choose from {PREPROCESSING}")


def layer_shapes(widths=WIDTHS) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(kernel HWIO, bias) shape of each of the 13 convs for these block widths."""
    shapes, cin = [], 3
    for n, cout in zip(BLOCKS, widths, strict=True):
        for _ in range(n):
            shapes.append(((3, 3, cin, cout), (cout,)))
            cin = cout
    return shapes


class VGG16Features(nnx.Module):
    """The VGG-16 conv stack up to pool5, frozen; `weights` is a list of 13 (HWIO kernel,
    bias) pairs (chartjax.interop.vgg16_weights.load)."""

    def __init__(self, weights, widths=WIDTHS):
        shapes = layer_shapes(widths)
        if len(weights) != len(shapes):
            raise ValueError(f"VGG-16 has {len(shapes)} convs; got {len(weights)} weight pairs")
        self.kernels, self.biases = nnx.List(), nnx.List()
        for i, ((k, b), (ks, bs)) in enumerate(zip(weights, shapes)):
            if tuple(k.shape) != ks or tuple(b.shape) != bs:
                raise ValueError(
                    f"VGG-16 conv {i}: kernel {tuple(k.shape)} / bias {tuple(b.shape)}, "
                    f"expected {ks} / {bs} for widths {tuple(widths)}"
                )
            self.kernels.append(Frozen(jnp.asarray(k, jnp.float32)))
            self.biases.append(Frozen(jnp.asarray(b, jnp.float32)))

    def __call__(self, x: jax.Array) -> jax.Array:
        """Preprocessed [batch, h, w, 3] -> pool5 [batch, h / 32, w / 32, widths[-1]]."""
        i = 0
        for n in BLOCKS:
            for _ in range(n):
                k = jax.lax.stop_gradient(self.kernels[i][...])
                b = jax.lax.stop_gradient(self.biases[i][...])
                x = jax.lax.conv_general_dilated(
                    x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
                )
                x = jax.nn.relu(x + b)
                i += 1
            # 2x2 max-pool, stride 2, VALID (Keras MaxPooling2D and torch MaxPool2d(2, 2)).
            x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
            x = constrain(x, ("batch", None, None, None))
        return x


@dataclasses.dataclass(frozen=True)
class VGG16Config:
    # The ImageNet VGG-16 weights: a Keras notop .h5 or a torchvision .pth (required).
    weights_path: str | None = None
    weights_format: str = "auto"  # auto (by suffix) | keras_h5 | torchvision
    preprocessing: str = "auto"  # auto (as the weights file expects) | caffe | torch
    input_hw: tuple[int, int] = (320, 480)
    widths: tuple[int, ...] = WIDTHS  # reduced only in tests
    head_channels: tuple[int, ...] = (128, 128, 64, 64)
    head_stride: int = 1  # [inferred] module docstring
    fc_dim: int = 512
    vocab_size: int = 88
    embed_dim: int = 32  # the CNN+LSTM's question LSTM
    lstm_dim: int = 256
    f_dim: int = 512
    dropout: float = 0.5
    num_classes: int = 2
    bn_momentum: float = 0.9

    def question_config(self) -> RNConfig:
        """The CNN+LSTM config whose question encoder and MLP this model reuses."""
        return RNConfig(
            kind="cnn_lstm",
            vocab_size=self.vocab_size,
            embed_dim=self.embed_dim,
            lstm_dim=self.lstm_dim,
            f_dim=self.f_dim,
            dropout=self.dropout,
            num_classes=self.num_classes,
            bn_momentum=self.bn_momentum,
        )


def _out_size(n: int, stride: int, convs: int) -> int:
    for _ in range(convs):
        n = -(-n // stride)  # SAME padding
    return n


class VGG16CNNLSTM(nnx.Module):
    def __init__(self, cfg: VGG16Config, weights, preprocessing: str, *, rngs: nnx.Rngs):
        if preprocessing not in PREPROCESSING:
            raise ValueError(
                f"unknown VGG-16 preprocessing {preprocessing!r}; choose from {PREPROCESSING}"
            )
        self.cfg, self.preprocessing = cfg, preprocessing
        self.vgg = VGG16Features(weights, cfg.widths)
        self.convs, self.norms = nnx.List(), nnx.List()
        cin = cfg.widths[-1]
        for cout in cfg.head_channels:
            self.convs.append(
                nnx.Conv(
                    cin,
                    cout,
                    (3, 3),
                    strides=(cfg.head_stride, cfg.head_stride),
                    padding="SAME",
                    kernel_init=P(
                        nnx.initializers.glorot_uniform(), (None, None, "conv_in", "conv_out")
                    ),
                    bias_init=P(nnx.initializers.zeros, ("conv_out",)),
                    rngs=rngs,
                )
            )
            self.norms.append(
                nnx.BatchNorm(cout, momentum=cfg.bn_momentum, epsilon=1e-3, rngs=rngs)
            )
            cin = cout
        h, w = (_out_size(n // 32, cfg.head_stride, len(cfg.head_channels)) for n in cfg.input_hw)
        self.img_fc = _dense(h * w * cin, cfg.fc_dim, (None, "mlp"), rngs)
        qcfg = cfg.question_config()
        self.question = QuestionEncoder(qcfg, cfg.embed_dim, rngs=rngs)
        self.f = Head(cfg.fc_dim + 2 * cfg.lstm_dim, cfg.f_dim, qcfg, rngs=rngs)

    def features(self, images: jax.Array) -> jax.Array:
        """uint8 RGB [batch, h, w, 3] -> pool5 of the frozen VGG-16."""
        x = images.astype(jnp.float32)
        hw = tuple(self.cfg.input_hw)
        if x.shape[1:3] != hw:
            x = jax.image.resize(x, (x.shape[0], *hw, 3), "bilinear")
        return self.vgg(preprocess(x, self.preprocessing))

    def __call__(self, batch: dict, *, train: bool) -> jax.Array:
        x = self.features(batch["image"])
        for conv, norm in zip(self.convs, self.norms):
            x = norm(jax.nn.relu(conv(x)), use_running_average=not train)
            x = constrain(x, ("batch", None, None, None))
        img = jax.nn.relu(self.img_fc(x.reshape(x.shape[0], -1)))
        q = self.question(batch["question_tokens"], batch["question_length"])
        return self.f(jnp.concatenate([img, q], -1), train=train)
