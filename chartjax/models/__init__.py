"""chartjax models (Flax NNX), one room (folder) per family, and what the families share.

    layers.py, model_configs.py  T5 v1.1's blocks (Dense, RMSNorm, attention) that every family
                                 builds on; T5 / Pix2Struct configs; the attention-impl check
    decoding.py, losses.py       greedy, sampling and beam decoding; cross-entropy with z-loss
    remat.py, segments.py        rematerialization by config; packed-row attention masks
    lora.py, flops.py, tiny.py   LoRA adapters; analytic FLOPs and device peaks; tiny test sizes
    quantize.py                  LoRA's frozen base kernels stored in bf16 or int8
    configurables.py             the gin edge: every config and factory registered with gin
    t5/                          T5 / Flan-T5 (__init__), pix2struct.py (Pix2Struct, MatCha, DePlot)
    post_ln/                     the post-LN family: blocks.py, bart.py, deberta.py, tapas.py
    paligemma/                   PaliGemma (__init__), siglip.py, gemma.py
    relation_network/            FigureQA's baselines: the Relation Network, CNN+LSTM and
                                 text-only LSTM (__init__), vgg16.py (CNN+LSTM on VGG-16)
    captioning/                  Show, Attend and Tell, ResNet, Barlow Twins
    data_to_text/                Chart2text, Field-Infuse and what they share (record_seq2seq.py)

Modules that moved into a room keep their old names as aliases (chartjax/module_aliases.py),
installed here.

Parameters carry logical axis names (`nnx.with_partitioning`); `chartjax.mesh` maps them to the
device mesh when the train state is created. Flax 0.12 would otherwise try to shard every
annotated variable eagerly at creation, which needs a global mesh even in plain unit tests, so
eager sharding is switched off here, once, for every model module.
"""

import flax

from chartjax import module_aliases

flax.config.update("flax_always_shard_variable", False)
module_aliases.install()
