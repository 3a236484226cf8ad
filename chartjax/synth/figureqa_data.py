"""Source data of FigureQA-style figures: colours, colour schemes and per-type data sampling.

Follows Kahou et al. 2017, Table 1 (docs/corpora.md §4.8): vertical/horizontal bars with
2-10 bars shaped uniform random / linear / bell; line and dot-line plots with 2-7 curves of
5-20 points shaped linear / linear with noise / quadratic; pies with 2-7 slices. Values are
drawn uniformly within parameter-limited ranges. Data whose question answers would hinge on a
tie (equal extrema, medians, AUCs, roughness, or touching curves) is resampled, so every answer
is unambiguous (see `is_unambiguous`).
"""

from __future__ import annotations

import dataclasses
from functools import cache
from importlib import resources

import numpy as np

FIGURE_TYPES = ("vbar_categorical", "hbar_categorical", "pie", "line", "dot_line")
CATEGORICAL_TYPES = ("vbar_categorical", "hbar_categorical", "pie")
CONTINUOUS_TYPES = ("line", "dot_line")

# Table 1: colour set per figure type. Scheme 1 = training colours, scheme 2 = alternated.
_SCHEME1_SET = {
    "vbar_categorical": "A",
    "line": "A",
    "pie": "A",
    "hbar_categorical": "B",
    "dot_line": "B",
}

# Minimum separations that count as "no tie" (absolute units of each quantity). Chosen so that
# answers do not depend on floating-point noise; documented here because tests rely on them.
BAR_MIN_GAP = 0.5  # bar values live in [1, 100]
PIE_MIN_GAP = 0.01  # radians (~0.6 degrees)
CURVE_POINT_MIN_GAP = 0.05  # |y_a - y_b| at every shared x, y in [0, 100]
AUC_MIN_GAP = 1.0  # AUC in [0, 100*100]
ROUGHNESS_MIN_GAP = 1e-3  # a straight line has roughness ~1e-14
EXTREMUM_MIN_GAP = 0.05  # per-curve minima / maxima

MAX_RESAMPLES = 1000


@dataclasses.dataclass(frozen=True)
class Color:
    id: int  # 0-based line index in figureqa_colors.txt
    name: str
    hex: str  # "#RRGGBB"

    @property
    def rgb(self) -> list[int]:
        return [int(self.hex[i : i + 2], 16) for i in (1, 3, 5)]


@cache
def load_colors() -> tuple[Color, ...]:
    """The 100 X11 colours, far from white; `id` is the line index (as FigureQA's color*_id)."""
    text = resources.files("chartjax.synth").joinpath("figureqa_colors.txt").read_text()
    colors = []
    for lineno, line in enumerate(text.splitlines()):
        name, _, hexcode = line.partition(",")
        hexcode = hexcode.strip()
        if not name.strip() or len(hexcode) != 7 or not hexcode.startswith("#"):
            raise ValueError(f"figureqa_colors.txt line {lineno + 1}: expected 'Name, #RRGGBB'")
        colors.append(Color(lineno, name.strip(), hexcode.upper()))
    if len(colors) != 100 or len({c.name for c in colors}) != 100:
        raise ValueError("figureqa_colors.txt must hold 100 distinct colours")
    return tuple(colors)


def color_set(which: str) -> tuple[Color, ...]:
    """Set A = even line indices, set B = odd. The file is sorted by hue, so both sets span
    the whole hue circle and every colour family appears in both."""
    parity = {"A": 0, "B": 1}[which]
    return tuple(c for c in load_colors() if c.id % 2 == parity)


def scheme_set(figure_type: str, scheme: int) -> str:
    """Colour set ('A'/'B') of a figure type under scheme 1 (training) or 2 (alternated)."""
    base = _SCHEME1_SET[figure_type]
    if scheme == 1:
        return base
    if scheme == 2:
        return "B" if base == "A" else "A"
    raise ValueError(f"colour scheme must be 1 or 2, got {scheme}")


