"""CHART-Info TFDS builder (`tfds build tfds_builders/chart_info --config=synthetic_2019 ...`)."""

from .chart_info import Builder

__all__ = ["Builder"]
