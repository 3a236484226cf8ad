"""Imports every module that defines gin configurables, so gin files can name them."""

from chartjax import evaluate, mesh, optim, train  # noqa: F401
from chartjax.models import configurables, relation_network  # noqa: F401
from chartjax.tasks import (  # noqa: F401
    chart_info,
    chart_to_text,
    chartcheck,
    deplot,
    figureqa,
    registry,
    seq2seq,
    seq2seq_synthetic,
    synthetic,
)
