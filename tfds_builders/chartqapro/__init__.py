"""ChartQAPro TFDS builder (`tfds build tfds_builders/chartqapro --manual_dir=...`)."""

from .chartqapro import Builder

__all__ = ["Builder"]
