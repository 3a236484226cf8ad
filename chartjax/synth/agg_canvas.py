"""A Matplotlib Agg canvas for drawing many charts one after another in one process.

Matplotlib looks a text's font up, reads the font's height tables, measures and shapes (lays
out) the string anew whenever a text is measured or drawn, and its own text-metrics cache lives
and dies with one renderer; for a corpus of small charts that was about a fifth of the drawing
time. `CachingRendererAgg` keeps those results per font, size and string for the whole process
(shared by every instance), and `ReusedCanvas` keeps one renderer when the figure size changes.
Pixels are unchanged: the cached values are the ones Matplotlib computes, and every glyph is
still rendered at its text's exact subpixel position.

The hooks are Matplotlib internals (written against 3.11); where one is missing, the renderer
falls back to Matplotlib's own code path. The caches assume the font rcParams stay fixed.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from matplotlib.backends import backend_agg
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.font_manager import FontProperties, fontManager, get_font
from matplotlib.ft2font import FT2Font

# (table, line gap, ascent, descent) fields, in the order Matplotlib's Text layout tries them.
_HEIGHT_TABLES = (
    ("OS/2", "sTypoLineGap", "sTypoAscender", "sTypoDescender"),
    ("hhea", "lineGap", "ascent", "descent"),
)


@dataclasses.dataclass
class _FontCache:
    files: list  # Matplotlib's font search result (the font and its fallbacks)
    heights: dict = dataclasses.field(default_factory=dict)  # dpi -> (ascent, descent, gap)
    metrics: dict = dataclasses.field(default_factory=dict)  # (s, dpi, flags) -> (w, h, d)
    layouts: dict = dataclasses.field(default_factory=dict)  # (s, dpi, ...) -> glyph tuple


# Matplotlib >= 3.11 draws text glyph by glyph from a layout: only then is it cached here.
_LAYOUT_HOOKS = hasattr(RendererAgg, "_draw_text_glyphs_and_boxes") and hasattr(FT2Font, "_layout")
# FontProperties hash and compare by value; keys are copies, as the objects are mutable.
_FONTS: dict[FontProperties, _FontCache] = {}
# Bounds (first in, first out) so that a long run of unique strings (titles, category names)
# cannot grow memory without limit; the repeated ones (tick labels, axis names) stay warm.
MAX_FONTS = 256
MAX_STRINGS = 4096  # per font and cache


def _put(cache: dict, key, value, limit: int):
    if len(cache) >= limit:
        del cache[next(iter(cache))]  # dicts keep insertion order: the oldest entry
    cache[key] = value
    return value


def _font_cache(prop: FontProperties) -> _FontCache:
    hit = _FONTS.get(prop)
    if hit is None:
        files = fontManager._find_fonts_by_props(prop)
        hit = _put(_FONTS, prop.copy(), _FontCache(files), MAX_FONTS)
    return hit


class CachingRendererAgg(RendererAgg):
    """RendererAgg whose font look-ups, font height metrics, text measurements and glyph
    layouts come from process-wide caches (they do not depend on the canvas size)."""

    def _prepare_font(self, font_prop: FontProperties):
        # As RendererAgg._prepare_font, minus the font search.
        font = get_font(_font_cache(font_prop).files)
        font.clear()
        font.set_size(font_prop.get_size_in_points(), self.dpi)
        return font

    def get_text_width_height_descent(self, s, prop, ismath):
        if ismath:
            return super().get_text_width_height_descent(s, prop, ismath)
        cache = _font_cache(prop).metrics
        key = (s, self.dpi, backend_agg.get_hinting_flag())
        hit = cache.get(key)
        if hit is None:
            hit = super().get_text_width_height_descent(s, prop, ismath)
            _put(cache, key, hit, MAX_STRINGS)
        return hit

    def _get_font_height_metrics(self, prop: FontProperties):
        """(ascent, descent, line gap) in px, as `Text._get_layout` reads them from the font's
        tables when the renderer offers no such method (same arithmetic in the same order, so
        the floats are identical). Matplotlib >= 3.11 asks the renderer for this first."""
        entry = _font_cache(prop)
        hit = entry.heights.get(self.dpi)
        if hit is None:
            hit = (None, None, None)
            font = get_font(entry.files)
            for name, gap, ascent, descent in _HEIGHT_TABLES:
                table = font.get_sfnt_table(name)
                if table is None:
                    continue
                units_per_em = font.get_sfnt_table("head")["unitsPerEm"]
                scale = 1 / units_per_em * prop.get_size_in_points() * self.dpi / 72
                hit = (table[ascent] * scale, -table[descent] * scale, table[gap] * scale)
                break
            entry.heights[self.dpi] = hit
        return hit

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        """As RendererAgg.draw_text, with the string's glyph layout cached."""
        if ismath or not _LAYOUT_HOOKS:
            return super().draw_text(gc, x, y, s, prop, angle, ismath, mtext)
        features = mtext.get_fontfeatures() if mtext is not None else None
        language = mtext.get_language() if mtext is not None else None
        flags = backend_agg.get_hinting_flag()
        cache = _font_cache(prop).layouts
        key = (s, self.dpi, None if features is None else tuple(features), language, flags)
        items = cache.get(key)
        if items is None:
            font = self._prepare_font(prop)
            layout = font._layout(s, flags=flags, features=features, language=language)
            items = tuple((item.ft_object, item.glyph_index, item.x, item.y) for item in layout)
            _put(cache, key, items, MAX_STRINGS)
        size = prop.get_size_in_points()
        glyphs = ((ft, size, index, 0, 1, dx, dy) for ft, index, dx, dy in items)
        self._draw_text_glyphs_and_boxes(gc, x, y, angle, glyphs, [])


class ReusedCanvas(FigureCanvasAgg):
    """An Agg canvas that keeps one CachingRendererAgg, at least `min_width` wide, across
    figure sizes (the stock canvas makes a new renderer whenever the size changes).

    A figure draws only inside its own width, and the Agg y flip uses the height (a new height
    or dpi does make a new renderer), so the figure's pixels are the left `width` columns of
    the buffer: `rgba()`.
    """

    def __init__(self, figure, min_width: int = 0):
        super().__init__(figure)
        self._min_width = min_width

    def get_renderer(self):
        w, h = self.get_width_height(physical=True)
        r = getattr(self, "renderer", None)
        if (
            not isinstance(r, CachingRendererAgg)
            or r.width < w
            or r.height != h
            or r.dpi != self.figure.dpi
        ):
            r = self.renderer = CachingRendererAgg(max(w, self._min_width), h, self.figure.dpi)
        return r

    def rgba(self) -> np.ndarray:
        """The last draw's pixels, (height, width, 4) uint8: a view, not a copy."""
        w, _ = self.get_width_height(physical=True)
        return np.asarray(self.buffer_rgba())[:, :w]
