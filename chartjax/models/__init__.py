"""chartjax models (Flax NNX).

Parameters carry logical axis names (`nnx.with_partitioning`); `chartjax.mesh` maps them to the
device mesh when the train state is created. Flax 0.12 would otherwise try to shard every
annotated variable eagerly at creation, which needs a global mesh even in plain unit tests, so
eager sharding is switched off here, once, for every model module.
"""

import flax

flax.config.update("flax_always_shard_variable", False)
