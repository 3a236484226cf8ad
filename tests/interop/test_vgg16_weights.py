"""VGG-16 weight loaders (chartjax/interop/vgg16_weights.py) on files with the real key names:
reduced-width Keras notop .h5 (Keras 1 names, and the names Keras 3 writes) and torchvision .pth
files checked value by value; once, a full-shape notop file of
`keras.applications.VGG16(weights=None)` against Keras's own forward pass."""

from __future__ import annotations

import numpy as np
import pytest

from chartjax.interop import vgg16_weights
from chartjax.models.relation_network import vgg16
from tests.interop.vgg16_files import (
    TINY_WIDTHS,
    random_weights,
    write_keras_h5,
    write_torchvision_pth,
)


def _expected(widths=TINY_WIDTHS):
    return [k for k, _ in vgg16.layer_shapes(widths)]


def _assert_same(got, want):
    assert len(got) == len(want) == 13
    for (k, b), (wk, wb) in zip(got, want):
        assert k.dtype == np.float32 and k.shape == wk.shape
        np.testing.assert_array_equal(k, wk)
        np.testing.assert_array_equal(b, wb)


def test_keras_h5_real_names(tmp_path):
    weights = random_weights()
    path = tmp_path / "vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5"
    write_keras_h5(path, weights)
    got, fmt = vgg16_weights.load(str(path), expected=_expected())
    assert fmt == "keras_h5" and vgg16_weights.PREPROCESSING[fmt] == "caffe"
    _assert_same(got, weights)


def test_keras3_legacy_names_and_model_weights_nesting(tmp_path):
    # Keras 3's legacy layout names datasets `<layer>/kernel` (nested groups in HDF5), and a
    # whole-model save puts the layer groups under model_weights; neither has the _W_1:0 names.
    import h5py

    weights = random_weights(seed=1)
    path = tmp_path / "keras3.h5"
    with h5py.File(path, "w") as f:
        root = f.create_group("model_weights")
        for name, (k, b) in zip(vgg16_weights.KERAS_LAYERS, weights):
            g = root.create_group(name)
            # bias first: the loader tells them apart by rank, not order
            g.attrs["weight_names"] = [f"{name}/bias".encode(), f"{name}/kernel".encode()]
            g.create_dataset(f"{name}/kernel", data=k)
            g.create_dataset(f"{name}/bias", data=b)
    _assert_same(vgg16_weights.load(str(path))[0], weights)


def test_torchvision_pth_transposed(tmp_path):
    weights = random_weights(seed=2)
    path = tmp_path / "vgg16-397923af.pth"
    write_torchvision_pth(path, weights)
    got, fmt = vgg16_weights.load(str(path), expected=_expected())
    assert fmt == "torchvision" and vgg16_weights.PREPROCESSING[fmt] == "torch"
    _assert_same(got, weights)
    # One element by hand: HWIO[h, w, i, o] == OIHW[o, i, h, w].
    import torch

    state = torch.load(path, weights_only=True)
    assert got[2][0][2, 0, 1, 2] == state["features.5.weight"].numpy()[2, 1, 2, 0]
    # torchvision's features stack (conv 3x3 pad 1, ReLU, MaxPool2d(2, 2)) in torch on the
    # file's own tensors equals ours on the loaded weights: the layout is not just self-inverse.
    import jax.numpy as jnp

    x = np.random.default_rng(0).standard_normal((1, 3, 64, 96)).astype(np.float32)
    t = torch.from_numpy(x)
    for i in vgg16_weights.TORCH_INDICES:
        w, b = state[f"features.{i}.weight"], state[f"features.{i}.bias"]
        t = torch.relu(torch.nn.functional.conv2d(t, w, b, padding=1))
        if i + 2 not in vgg16_weights.TORCH_INDICES:  # a pool follows at index i + 2
            t = torch.nn.functional.max_pool2d(t, 2, 2)
    ours = vgg16.VGG16Features(got, TINY_WIDTHS)(jnp.asarray(x.transpose(0, 2, 3, 1)))
    np.testing.assert_allclose(
        np.asarray(ours), t.numpy().transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5
    )


