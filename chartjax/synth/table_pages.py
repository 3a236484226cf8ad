"""Tables drawn as plain text: the toy "screenshot parsing" objective (read rendered words and
numbers, write them down; docs/pretraining.md). `make_snippet` is its first step: a few of a
table's numbers and labels, large, one a line.

Page `index` is a pure function of (seed, index): a table drawn by the chart generator's own
synthesizer (chart_info_tables.synthesize: the same topics, categories, series names and value
formats as the charts) is written as text in columns (text_render), title first, in one of the
charts' four fonts (chart_info_style.FONTS) at a drawn size and place; the target is the table
linearized exactly as DePlot's chart-to-table targets (chartjax.data.tables), so the model learns
the words, the numbers and the output format before it meets a chart.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from chartjax.data import tables
from chartjax.synth import chart_info_style, text_render
from chartjax.synth import chart_info_tables as tb

DEFAULT_TYPES = (tb.GROUPED_VBAR, tb.STACKED_VBAR)
FONTS = chart_info_style.FONTS  # the glyphs the charts are drawn in


def _rng(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, index, 0x74657874])  # "text": apart from the charts


def make_page(
    seed: int,
    index: int,
    size: tuple[int, int] = (480, 360),
    types: Sequence[str] = DEFAULT_TYPES,
    max_categories: int | None = 3,
    max_topics: int | None = 4,
    max_series: int | None = None,
    font_sizes: tuple[int, int] = (14, 30),
    draw: bool = True,
) -> tuple[np.ndarray | None, str, dict]:
    """(uint8 RGBA page, linearized table target, meta) of page `index`; `draw=False` skips
    the image (None), for the target alone."""
    rng = _rng(seed, index)
    chart_type = types[int(rng.integers(len(types)))]
    data = tb.synthesize(rng, chart_type, max_categories, max_topics, max_series)
    parsed = tables.parse(data.linearized())
    lines = [(data.title,), parsed.header, *parsed.rows]
    page = text_render.draw_page(rng, lines, size, font_sizes, FONTS) if draw else None
    return page, data.linearized(), {"chart_type": chart_type, "objective": "table_page"}


def make_snippet(
    seed: int,
    index: int,
    size: tuple[int, int] = (480, 360),
    types: Sequence[str] = DEFAULT_TYPES,
    max_categories: int | None = 3,
    max_topics: int | None = 4,
    max_series: int | None = None,
    font_sizes: tuple[int, int] = (20, 40),
    draw: bool = True,
) -> tuple[np.ndarray | None, str, dict]:
    """(page, target, meta): 1-3 of a drawn table's numbers and at most one of its row labels,
    in a drawn order, one a line; the target is the lines as drawn."""
    rng = np.random.default_rng([seed, index, 0x736E6970])  # "snip"
    chart_type = types[int(rng.integers(len(types)))]
    data = tb.synthesize(rng, chart_type, max_categories, max_topics, max_series)
    numbers = [c for row in data.cells for c in row]
    picks = [numbers[int(i)] for i in rng.permutation(len(numbers))[: int(rng.integers(1, 4))]]
    if rng.random() < 0.5:
        picks.append(data.categories[int(rng.integers(len(data.categories)))])
    lines = [picks[int(i)] for i in rng.permutation(len(picks))]
    rows = [(x,) for x in lines]
    page = text_render.draw_page(rng, rows, size, font_sizes, FONTS) if draw else None
    return page, tables.ROW_SEP.join(lines), {"chart_type": chart_type, "objective": "snippet"}
