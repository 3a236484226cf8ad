"""Helpers shared by the chartjax TFDS builders (image decoding, bad-input policy)."""
