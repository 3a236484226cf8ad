"""Synthesized data tables behind the CHART-Info-style charts (small built-in vocabularies).

The 2019 synthetic set was plotted from public indicator tables (World-Bank-like titles such as
"Maternal mortality ratio (modeled estimate, per 100,000 live births)", countries and years as
categories). We imitate that with a few topics, each with a unit and a plausible value range.
Every number is formatted once, here; the renderer plots `float(cell)`, the JSON writes the cell,
and the table file linearizes the same cells, so all three agree exactly.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from matplotlib import cbook

from chartjax.data import tables

# The ten 2019 class names, exact case (docs/corpora.md §3.3).
PIE = "Pie"
DONUT = "Donut"
VBOX = "Vertical box"
HBOX = "Horizontal box"
GROUPED_VBAR = "Grouped vertical bar"
GROUPED_HBAR = "Grouped horizontal bar"
STACKED_VBAR = "Stacked vertical bar"
STACKED_HBAR = "Stacked horizontal bar"
LINE = "Line"
SCATTER = "Scatter"
CHART_TYPES = (
    PIE,
    DONUT,
    VBOX,
    HBOX,
    GROUPED_VBAR,
    GROUPED_HBAR,
    STACKED_VBAR,
    STACKED_HBAR,
    LINE,
    SCATTER,
)
BAR_TYPES = (GROUPED_VBAR, GROUPED_HBAR, STACKED_VBAR, STACKED_HBAR)
BOX_TYPES = (VBOX, HBOX)
HORIZONTAL_TYPES = (GROUPED_HBAR, STACKED_HBAR, HBOX)
BOX_STATS = ("min", "first_quartile", "median", "third_quartile", "max")
BOX_HEADER = ("Min", "Q1", "Median", "Q3", "Max")


@dataclasses.dataclass(frozen=True)
class Topic:
    title: str
    unit: str  # value-axis title
    lo: float
    hi: float
    decimals: int
    signed: bool = False  # values may be negative (never for stacked bars or pies)


TOPICS = (
    Topic("Maternal mortality ratio (per 100,000 live births)", "Deaths per 100,000", 3, 1400, 0),
    Topic("School enrollment, secondary (% net)", "% net", 20, 99, 1),
    Topic("Life expectancy at birth, total (years)", "Years", 45, 85, 1),
    Topic("GDP growth (annual %)", "Annual %", -6, 12, 2, signed=True),
    Topic("Inflation, consumer prices (annual %)", "Annual %", -2, 25, 2, signed=True),
    Topic("Unemployment, total (% of labor force)", "% of labor force", 1, 28, 1),
    Topic("CO2 emissions (metric tons per capita)", "Metric tons per capita", 0.1, 20, 2),
    Topic("Access to electricity (% of population)", "% of population", 10, 100, 1),
    Topic("Internet users (per 100 people)", "Per 100 people", 1, 95, 1),
    Topic("Mobile cellular subscriptions (per 100 people)", "Per 100 people", 5, 160, 1),
    Topic("Fertility rate, total (births per woman)", "Births per woman", 1.1, 7, 2),
    Topic("Forest area (% of land area)", "% of land area", 2, 75, 1),
    Topic("Military expenditure (% of GDP)", "% of GDP", 0.5, 8, 2),
    Topic("Exports of goods and services (current US$ billions)", "US$ billions", 2, 900, 1),
    Topic("Population, total (millions)", "Millions", 0.5, 300, 2),
    Topic("Agricultural land (% of land area)", "% of land area", 5, 80, 1),
    Topic("Firms experiencing losses due to theft (% of firms)", "% of firms", 2, 40, 1),
    Topic("Average monthly rent (US$)", "US$", 250, 3200, 0),
    Topic("Smartphone shipments (million units)", "Million units", 5, 320, 1),
    Topic("Revenue by segment (million euros)", "Million euros", 10, 5000, 0),
    Topic("Share of respondents who agree (%)", "Share of respondents", 3, 90, 0),
    Topic("Average household size (persons)", "Persons", 1.8, 6.5, 2),
    Topic("Tourist arrivals (thousands)", "Thousands", 50, 9000, 0),
    Topic("Net migration rate (per 1,000 people)", "Per 1,000 people", -12, 12, 1, signed=True),
    Topic("Research and development expenditure (% of GDP)", "% of GDP", 0.1, 4.5, 2),
    Topic("Hospital beds (per 1,000 people)", "Per 1,000 people", 0.5, 13, 1),
)

COUNTRIES = (
    "Haiti",
    "Germany",
    "Latvia",
    "St. Lucia",
    "Costa Rica",
    "Iceland",
    "Lebanon",
    "Belize",
    "Cameroon",
    "Nigeria",
    "Malaysia",
    "San Marino",
    "Peru",
    "Norway",
    "Kenya",
    "Viet Nam",
    "Chile",
    "Portugal",
    "Ghana",
    "Mongolia",
    "Uruguay",
    "Nepal",
    "Canada",
    "Jordan",
    "Fiji",
    "Bolivia",
    "Denmark",
    "Senegal",
    "Sri Lanka",
    "Tunisia",
    "Paraguay",
    "Japan",
    "Egypt",
)
REGIONS = (
    "East Asia & Pacific",
    "Europe & Central Asia",
    "Latin America & Caribbean",
    "Middle East & North Africa",
    "North America",
    "South Asia",
    "Sub-Saharan Africa",
    "Heavily indebted poor countries (HIPC)",
    "Pacific island small states",
    "Euro area",
    "Low income",
    "Upper middle income",
    "High income",
    "Small states",
    "Arab World",
)
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
AGE_GROUPS = ("18-24", "25-34", "35-44", "45-54", "55-64", "65+")
SECTORS = (
    "Agriculture",
    "Manufacturing",
    "Construction",
    "Retail",
    "Transport",
    "Finance",
    "Education",
    "Health care",
    "Public sector",
    "Tourism",
    "Energy",
    "Mining",
)
PRODUCTS = (
    "Smartphones",
    "Tablets",
    "Laptops",
    "Wearables",
    "Smart TVs",
    "Consoles",
    "Cameras",
    "Headphones",
    "Printers",
    "Monitors",
)
SERIES_GROUPS = (
    ("Male", "Female"),
    ("Urban", "Rural"),
    ("Public", "Private"),
    ("Online", "In store"),
    ("Domestic", "International"),
    ("Low", "Medium", "High"),
    ("Q1", "Q2", "Q3", "Q4"),
)


@dataclasses.dataclass(frozen=True)
class ChartData:
    """One chart's underlying table.

    Rows are categories (for scatter: the points, category = the x value); columns are series
    (box plots: the five statistics). `cells[row][col]` are the formatted numbers.
    """

    chart_type: str
    title: str
    x_label: str  # title of the independent-variable axis (the 2019 "x-axis")
    y_label: str  # title of the value axis
    categories: tuple[str, ...]
    series: tuple[str, ...]
    cells: tuple[tuple[str, ...], ...]
    fliers: tuple[tuple[float, ...], ...] = ()  # box plots: drawn outliers (not in the table)

    def values(self) -> np.ndarray:
        """[rows, columns] float array of the cells."""
        return np.array([[float(c) for c in row] for row in self.cells], dtype=np.float64)

    def linearized(self) -> str:
        if self.chart_type in BOX_TYPES:
            header = (self.x_label, *BOX_HEADER)
        elif self.chart_type == SCATTER:
            header = (self.x_label, self.y_label)
        else:
            header = (self.x_label, *self.series)
        rows = [(cat, *row) for cat, row in zip(self.categories, self.cells)]
        return tables.linearize(header, rows, title=self.title)


def _fmt(value: float, decimals: int) -> str:
    text = f"{value:.{decimals}f}"
    return f"{0:.{decimals}f}" if float(text) == 0 else text  # no "-0.0"


def _pick(rng: np.random.Generator, pool, n: int) -> tuple[str, ...]:
    return tuple(str(pool[i]) for i in rng.choice(len(pool), size=n, replace=False))


def _categories(rng: np.random.Generator, n: int) -> tuple[str, tuple[str, ...]]:
    """An axis title and n distinct category names (only vocabularies with at least n names)."""
    kinds = ["years"]
    kinds += [
        k
        for k, pool in (
            ("Country Name", COUNTRIES),
            ("Region", REGIONS),
            ("Sector", SECTORS),
            ("Product", PRODUCTS),
        )
        if len(pool) >= n
    ]
    kinds += ["Month"] if n <= len(MONTHS) else []
    kinds += ["Age group"] if n <= len(AGE_GROUPS) else []
    kind = kinds[rng.integers(len(kinds))]
    if kind == "years":
        step = int(rng.choice([1, 1, 2, 5]))
        # Long series with a coarse step would start before 1960: start at 1960 then.
        start = int(rng.integers(1960, max(1961, 2020 - step * n)))
        return "Year", tuple(str(start + step * i) for i in range(n))
    if kind == "Month":
        start = int(rng.integers(0, len(MONTHS) - n + 1))
        return "Month", MONTHS[start : start + n]
    if kind == "Age group":
        return "Age group", AGE_GROUPS[:n]
    pool = {"Country Name": COUNTRIES, "Region": REGIONS, "Sector": SECTORS, "Product": PRODUCTS}[
        kind
    ]
    return kind, _pick(rng, pool, n)


def _series_names(rng: np.random.Generator, n: int, avoid: tuple[str, ...]) -> tuple[str, ...]:
    kind = rng.integers(3)
    groups = [g for g in SERIES_GROUPS if len(g) >= n]
    if kind == 0 and groups:
        group = groups[rng.integers(len(groups))]
        return tuple(group[:n])
    if kind == 1:
        pool = [c for c in COUNTRIES if c not in avoid]
        return _pick(rng, pool, n)
    years = sorted(int(y) for y in rng.choice(np.arange(1970, 2019), size=n, replace=False))
    names = tuple(str(y) for y in years)
    return names if not set(names) & set(avoid) else _pick(rng, [c for c in COUNTRIES], n)


def _title(rng: np.random.Generator, topic: Topic, x_label: str, cats: tuple[str, ...]) -> str:
    form = rng.integers(4)
    if form == 0 or not cats:
        return topic.title
    if form == 1 and x_label == "Year":
        return f"{topic.title}, {cats[0]}-{cats[-1]}"
    if form == 2:
        return f"{topic.title} by {x_label.lower().replace(' name', '')}"
    return f"{topic.title} in selected {'economies' if x_label == 'Country Name' else 'groups'}"


def _series_values(rng, topic: Topic, n_rows: int, n_cols: int, stacked: bool) -> np.ndarray:
    lo, hi = topic.lo, topic.hi
    if stacked or not topic.signed:
        lo = max(lo, 0.0)
    if stacked:  # each series a share of the topic's range, so the totals stay inside it
        lo, hi = lo / n_cols, hi / n_cols
        lo = max(lo, hi * 0.05)
    # A smooth-ish level per series plus noise, so lines look like indicators, not white noise.
    base = rng.uniform(lo, hi, size=(1, n_cols))
    walk = np.cumsum(rng.normal(0, 0.1 * (hi - lo), size=(n_rows, n_cols)), axis=0)
    # Reflect at the range ends instead of clipping (clipping makes runs of equal values).
    unit = np.mod((base + walk - lo) / (hi - lo), 2.0)
    vals = lo + (hi - lo) * np.where(unit > 1.0, 2.0 - unit, unit)
    if rng.random() < 0.3:
        vals = rng.uniform(lo, hi, size=(n_rows, n_cols))
    return vals


def _format_grid(vals: np.ndarray, decimals: int) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(_fmt(v, decimals) for v in row) for row in vals)


def _count(rng: np.random.Generator, lo: int, hi: int, cap: int | None) -> int:
    """`rng.integers(lo, hi)`, drawn from `[min(lo, cap), min(hi, cap + 1))` under a cap."""
    if cap is None:
        return int(rng.integers(lo, hi))
    return int(rng.integers(min(lo, cap), min(hi, cap + 1)))


def check_caps(
    max_categories: int | None, max_topics: int | None, max_series: int | None = None
) -> None:
    """Raises ValueError, naming the option, for a cap below 1 (None means no cap)."""
    caps = (("max_categories", max_categories), ("max_topics", max_topics))
    for name, cap in (*caps, ("max_series", max_series)):
        if cap is not None and cap < 1:
            raise ValueError(f"{name} must be >= 1, got {cap}")


def synthesize(
    rng: np.random.Generator,
    chart_type: str,
    max_categories: int | None = None,
    max_topics: int | None = None,
    max_series: int | None = None,
) -> ChartData:
    """Draws one realistic table for `chart_type`.

    `max_categories` caps the table rows (categories; scatter points) for short tables;
    `max_topics` draws topics from the first `max_topics` of `TOPICS` only; `max_series` caps
    the series of bar and line charts (1: single-series bars, plain bar charts filed under the
    grouped/stacked classes; whether the 2019 release has such charts is [unverified]). None
    keeps the default ranges and the default random stream.
    """
    check_caps(max_categories, max_topics, max_series)
    n_topics = len(TOPICS) if max_topics is None else min(max_topics, len(TOPICS))
    if chart_type not in CHART_TYPES:
        raise ValueError(f"unknown chart type {chart_type!r}; expected one of {CHART_TYPES}")
    topic = TOPICS[rng.integers(n_topics)]
    dec = topic.decimals
    if chart_type == SCATTER:
        return _scatter(rng, topic, max_categories, n_topics)
    if chart_type in BOX_TYPES:
        return _box(rng, topic, chart_type, max_categories)
    if chart_type in (PIE, DONUT):
        while topic.signed:  # a pie needs positive parts
            topic = TOPICS[rng.integers(n_topics)]  # TOPICS[0] is unsigned: this ends
        n = _count(rng, 2, 8, max_categories)
        x_label, cats = _categories(rng, n)
        vals = rng.uniform(max(topic.lo, topic.hi * 0.03), topic.hi, size=(n, 1))
        return ChartData(
            chart_type,
            _title(rng, topic, x_label, cats),
            x_label,
            topic.unit,
            cats,
            (topic.unit,),
            _format_grid(vals, topic.decimals),
        )
    if chart_type == LINE:
        n_rows, n_cols = _count(rng, 4, 16, max_categories), _count(rng, 1, 5, max_series)
    else:
        n_rows, n_cols = _count(rng, 2, 9, max_categories), _count(rng, 2, 5, max_series)
    x_label, cats = _categories(rng, n_rows)
    names = _series_names(rng, n_cols, cats) if n_cols > 1 else (topic.unit,)
    vals = _series_values(rng, topic, n_rows, n_cols, stacked=chart_type.startswith("Stacked"))
    return ChartData(
        chart_type,
        _title(rng, topic, x_label, cats),
        x_label,
        topic.unit,
        cats,
        names,
        _format_grid(vals, dec),
    )


def _scatter(
    rng: np.random.Generator, topic: Topic, max_categories: int | None, n_topics: int
) -> ChartData:
    other = TOPICS[rng.integers(n_topics)]
    n = _count(rng, 12, 60, max_categories)
    x = rng.uniform(other.lo, other.hi, size=n)
    slope = rng.normal(0, 1) * (topic.hi - topic.lo) / max(other.hi - other.lo, 1e-6)
    y = topic.lo + (topic.hi - topic.lo) * 0.5 + slope * (x - x.mean()) * 0.4
    y = np.clip(y + rng.normal(0, 0.12 * (topic.hi - topic.lo), size=n), topic.lo, topic.hi)
    x_dec = other.decimals + 1
    x_cells = tuple(_fmt(v, x_dec) for v in x)
    y_cells = _format_grid(y[:, None], topic.decimals)
    title = f"{topic.title} vs. {other.title.split(' (')[0]}"
    return ChartData(SCATTER, title, other.unit, topic.unit, x_cells, ("",), y_cells)


def _box(
    rng: np.random.Generator, topic: Topic, chart_type: str, max_categories: int | None
) -> ChartData:
    n = _count(rng, 2, 8, max_categories)
    x_label, cats = _categories(rng, n)
    lo, hi = max(topic.lo, 0.0), topic.hi
    dec = max(topic.decimals, 1)
    rows, fliers = [], []
    for _ in range(n):
        center = rng.uniform(lo, hi)
        spread = rng.uniform(0.05, 0.25) * (hi - lo)
        sample = rng.lognormal(0, rng.uniform(0.2, 0.8), size=int(rng.integers(15, 80)))
        sample = np.clip(center + spread * (sample - np.median(sample)), lo, hi)
        st = cbook.boxplot_stats(sample, whis=1.5)[0]
        stats = [st["whislo"], st["q1"], st["med"], st["q3"], st["whishi"]]
        cells = tuple(_fmt(v, dec) for v in stats)
        rows.append(cells)
        # Outliers beyond the rounded whiskers only, so the drawing matches the table.
        lo_w, hi_w = float(cells[0]), float(cells[4])
        fliers.append(tuple(float(v) for v in st["fliers"] if v < lo_w or v > hi_w))
    return ChartData(
        chart_type,
        _title(rng, topic, x_label, cats),
        x_label,
        topic.unit,
        cats,
        BOX_STATS,
        tuple(rows),
        tuple(fliers),
    )
