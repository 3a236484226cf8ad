"""The ImageNet VGG-16 conv weights from the files users have, as 13 (HWIO kernel, bias) pairs
for chartjax.models.relation_network.vgg16.

- Keras `vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5` (keras-team's release, the file
  `keras.applications.VGG16(weights="imagenet", include_top=False)` downloads): one HDF5 group
  per layer, `block1_conv1` ... `block5_conv3`, whose `weight_names` attribute lists its
  datasets: `block1_conv1_W_1:0` and `block1_conv1_b_1:0` in that release (Keras 1 names, as
  public code reading the file shows), `block1_conv1/kernel` and `.../bias` when Keras 3 writes
  the legacy layout; kernels are already HWIO. A whole-model save nests the groups under
  `model_weights`. Its inputs are 'caffe' preprocessed
  (chartjax.models.relation_network.vgg16.preprocess).
- torchvision `vgg16-397923af.pth`: a state dict whose `features.{0,2,5,7,10,12,14,17,19,21,24,
  26,28}.{weight,bias}` are the 13 convs (the other indices are ReLUs and pools), OIHW kernels;
  the classifier keys are ignored. Its inputs are 'torch' normalised. Reading it needs torch
  (the `hf` extra).

`build` makes the model with the weights read here; gin names it `vgg16.build`
(chartjax/interop/configurables.py), the name earlier runs' config.gin use.
"""

from __future__ import annotations

import os

import numpy as np
from flax import nnx

from chartjax.models.relation_network import vgg16

KERAS_LAYERS = tuple(
    f"block{b}_conv{c}" for b, n in enumerate((2, 2, 3, 3, 3), start=1) for c in range(1, n + 1)
)
TORCH_INDICES = (0, 2, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28)
FORMATS = ("keras_h5", "torchvision")
PREPROCESSING = {"keras_h5": "caffe", "torchvision": "torch"}


def detect_format(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext in (".h5", ".hdf5"):
        return "keras_h5"
    if ext in (".pth", ".pt"):
        return "torchvision"
    raise ValueError(
        f"{path}: cannot tell the VGG-16 weights format from the suffix {ext!r} (.h5 for Keras, "
        f".pth for torchvision); set VGG16Config.weights_format to one of {FORMATS}"
    )


def load(path: str, fmt: str = "auto", expected=None) -> tuple[list, str]:
    """(13 (kernel HWIO float32, bias float32) pairs, format) of the file `path`; with
    `expected` (13 HWIO kernel shapes, chartjax.models.relation_network.vgg16.layer_shapes) they are
    checked."""
    path = os.path.expanduser(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"VGG-16 weights file not found: {path!r}")
    fmt = detect_format(path) if fmt == "auto" else fmt
    if fmt == "keras_h5":
        pairs = load_keras_h5(path)
    elif fmt == "torchvision":
        pairs = load_torchvision(path)
    else:
        raise ValueError(f"unknown VGG-16 weights format {fmt!r}; choose from {FORMATS}")
    _check_chain(pairs, path, expected)
    return pairs, fmt


def load_keras_h5(path: str) -> list:
    import h5py

    pairs = []
    with h5py.File(path, "r") as f:
        root = f["model_weights"] if "model_weights" in f else f
        for name in KERAS_LAYERS:
            if name not in root:
                found = sorted(root.keys())
                raise KeyError(
                    f"{path}: no layer {name!r} (a VGG-16 notop file has block1_conv1 ... "
                    f"block5_conv3); it has {found[:20]}"
                )
            group = root[name]
            names = [
                n.decode() if isinstance(n, bytes) else str(n)
                for n in group.attrs.get("weight_names", [])
            ]
            if not names:  # no attribute: every dataset under the group
                names = _datasets(group, h5py)
            arrays = {n: np.asarray(group[n], np.float32) for n in names}
            kernels = [n for n, a in arrays.items() if a.ndim == 4]
            biases = [n for n, a in arrays.items() if a.ndim == 1]
            if len(kernels) != 1 or len(biases) != 1 or len(arrays) != 2:
                raise ValueError(
                    f"{path}: layer {name} should hold one 4-d kernel and one bias, has "
                    f"{ {n: a.shape for n, a in arrays.items()} }"
                )
            pairs.append((arrays[kernels[0]], arrays[biases[0]]))
    return pairs


def _datasets(group, h5py) -> list[str]:
    names = []
    group.visititems(lambda k, v: names.append(k) if isinstance(v, h5py.Dataset) else None)
    return names


def load_torchvision(path: str) -> list:
    try:
        import torch
    except ImportError as e:
        raise ImportError(
            f"reading {path} (torchvision VGG-16 weights) needs torch: pip install 'chartjax[hf]'"
            ", or use Keras's vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5"
        ) from e
    state = torch.load(path, map_location="cpu", weights_only=True)
    pairs = []
    for i in TORCH_INDICES:
        keys = (f"features.{i}.weight", f"features.{i}.bias")
        missing = [k for k in keys if k not in state]
        if missing:
            raise KeyError(
                f"{path}: no {missing[0]!r} (torchvision VGG-16 convs are features."
                f"{{{','.join(map(str, TORCH_INDICES))}}}.weight/bias)"
            )
        w, b = (state[k].detach().to(torch.float32).numpy() for k in keys)
        if w.ndim != 4:
            raise ValueError(f"{path}: {keys[0]} has shape {tuple(w.shape)}, expected OIHW")
        pairs.append((np.ascontiguousarray(w.transpose(2, 3, 1, 0)), b))  # OIHW -> HWIO
    return pairs


def _check_chain(pairs, path, expected) -> None:
    cin = 3
    for name, (k, b) in zip(KERAS_LAYERS, pairs):
        if k.shape[:3] != (3, 3, cin) or b.shape != (k.shape[3],):
            raise ValueError(
                f"{path}: {name} kernel {k.shape} / bias {b.shape} is not a 3x3 conv from "
                f"{cin} channels"
            )
        cin = k.shape[3]
    for name, (k, _), ks in zip(KERAS_LAYERS, pairs, expected or ()):
        if k.shape != tuple(ks):
            raise ValueError(
                f"{path}: {name} kernel {k.shape}, but the model (VGG16Config.widths) needs "
                f"{tuple(ks)}"
            )


def build(cfg: vgg16.VGG16Config = vgg16.VGG16Config(), rngs: nnx.Rngs | None = None):
    """The model with the VGG-16 weights of `cfg.weights_path` (read on every build: the train
    loop builds the model for its shapes and again, jitted, for its initial state)."""
    # A recipe's unbound `VGG16_WEIGHTS = %gin.REQUIRED` arrives as gin's sentinel, not a str.
    if not isinstance(cfg.weights_path, str) or not cfg.weights_path:
        raise ValueError(
            'VGG16Config.weights_path is required (the recipes: --gin_bindings="VGG16_WEIGHTS='
            "'/path'\"): the ImageNet VGG-16 weights, Keras's "
            "vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5 or torchvision's "
            "vgg16-397923af.pth"
        )
    expected = [k for k, _ in vgg16.layer_shapes(cfg.widths)]
    weights, fmt = load(cfg.weights_path, cfg.weights_format, expected)
    mode = cfg.preprocessing if cfg.preprocessing != "auto" else PREPROCESSING[fmt]
    return vgg16.VGG16CNNLSTM(cfg, weights, mode, rngs=rngs or nnx.Rngs(0))
