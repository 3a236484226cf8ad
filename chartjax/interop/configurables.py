"""Registers with gin the model factories that read checkpoint files, under the names the
recipes and earlier runs' config.gin use, so that chartjax/models imports nothing from interop
(the layer order, docs/design.md).

- `hf_model_config` (`build_model.config = @hf_model_config()`, `hf_model_config.path = <HF
  checkpoint dir>`): the model exactly as that checkpoint's config.json describes it (its size
  and family, its classifier head), the way the DeBERTa / TAPAS / BART recipes start from
  official weights;
- `vgg16.build` (`train.model_fn = @vgg16.build`, `vgg16.build.cfg = @VGG16Config()`):
  FigureQA's CNN+LSTM on the ImageNet VGG-16 weights of `VGG16Config.weights_path`.
"""

from __future__ import annotations

import gin

from chartjax.interop import saved_gin, vgg16_weights


@gin.configurable(module="chartjax.models")
def hf_model_config(path=gin.REQUIRED, dtype: str = "bfloat16", overrides=None):
    """The chartjax config of the HF checkpoint directory `path` (its config.json: family,
    size, classifier head; unsupported fields are refused naming them), with activations in
    `dtype` and the fields of `overrides` (a dict, e.g. {"hidden_dropout_prob": 0.0}) replaced."""
    return saved_gin.hf_model_config(path, dtype=dtype, overrides=overrides)


build_vgg16 = gin.external_configurable(
    vgg16_weights.build, name="build", module="chartjax.models.vgg16"
)
