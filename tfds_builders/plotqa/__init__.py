"""PlotQA TFDS builder (`tfds build tfds_builders/plotqa --manual_dir=...`)."""

from .plotqa import Builder

__all__ = ["Builder"]
