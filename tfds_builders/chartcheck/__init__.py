"""ChartCheck TFDS builder (`tfds build tfds_builders/chartcheck --manual_dir=...`)."""

from .chartcheck import Builder

__all__ = ["Builder"]
