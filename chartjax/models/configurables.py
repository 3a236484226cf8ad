"""Registers every model config and model factory with gin, in one place, so that the model
modules themselves import no gin (the GPU benchmarks run where gin is absent, docs/design.md §7).

gin files `import chartjax.models.configurables` and bind
- `T5Config.*` / `Pix2StructConfig.*` with `train.model_fn = @build_model`,
  `build_model.config = @...()`;
- `RNConfig.*` with `train.model_fn = @relation_network.build`,
  `relation_network.build.cfg = @RNConfig()` (the FigureQA baselines);
- `DebertaConfig.*` / `TapasConfig.*` / `BartConfig.*` the same way, or
  `build_model.config = @hf_model_config()` with `hf_model_config.path = <HF checkpoint dir>`
  (registered by chartjax/interop/configurables.py, which reads the checkpoint's files):
  the model exactly as that checkpoint's config.json describes it (its size and family, its
  classifier head), the way the DeBERTa / TAPAS / BART recipes start from official weights;
- `build_model.lora = @LoraConfig()` and `LoraConfig.*`: LoRA adapters on any of those
  (chartjax/models/lora.py; gin_configs/peft/lora.gin, docs/peft.md).
The registered names and modules are those the saved `config.gin` of earlier runs use.
"""

from __future__ import annotations

import gin
from flax import nnx

from chartjax.models import lora as lora_lib
from chartjax.models import model_configs, paligemma, relation_network, t5
from chartjax.models.data_to_text import chart2text
from chartjax.models.post_ln import bart, deberta, tapas
from chartjax.models.relation_network import vgg16
from chartjax.models.t5 import pix2struct

T5Config = gin.external_configurable(model_configs.T5Config, module="chartjax.models")
Pix2StructConfig = gin.external_configurable(
    model_configs.Pix2StructConfig, module="chartjax.models"
)
RNConfig = gin.external_configurable(
    relation_network.RNConfig, module="chartjax.models.relation_network"
)
DebertaConfig = gin.external_configurable(deberta.DebertaConfig, module="chartjax.models")
TapasConfig = gin.external_configurable(tapas.TapasConfig, module="chartjax.models")
BartConfig = gin.external_configurable(bart.BartConfig, module="chartjax.models")
# PaliGemma 1 / 2 (SigLIP + Gemma / Gemma 2, models/paligemma/); usually from an HF folder
# through `@hf_model_config()`.
PaliGemmaConfig = gin.external_configurable(paligemma.PaliGemmaConfig, module="chartjax.models")
LoraConfig = gin.external_configurable(lora_lib.LoraConfig, module="chartjax.models")
# Chart2text / Field-Infuse (Chart-to-Text Table 4): `build_model.config = @DataToTextConfig()`.
DataToTextConfig = gin.external_configurable(chart2text.DataToTextConfig, module="chartjax.models")
build_relation_network = gin.external_configurable(
    relation_network.build, name="build", module="chartjax.models.relation_network"
)
# FigureQA's CNN+LSTM on VGG-16 features: `train.model_fn = @vgg16.build`,
# `vgg16.build.cfg = @VGG16Config()`; `vgg16.build` reads the weights file, so it is registered
# by chartjax/interop/configurables.py (models import nothing from interop).
VGG16Config = gin.external_configurable(vgg16.VGG16Config, module="chartjax.models.vgg16")


BUILDERS = (
    (model_configs.Pix2StructConfig, pix2struct.build),
    (model_configs.T5Config, t5.build),
    (deberta.DebertaConfig, deberta.build),
    (tapas.TapasConfig, tapas.build),
    (bart.BartConfig, bart.build),
    (chart2text.DataToTextConfig, chart2text.build),
    (paligemma.PaliGemmaConfig, paligemma.build),
)


@gin.configurable(module="chartjax.models")
def build_model(
    config=gin.REQUIRED, rngs: nnx.Rngs | int | None = None, lora: lora_lib.LoraConfig | None = None
):
    """A freshly initialised model for `config` (T5, Pix2Struct, DeBERTa, TAPAS, BART,
    Chart2text / Field-Infuse, PaliGemma), with LoRA adapters where `lora` is given
    (models/lora.py)."""
    rngs = 0 if rngs is None else rngs
    for cls, build in BUILDERS:
        if isinstance(config, cls):
            model = build(config, rngs)
            return model if lora is None else lora_lib.apply(model, lora, rngs)
    raise TypeError(f"build_model: unsupported config type {type(config).__name__}")
