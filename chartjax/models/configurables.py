"""Registers the model configs and the model factory with gin (kept apart: benchmarks import
no gin). gin files `import chartjax.models.configurables`, bind `T5Config.*` /
`Pix2StructConfig.*`, and set `train.model_fn = @build_model`, `build_model.config = @...()`.
"""

from __future__ import annotations

import gin
from flax import nnx

from chartjax.models import model_configs, pix2struct, t5

T5Config = gin.external_configurable(model_configs.T5Config, module="chartjax.models")
Pix2StructConfig = gin.external_configurable(
    model_configs.Pix2StructConfig, module="chartjax.models"
)


@gin.configurable(module="chartjax.models")
def build_model(config=gin.REQUIRED, rngs: nnx.Rngs | int | None = None):
    """A freshly initialised model for `config` (T5 or Pix2Struct)."""
    rngs = 0 if rngs is None else rngs
    if isinstance(config, model_configs.Pix2StructConfig):
        return pix2struct.build(config, rngs)
    if isinstance(config, model_configs.T5Config):
        return t5.build(config, rngs)
    raise TypeError(f"build_model: unsupported config type {type(config).__name__}")
