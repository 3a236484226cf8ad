"""chartjax: chart-understanding training and evaluation in JAX/Flax."""

__version__ = "0.1.0"
