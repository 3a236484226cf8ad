"""Header rendering: a question, claim or prompt drawn above the image (Pix2Struct VQA input).

As pix2struct `preprocessing_utils.render_header` (docs/models.md §1.5): wrap at 80 characters, black
text on white with 5 px padding, canvas sized by `textbbox` on a 1x1 scratch canvas; header and
image are each resized (PIL default resample) to the wider of the two widths, keeping their aspect
ratios, and stacked header-first on a white canvas. The released checkpoints used Arial, which
cannot be shipped; the default font is matplotlib's DejaVu Sans (docs/design.md §4), `font_path`
selects another. Font size: 36 as today's code and HF (12 before 2023-02, the era of the released
fine-tunes [inferred, docs/models.md §1.5]).
"""

from __future__ import annotations

import os
import textwrap

import numpy as np
from PIL import Image, ImageDraw, ImageFont


def default_font_path() -> str:
    """matplotlib's bundled DejaVu Sans."""
    import matplotlib

    return os.path.join(matplotlib.get_data_path(), "fonts", "ttf", "DejaVuSans.ttf")


def render_text(
    text: str, *, font_size: int = 36, font_path: str | None = None, padding: int = 5
) -> Image.Image:
    """The text alone, wrapped at 80 characters, as an RGB PIL image."""
    path = font_path or default_font_path()
    if not os.path.exists(path):
        raise FileNotFoundError(f"render_text: font_path {path!r} does not exist")
    font = ImageFont.truetype(path, encoding="UTF-8", size=font_size)
    wrapped = "\n".join(textwrap.TextWrapper(width=80).wrap(text=text))
    _, _, w, h = ImageDraw.Draw(Image.new("RGB", (1, 1))).textbbox((0, 0), wrapped, font=font)
    img = Image.new("RGB", (w + 2 * padding, h + 2 * padding), "white")
    ImageDraw.Draw(img).text((padding, padding), wrapped, fill="black", font=font)
    return img


def render_header(
    image, header: str, *, font_size: int = 36, font_path: str | None = None
) -> np.ndarray:
    """`image` (PIL image or uint8 `[H, W, 3]`) with `header` rendered above -> uint8 RGB array."""
    if not isinstance(image, Image.Image):
        image = Image.fromarray(np.asarray(image, np.uint8))
    image = image.convert("RGB")
    head = render_text(header, font_size=font_size, font_path=font_path)
    width = max(head.width, image.width)
    height = int(image.height * (width / image.width))
    head_height = int(head.height * (width / head.width))
    canvas = Image.new("RGB", (width, height + head_height), "white")
    canvas.paste(head.resize((width, head_height)), (0, 0))
    canvas.paste(image.resize((width, height)), (0, head_height))
    return np.asarray(canvas, np.uint8)
