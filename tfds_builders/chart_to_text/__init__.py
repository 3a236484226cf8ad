"""Chart-to-Text TFDS builder (`tfds build tfds_builders/chart_to_text --manual_dir=...`)."""

from .chart_to_text import Builder

__all__ = ["Builder"]