def test_errors_name_the_file_and_key(tmp_path, monkeypatch):
    import h5py

    weights = random_weights()
    path = tmp_path / "w.h5"
    write_keras_h5(path, weights)
    with pytest.raises(ValueError, match=r"w\.h5: block1_conv1 kernel .* needs \(3, 3, 3, 64\)"):
        vgg16_weights.load(str(path), expected=_expected(vgg16.WIDTHS))
    with h5py.File(path, "a") as f:
        del f["block4_conv2"]
    with pytest.raises(KeyError, match=r"w\.h5: no layer 'block4_conv2'"):
        vgg16_weights.load(str(path))
    pth = tmp_path / "w.pth"
    write_torchvision_pth(pth, weights)
    import torch

    state = torch.load(pth, weights_only=True)
    del state["features.26.bias"]
    torch.save(state, pth)
    with pytest.raises(KeyError, match=r"w\.pth: no 'features\.26\.bias'"):
        vgg16_weights.load(str(pth))
    with pytest.raises(ValueError, match=r"w\.bin: cannot tell .* suffix '\.bin'"):
        (tmp_path / "w.bin").write_bytes(b"")
        vgg16_weights.load(str(tmp_path / "w.bin"))
    with pytest.raises(FileNotFoundError, match="nope.h5"):
        vgg16_weights.load(str(tmp_path / "nope.h5"))
    # torch absent: a clear error naming the file and the extra.
    import builtins

    real_import = builtins.__import__

    def no_torch(name, *a, **k):
        if name == "torch":
            raise ImportError("No module named 'torch'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    with pytest.raises(ImportError, match=r"w\.pth .* needs torch: pip install 'chartjax\[hf\]'"):
        vgg16_weights.load(str(pth))


def test_preprocessing_matches_keras_and_torchvision():
    import jax.numpy as jnp
    from keras.applications import vgg16 as keras_vgg16

    img = np.random.default_rng(0).integers(0, 256, (2, 5, 7, 3)).astype(np.float32)
    np.testing.assert_allclose(
        np.asarray(vgg16.preprocess(jnp.asarray(img), "caffe")),
        keras_vgg16.preprocess_input(img.copy()),
        atol=1e-4,
    )
    # torchvision's Normalize(mean, std) on ToTensor() (x / 255), by hand for one pixel.
    px = jnp.asarray([[[[255.0, 0.0, 51.0]]]])
    want = [(1 - 0.485) / 0.229, (0 - 0.456) / 0.224, (0.2 - 0.406) / 0.225]
    np.testing.assert_allclose(np.asarray(vgg16.preprocess(px, "torch"))[0, 0, 0], want, rtol=1e-6)
    # caffe, by hand: BGR order minus the BGR means.
    np.testing.assert_allclose(
        np.asarray(vgg16.preprocess(px, "caffe"))[0, 0, 0],
        [51 - 103.939, 0 - 116.779, 255 - 123.68],
        rtol=1e-6,
    )


@pytest.mark.slow
def test_full_notop_file_matches_keras_forward(tmp_path):
    """A full-shape notop file of a randomly initialised Keras VGG16, in the real file's layout;
    Keras itself reads it back (VGG16(weights=path)), and its pool5 on a random 320 x 480 image
    equals ours (fp32; max abs difference <= 1e-4 of the largest activation)."""
    import jax.numpy as jnp
    import keras

    hw = (320, 480, 3)
    src = keras.applications.VGG16(weights=None, include_top=False, input_shape=hw)
    weights = [tuple(src.get_layer(n).get_weights()) for n in vgg16_weights.KERAS_LAYERS]
    path = tmp_path / "vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5"
    write_keras_h5(path, weights)
    ref_model = keras.applications.VGG16(weights=str(path), include_top=False, input_shape=hw)
    img = np.random.default_rng(0).uniform(0, 255, (1, *hw)).astype(np.float32)
    ref = np.asarray(ref_model(keras.applications.vgg16.preprocess_input(img.copy())))
    assert ref.shape == (1, 10, 15, 512) and ref.max() > 0

    loaded, fmt = vgg16_weights.load(str(path), expected=_expected(vgg16.WIDTHS))
    ours = np.asarray(vgg16.VGG16Features(loaded)(vgg16.preprocess(jnp.asarray(img), "caffe")))
    assert np.abs(ours - ref).max() <= 1e-4 * np.abs(ref).max()
