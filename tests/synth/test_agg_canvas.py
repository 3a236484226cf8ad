"""The caching Agg canvas draws and measures exactly as Matplotlib's stock canvas does."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties, findfont
from matplotlib.text import Text

from chartjax.synth import agg_canvas
from chartjax.synth.agg_canvas import CachingRendererAgg, ReusedCanvas

DPI = 100
SERIF = FontProperties(fname=findfont(FontProperties(family="DejaVu Serif")), size=13.5)


def _figure(width: int, height: int = 120, shift: float = 0.0) -> Figure:
    fig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI)
    _populate(fig, shift)
    return fig


def _populate(fig: Figure, shift: float = 0.0) -> None:
    """Texts in several fonts, sizes, rotations and alignments, a multi-line one (line gap),
    a mathtext one (the uncached path), and a line and a bar (paths near the right edge)."""
    fig.patch.set_facecolor("white")
    ax = fig.add_axes((0.15, 0.2, 0.7, 0.65))
    ax.plot([0, 1, 2], [0, 2, 1], color="#1f77b4", linewidth=2.5)
    ax.bar([1.5], [1.5], width=0.3, color="#FF7F50")
    ax.set_xlim(0, 2.1)  # the bar runs past the axes: clipped at its right edge
    ax.set_title("Dark Orange vs Web Green", fontsize=11)
    ax.set_xlabel("xaxis_label", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.tick_params(axis="x", labelrotation=45)
    fig.text(0.02 + shift, 0.5, "two\nlines", fontproperties=SERIF, rotation=90)
    fig.text(0.6 + shift, 0.9, "Medium Aqua", fontsize=10.5, ha="right", va="top")
    fig.text(0.5, 0.05, r"$x^2$ mathtext", fontsize=9)


def _stock(fig: Figure) -> tuple[np.ndarray, list]:
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.array(canvas.buffer_rgba()), _extents(fig, canvas.get_renderer())


def _extents(fig: Figure, renderer) -> list:
    texts = fig.findobj(lambda a: isinstance(a, Text) and a.get_visible() and a.get_text())
    return [t.get_window_extent(renderer).bounds for t in texts]


@pytest.fixture(autouse=True)
def _cold_caches(monkeypatch):
    monkeypatch.setattr(agg_canvas, "_FONTS", {})  # each test starts with empty caches


def test_pixels_and_text_boxes_match_stock_canvas_cold_and_warm():
    want_px, want_boxes = _stock(_figure(300))
    fig = _figure(300)
    canvas = ReusedCanvas(fig)
    for _ in range(2):  # first draw fills the caches, the second reads them
        canvas.draw()
        assert isinstance(canvas.get_renderer(), CachingRendererAgg)
        np.testing.assert_array_equal(canvas.rgba(), want_px)
        assert _extents(fig, canvas.get_renderer()) == want_boxes
    assert agg_canvas._FONTS, "the caches were never used"


def test_one_renderer_across_widths_and_only_the_figure_width_is_returned():
    fig = _figure(300)
    canvas = ReusedCanvas(fig, min_width=320)
    canvas.draw()
    renderer = canvas.get_renderer()
    assert (renderer.width, renderer.height) == (320, 120)
    for width, shift in ((240, 0.1), (310, 0.0)):
        want_px, want_boxes = _stock(_figure(width, shift=shift))
        # Same figure, new size and new artists, as a generator reuses its figure.
        fig.clear()
        fig.set_size_inches(width / DPI, 120 / DPI)
        _populate(fig, shift)
        canvas.draw()
        assert canvas.get_renderer() is renderer
        assert canvas.rgba().shape == (120, width, 4)
        np.testing.assert_array_equal(canvas.rgba(), want_px)
        assert _extents(fig, canvas.get_renderer()) == want_boxes


def test_new_renderer_when_the_figure_outgrows_it_or_changes_height():
    fig = _figure(200)
    canvas = ReusedCanvas(fig, min_width=250)
    first = canvas.get_renderer()
    fig.set_size_inches(300 / DPI, 120 / DPI)
    wider = canvas.get_renderer()
    assert wider is not first and wider.width == 300
    fig.set_size_inches(300 / DPI, 150 / DPI)
    taller = canvas.get_renderer()
    assert taller is not wider and (taller.width, taller.height) == (300, 150)


def test_metrics_cache_keys_on_font_size_and_string():
    r = CachingRendererAgg(10, 10, DPI)
    plain = FontProperties(size=10)
    a = r.get_text_width_height_descent("Web Green", plain, False)
    b = r.get_text_width_height_descent("Web Green", FontProperties(size=12), False)
    c = r.get_text_width_height_descent("Web", plain, False)
    assert a[0] > c[0] and b[0] > a[0]
    stock = FigureCanvasAgg(Figure(dpi=DPI)).get_renderer()
    assert a == stock.get_text_width_height_descent("Web Green", plain, False)
    plain.set_size(12)  # a mutated key object must not alter what was stored for size 10
    assert r.get_text_width_height_descent("Web Green", FontProperties(size=10), False) == a


def test_caches_are_bounded(monkeypatch):
    monkeypatch.setattr(agg_canvas, "MAX_STRINGS", 3)
    r = CachingRendererAgg(10, 10, DPI)
    prop = FontProperties(size=9)
    sizes = [r.get_text_width_height_descent(f"label {i}", prop, False) for i in range(10)]
    (entry,) = agg_canvas._FONTS.values()
    assert [key[0] for key in entry.metrics] == ["label 7", "label 8", "label 9"]
    assert r.get_text_width_height_descent("label 0", prop, False) == sizes[0]  # recomputed
