"""chartjax: chart-understanding training and evaluation in JAX/Flax.

`chartjax.load(path)` gives a checkpoint as a model that predicts (chartjax/api.py); it is
imported on first use, so `import chartjax` stays light (no jax, no TensorFlow).
"""

from chartjax.version import __version__

__all__ = ["__version__", "load"]


def __getattr__(name: str):
    if name == "load":
        from chartjax.api import load

        return load
    raise AttributeError(f"module 'chartjax' has no attribute {name!r}")
