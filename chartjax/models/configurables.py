"""Registers every model config and model factory with gin, in one place, so that the model
modules themselves import no gin (the GPU benchmarks run where gin is absent, DESIGN.md §7).

gin files `import chartjax.models.configurables` and bind
- `T5Config.*` / `Pix2StructConfig.*` with `train.model_fn = @build_model`,
  `build_model.config = @...()`;
- `RNConfig.*` with `train.model_fn = @relation_network.build`,
  `relation_network.build.cfg = @RNConfig()` (the FigureQA baselines).
The registered names and modules are those the saved `config.gin` of earlier runs use.
"""

from __future__ import annotations

import gin
from flax import nnx

from chartjax.models import model_configs, pix2struct, relation_network, t5

T5Config = gin.external_configurable(model_configs.T5Config, module="chartjax.models")
Pix2StructConfig = gin.external_configurable(
    model_configs.Pix2StructConfig, module="chartjax.models"
)
RNConfig = gin.external_configurable(
    relation_network.RNConfig, module="chartjax.models.relation_network"
)
build_relation_network = gin.external_configurable(
    relation_network.build, name="build", module="chartjax.models.relation_network"
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
