"""Hides TensorFlow from a Python process, as if it were not installed (its import fails and
`importlib.util.find_spec` finds nothing, which TFDS and etils ask first)."""

HIDE_TF = """
import importlib.machinery, sys

class HideTF(importlib.machinery.PathFinder):  # as if TensorFlow were not installed
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            return None
        return super().find_spec(name, path, target)

sys.meta_path[:] = [HideTF if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
"""