@dataclasses.dataclass
class SourceData:
    """What the figure shows. `values` are bar heights, pie spans (radians) or None (curves)."""

    figure_type: str
    colors: list[Color]
    values: list[float] | None = None  # bars: value per bar; pie: span per slice
    x: list[float] | None = None  # curves: shared x grid
    ys: list[list[float]] | None = None  # curves: y per curve
    shape: list[str] = dataclasses.field(default_factory=list)  # generating shape(s), informative


def roughness(x: np.ndarray, y: np.ndarray) -> float:
    """Paper §3.2: sum over i of |slope(i+1, i+2) - slope(i, i+1)| (finite differences)."""
    slopes = np.diff(y) / np.diff(x)
    return float(np.sum(np.abs(np.diff(slopes))))


def auc(x: np.ndarray, y: np.ndarray) -> float:
    """Area under the curve by the trapezoid rule (as sklearn.metrics.auc in the original)."""
    return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2.0)


def _min_gap_sorted(v: np.ndarray) -> float:
    return float(np.min(np.diff(np.sort(v)))) if len(v) > 1 else np.inf


def _unique_extrema(v: np.ndarray, gap: float) -> bool:
    s = np.sort(v)
    return s[1] - s[0] >= gap and s[-1] - s[-2] >= gap


def is_unambiguous(data: SourceData) -> bool:
    """True when every template's answer is decided by a clear margin (no ties)."""
    if data.figure_type in CATEGORICAL_TYPES:
        gap = PIE_MIN_GAP if data.figure_type == "pie" else BAR_MIN_GAP
        # min, max, medians and any pairwise comparison: all values pairwise separated.
        return _min_gap_sorted(np.asarray(data.values)) >= gap
    x = np.asarray(data.x)
    ys = np.asarray(data.ys)
    for a in range(len(ys)):
        for b in range(a + 1, len(ys)):
            if np.min(np.abs(ys[a] - ys[b])) < CURVE_POINT_MIN_GAP:
                return False
    return (
        _unique_extrema(np.array([auc(x, y) for y in ys]), AUC_MIN_GAP)
        and _unique_extrema(np.array([roughness(x, y) for y in ys]), ROUGHNESS_MIN_GAP)
        and _unique_extrema(ys.min(axis=1), EXTREMUM_MIN_GAP)
        and _unique_extrema(ys.max(axis=1), EXTREMUM_MIN_GAP)
    )


# ---------------------------------------------------------------- sampling


def _bar_values(rng: np.random.Generator, n: int) -> tuple[list[float], str]:
    shape = str(rng.choice(["uniform", "linear", "bell"]))
    top = rng.uniform(20.0, 100.0)
    if shape == "uniform":
        v = rng.uniform(1.0, top, n)
    elif shape == "linear":
        lo = rng.uniform(1.0, top / 2)
        v = np.linspace(lo, top, n)
        if rng.random() < 0.5:
            v = v[::-1]
        v = v + rng.uniform(-0.05, 0.05, n) * (top - lo)  # additive perturbation
    else:  # bell: a Gaussian bump over the bar positions plus a small floor
        centre = rng.uniform(0, n - 1)
        width = rng.uniform(0.15, 0.5) * n
        floor = rng.uniform(1.0, top / 4)
        pos = np.arange(n)
        v = floor + (top - floor) * np.exp(-0.5 * ((pos - centre) / width) ** 2)
        v = v + rng.uniform(-0.03, 0.03, n) * top
    return np.clip(v, 1.0, 100.0).round(2).tolist(), shape


