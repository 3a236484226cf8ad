"""Imports every module that defines gin configurables, so gin files can name them."""

from chartjax import mesh, optim, train  # noqa: F401
from chartjax.models import configurables, relation_network  # noqa: F401
from chartjax.tasks import figureqa, registry, seq2seq_synthetic, synthetic  # noqa: F401
