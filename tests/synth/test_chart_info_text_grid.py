"""CHART-Info generator's --text-grid (issue 28): the value and category labels moved onto a pixel
lattice, so each is the same pixels in every patch it lands in; nothing else moves."""

from __future__ import annotations

import numpy as np
import pytest

from chartjax.synth import chart_info as ci
from chartjax.synth import chart_info_axes as ax_
from chartjax.synth import chart_info_render as render

BAR = ("Grouped vertical bar",)
SIZE = (576, 416)  # Pix2Struct at 256 patches halves it to 18 x 13 patches of 16 px
GRID = 32


def _draw(index: int, grid: int, size=SIZE):
    override = ci._style_override(size, 20, grid)
    return ci.draw_chart(3, index, BAR, override, 3, 4, 1)[1]


def _labels(d):
    return list(d.value_labels) + list(d.axes[0].labels)


def _off_lattice(v: float, grid: int) -> float:
    r = v % grid
    return min(r, grid - r)


def test_value_and_category_labels_sit_on_the_lattice_inside_the_image():
    for i in range(4):
        d = _draw(i, GRID)
        assert len(d.value_labels) in (2, 3) and len(d.axes[0].labels) == len(d.value_labels)
        for t in _labels(d):
            box = ax_.extent(d, t)
            top = SIZE[1] - box.y1
            assert _off_lattice(box.x0, GRID) < 1e-6 and _off_lattice(top, GRID) < 1e-6, t
            assert box.x0 >= 0 and box.x1 <= SIZE[0] and top >= 0 and box.y0 >= 0, t


def test_only_the_labels_move():
    plain, snapped = _draw(1, 0), _draw(1, GRID)
    assert plain.style.font == snapped.style.font
    moved = {id(t) for t in _labels(snapped)}
    for a, b in zip(ax_.visible_texts(plain, False), ax_.visible_texts(snapped, False)):
        assert a.get_text() == b.get_text()
        ea, eb = ax_.extent(plain, a), ax_.extent(snapped, b)
        shift = np.abs(np.array(eb.bounds) - np.array(ea.bounds))
        if id(b) in moved:
            assert shift[2:].max() < 1e-6 and shift[:2].max() <= GRID, b  # same box, moved
        else:
            assert shift.max() < 1e-6, b  # title, value ticks, axis titles stay
    assert plain.bars == snapped.bars


def _crop(d, t) -> np.ndarray:
    box = ax_.extent(d, t)
    x0, top = round(box.x0), round(d.style.height - box.y1)
    return d.rgba()[top : top + int(box.height) + 1, x0 : x0 + int(box.width) + 1, :3]


@pytest.mark.parametrize("grid", [GRID, 0])
def test_a_label_is_the_same_pixels_at_the_same_phase_of_the_lattice(grid):
    """One chart drawn at two widths puts its labels at other x positions (the style, fonts and
    strings are the same draw). Agg draws text at whole pixels, so each label is pixel for pixel
    the same in both; with the lattice it also sits at the same phase of it (the patch sees the
    same pixels), without it the phases differ (what the lattice takes away)."""
    a, b = _draw(2, grid), _draw(2, grid, (SIZE[0] + 160, SIZE[1]))
    assert a.style.font == b.style.font
    pairs = list(zip(_labels(a), _labels(b)))
    assert all(ta.get_text() == tb.get_text() for ta, tb in pairs)
    assert all(np.array_equal(_crop(a, ta), _crop(b, tb)) for ta, tb in pairs)
    xa = [ax_.extent(a, ta).x0 for ta, _ in pairs]
    xb = [ax_.extent(b, tb).x0 for _, tb in pairs]
    assert xa != xb
    phases = [(round(u) % GRID, round(v) % GRID) for u, v in zip(xa, xb)]
    if grid:
        assert all(p == (0, 0) for p in phases), phases
    else:
        assert any(p != q for p, q in phases), phases


def test_on_lattice_keeps_the_box_inside():
    assert render._on_lattice(47.0, 10.0, 100, 32) == 32.0
    assert render._on_lattice(49.0, 10.0, 100, 32) == 64.0
    assert render._on_lattice(70.0, 40.0, 100, 32) == 32.0  # 64 + 40 would leave the image
    assert render._on_lattice(-3.0, 10.0, 100, 32) == 0.0
    assert render._on_lattice(5.0, 150.0, 100, 32) == 0.0  # longer than the room: nearest


def test_bad_grid_is_named_before_any_folder(tmp_path):
    with pytest.raises(ValueError, match="text_grid"):
        ci.generate(str(tmp_path / "a"), 1, text_grid=-1)
    assert not (tmp_path / "a").exists()


def test_cli_flag_writes_labels_on_the_lattice(tmp_path):
    import json

    from chartjax.tools.synth import main

    out = tmp_path / "cli"
    argv = ["chart_info", "--out", str(out), "--num", "2", "--seed", "3", "--types"]
    argv += ["Grouped_vertical_bar", "--size", "576x416", "--max-series", "1"]
    argv += ["--max-categories", "3", "--value-labels", "20", "--text-grid", "32"]
    assert main(argv) == 0
    for stem in ("0", "1"):
        doc = json.loads((out / "json_gt" / f"{stem}.json").read_text())
        roles = {r["id"]: r["role"] for r in doc["task3"]["output"]["text_roles"]}
        ticks = {t["id"] for t in doc["task4"]["output"]["axes"]["x-axis"]}
        boxes = [
            b["bb"]
            for b in doc["task2"]["output"]["text_blocks"]
            if roles[b["id"]] == "value_label" or b["id"] in ticks
        ]
        assert len(boxes) >= 4
        for bb in boxes:  # the annotation floors, so a float residue may note 1 px short
            assert _off_lattice(bb["x0"], GRID) <= 1 and _off_lattice(bb["y0"], GRID) <= 1, bb