def _curve(rng: np.random.Generator, x: np.ndarray, lo: float, hi: float) -> tuple[list, str]:
    shape = str(rng.choice(["linear", "linear_with_noise", "quadratic"]))
    span = hi - lo
    if shape == "linear":
        y0, y1 = rng.uniform(lo, hi, 2)
        y = y0 + (y1 - y0) * (x - x[0]) / (x[-1] - x[0])
    elif shape == "linear_with_noise":
        noise = 0.05 * span  # as the original generator: +-5% of the y range
        y0, y1 = rng.uniform(lo + noise, hi - noise, 2)
        y = y0 + (y1 - y0) * (x - x[0]) / (x[-1] - x[0]) + rng.uniform(-noise, noise, len(x))
    else:  # quadratic in vertex form a (x - h)^2 + k, kept inside [lo, hi] without clipping
        h = rng.uniform(x[0], x[-1])
        k = rng.uniform(lo, hi)
        reach = float(np.max((x - h) ** 2))
        opens_up = k < (lo + hi) / 2
        room = (hi - k) if opens_up else (k - lo)
        a = rng.uniform(0.2, 1.0) * room / reach * (1 if opens_up else -1)
        y = a * (x - h) ** 2 + k
    return y.tolist(), shape


def palette_subset(palette: tuple[Color, ...], size: int | None) -> tuple[Color, ...]:
    """`size` colours spread evenly over a hue-sorted colour set (all of it for None), so a
    small palette still holds distinct hues (for quick learning checks)."""
    if size is None:
        return palette
    if not 1 <= size <= len(palette):
        raise ValueError(f"colours per set must be in [1, {len(palette)}], got {size}")
    return tuple(palette[(k * len(palette)) // size] for k in range(size))


def element_range(figure_type: str) -> tuple[int, int]:
    """Table 1's element count of a figure type as [lo, hi) (bars 2-10, pie/curves 2-7)."""
    if figure_type in ("vbar_categorical", "hbar_categorical"):
        return 2, 11
    if figure_type in ("pie", *CONTINUOUS_TYPES):
        return 2, 8
    raise ValueError(f"unknown figure type {figure_type!r}")


def sample_source_data(
    rng: np.random.Generator,
    figure_type: str,
    palette: tuple[Color, ...],
    max_elements: int | None = None,
) -> SourceData:
    """Draw one figure's data. Element and point counts are drawn once (uniform, Table 1);
    only the values are resampled until `is_unambiguous` holds, so rejecting ties does not
    skew the counts. `max_elements` (>= 2) caps the element count, drawn uniformly from
    [2, max_elements] then; None keeps Table 1's range and the release's draws."""
    lo, hi = element_range(figure_type)
    if max_elements is not None:
        if max_elements < lo:
            raise ValueError(f"max_elements must be >= {lo}, got {max_elements}")
        hi = min(hi, max_elements + 1)
    count = int(rng.integers(lo, hi))
    if count > len(palette):
        raise ValueError(
            f"{figure_type} with {count} elements needs more than {len(palette)} colours"
        )
    n_points = int(rng.integers(5, 21))
    x = np.linspace(0.0, 100.0, n_points)
    for _ in range(MAX_RESAMPLES):
        if figure_type in ("vbar_categorical", "hbar_categorical"):
            values, shape = _bar_values(rng, count)
            data = SourceData(figure_type, [], values=values, shape=[shape])
        elif figure_type == "pie":
            weights = rng.uniform(0.05, 1.05, count)
            spans = (2 * np.pi * weights / weights.sum()).tolist()
            data = SourceData(figure_type, [], values=spans)
        else:
            lo = float(rng.integers(0, 60))
            hi = float(rng.integers(lo + 20, 101))
            curves = [_curve(rng, x, lo, hi) for _ in range(count)]
            data = SourceData(
                figure_type,
                [],
                x=x.tolist(),
                ys=[c[0] for c in curves],
                shape=[c[1] for c in curves],
            )
        if is_unambiguous(data):
            picks = rng.choice(len(palette), size=count, replace=False)
            data.colors = [palette[int(i)] for i in picks]
            return data
    raise RuntimeError(f"could not sample tie-free {figure_type} data in {MAX_RESAMPLES} tries")
