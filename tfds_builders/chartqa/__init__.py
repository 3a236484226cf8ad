"""ChartQA TFDS builder (`tfds build tfds_builders/chartqa --manual_dir=...`)."""

from .chartqa import Builder

__all__ = ["Builder"]
