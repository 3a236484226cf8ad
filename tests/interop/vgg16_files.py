"""VGG-16 weight files written at test time with the key names of the real ones (shared by the
loader, model and recipe tests): Keras's notop .h5 and torchvision's .pth."""

from __future__ import annotations

import numpy as np

from chartjax.interop.vgg16_weights import KERAS_LAYERS, TORCH_INDICES
from chartjax.models.relation_network.vgg16 import layer_shapes

TINY_WIDTHS = (2, 3, 4, 4, 5)


def random_weights(widths=TINY_WIDTHS, seed=0) -> list:
    """13 (HWIO kernel, bias) float32 pairs, scaled so activations stay O(1) through the stack."""
    rng = np.random.default_rng(seed)
    out = []
    for ks, bs in layer_shapes(widths):
        fan_in = ks[0] * ks[1] * ks[2]
        out.append(
            (
                (rng.standard_normal(ks) * (2.0 / fan_in) ** 0.5).astype(np.float32),
                (rng.standard_normal(bs) * 0.1).astype(np.float32),
            )
        )
    return out


def write_keras_h5(path, weights) -> None:
    """The layout of keras-team's vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5 (Keras 1
    names): root attribute layer_names (input, convs and pools), one group per layer whose
    weight_names attribute lists `<layer>_W_1:0` (HWIO kernel) and `<layer>_b_1:0`."""
    import h5py

    convs = dict(zip(KERAS_LAYERS, weights, strict=True))
    layers = ["input_1"]
    for b, n in enumerate((2, 2, 3, 3, 3), start=1):
        layers += [f"block{b}_conv{c}" for c in range(1, n + 1)] + [f"block{b}_pool"]
    with h5py.File(path, "w") as f:
        f.attrs["layer_names"] = np.array([n.encode() for n in layers])
        f.attrs["keras_version"] = b"1.2.2"  # the release predates Keras 2 [unverified]
        f.attrs["backend"] = b"tensorflow"
        for name in layers:
            g = f.create_group(name)
            if name in convs:
                names = [f"{name}_W_1:0", f"{name}_b_1:0"]
                g.attrs["weight_names"] = np.array([n.encode() for n in names])
                g.create_dataset(names[0], data=convs[name][0])
                g.create_dataset(names[1], data=convs[name][1])
            else:
                g.attrs["weight_names"] = np.array([], dtype="S1")


def write_torchvision_pth(path, weights, *, with_classifier=True) -> None:
    """torchvision's vgg16 state dict: features.<i>.weight (OIHW) / .bias, classifier.*."""
    import torch

    state = {}
    for i, (k, b) in zip(TORCH_INDICES, weights, strict=True):
        state[f"features.{i}.weight"] = torch.from_numpy(
            np.ascontiguousarray(k.transpose(3, 2, 0, 1))
        )
        state[f"features.{i}.bias"] = torch.from_numpy(b)
    if with_classifier:
        state["classifier.0.weight"] = torch.zeros(4, 3)
        state["classifier.0.bias"] = torch.zeros(4)
    torch.save(state, path)
