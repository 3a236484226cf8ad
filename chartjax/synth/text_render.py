"""Text drawn as an image: the pages of the generated reading and math objectives (MatCha-style
pretraining, docs/pretraining.md).

A page is lines of cells drawn left-aligned in columns (a table without rules), black on white,
in matplotlib's DejaVu Sans (as the header renderer uses) or a font drawn from `fonts` (the
table pages and snippets draw from the chart generator's four, so that stage 1 teaches the
charts' glyphs), at a drawn point size and offset, on a canvas of a fixed size so that its patch
grid matches the charts the model reads next. PIL only: a page costs ~1-3 ms, small next to the
patches.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

COLUMN_GAP = 24  # pixels between columns
LINE_GAP = 0.35  # of the font size, between lines


DEFAULT_FAMILY = "DejaVu Sans"
DEFAULT_FONTS = (DEFAULT_FAMILY,)


@functools.lru_cache(maxsize=256)
def _font(size: int, family: str = DEFAULT_FAMILY) -> ImageFont.FreeTypeFont:
    from chartjax.data import render
    from chartjax.synth import chart_info_style

    if family == DEFAULT_FAMILY:  # matplotlib's bundled file, which findfont may not pick
        path = render.default_font_path()
    else:
        path = chart_info_style.font_file(family)
    return ImageFont.truetype(path, size=size)


def fits(
    lines: Sequence[Sequence[str]],
    size: tuple[int, int],
    font_size: int,
    family: str = DEFAULT_FAMILY,
) -> bool:
    """Whether the lines fit the canvas at this font size with no offset."""
    w, h = block_size(lines, font_size, family)
    return w <= size[0] and h <= size[1]


def _column_widths(lines: Sequence[Sequence[str]], font: ImageFont.FreeTypeFont) -> list[int]:
    """Column widths from the lines of several cells (a one-cell line, a title or a question,
    spans the columns)."""
    widths: list[int] = []
    for line in lines:
        if len(line) < 2:
            continue
        for j, cell in enumerate(line):
            w = int(np.ceil(font.getlength(cell)))
            if j == len(widths):
                widths.append(w)
            else:
                widths[j] = max(widths[j], w)
    return widths


def block_size(
    lines: Sequence[Sequence[str]], font_size: int, family: str = DEFAULT_FAMILY
) -> tuple[int, int]:
    """(width, height) in pixels of the lines drawn at `font_size`."""
    font = _font(font_size, family)
    widths = _column_widths(lines, font)
    spans = [int(np.ceil(font.getlength(line[0]))) for line in lines if len(line) == 1]
    width = max([sum(widths) + COLUMN_GAP * max(len(widths) - 1, 0), *spans])
    step = int(round(font_size * (1 + LINE_GAP)))
    return width, step * len(lines)


def render_lines(
    lines: Sequence[Sequence[str]],
    size: tuple[int, int],
    font_size: int,
    offset: tuple[int, int],
    family: str = DEFAULT_FAMILY,
) -> np.ndarray:
    """The lines (each a sequence of cells) drawn in columns from `offset`: uint8 RGBA."""
    font = _font(font_size, family)
    widths = _column_widths(lines, font)
    img = Image.new("RGBA", tuple(size), (255, 255, 255, 255))
    draw = ImageDraw.Draw(img)
    step = int(round(font_size * (1 + LINE_GAP)))
    y = offset[1]
    for line in lines:
        x = offset[0]
        for j, cell in enumerate(line):
            draw.text((x, y), cell, fill=(0, 0, 0, 255), font=font)
            x += (widths[j] if len(line) > 1 else 0) + COLUMN_GAP
        y += step
    return np.asarray(img, np.uint8)


def draw_page(
    rng: np.random.Generator,
    lines: Sequence[Sequence[str]],
    size: tuple[int, int],
    font_sizes: tuple[int, int] = (14, 30),
    fonts: Sequence[str] = DEFAULT_FONTS,
) -> np.ndarray:
    """The lines in a drawn font of `fonts` (no draw when there is one, so one-font pages are
    as before), at a drawn size (the largest that fits, at most a drawn one) and a drawn
    offset that keeps them on the canvas."""
    family = fonts[int(rng.integers(len(fonts)))] if len(fonts) > 1 else fonts[0]
    font_size = int(rng.integers(font_sizes[0], font_sizes[1] + 1))
    while font_size > 6 and not fits(lines, size, font_size, family):
        font_size -= 2
    w, h = block_size(lines, font_size, family)
    x = int(rng.integers(0, max(size[0] - w, 0) + 1))
    y = int(rng.integers(0, max(size[1] - h, 0) + 1))
    return render_lines(lines, size, font_size, (x, y), family)


def png(rgba: np.ndarray) -> bytes:
    from chartjax.synth.chart_info import encode_png

    return encode_png(np.ascontiguousarray(rgba))
