"""tools/bench/reading.py's own arithmetic: number cells matched by row label (else position)
and column, and CPU seconds read off the sampled clock."""

from __future__ import annotations

import numpy as np
import pytest

from chartjax.tools.bench import reading

TARGET = "TITLE | Sales\nYear | Sales\n2001 | 12.5\n2002 | 7\n2003 | n/a"


def test_number_cells_are_matched_by_row_label_then_position():
    # 2002 found by its label (rows out of order); 2001's value wrong; "n/a" is not a number.
    assert reading.number_cells_exact("Year | Sales\n2002 | 7\n2001 | 12.4", TARGET) == (1, 2)
    # No labels in common: rows by position.
    assert reading.number_cells_exact("x | y\na | 12.5\nb | 7", TARGET) == (2, 2)
    assert reading.number_cells_exact("", TARGET) == (0, 2)
    rates = reading.number_cell_rates(["Year | Sales\n2001 | 12.5\n2002 | 7", ""], [TARGET] * 2)
    assert rates.tolist() == [1.0, 0.0]


def test_cpu_clock_interpolates_between_samples():
    clock = reading.CpuClock()
    clock.samples = [(100.0, 5.0), (102.0, 7.0), (104.0, 11.0)]
    assert clock.at(101.0) == pytest.approx(1.0)
    assert clock.at(103.0) == pytest.approx(4.0)
    assert clock.at(200.0) == pytest.approx(6.0)  # after the last sample: its value
    assert np.isfinite(clock.at(0.0))
