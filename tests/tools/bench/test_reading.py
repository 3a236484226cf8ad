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


def test_charts_alone_end_to_end(tmp_path):
    """--stage1_steps 0 with the lattice-aligned charts (the setting that reads, docstring):
    stage 2 from scratch alone, scored against the constant tables, curve and plot written."""
    import json

    out = tmp_path / "r"
    argv = ["--out", str(out), "--stage1_steps", "0", "--stage2_steps", "2", "--eval_every", "2"]
    argv += ["--train_charts", "6", "--heldout_charts", "3", "--size", "576x416"]
    argv += ["--text_grid", "32", "--value_labels", "20", "--split_digits", "--workers", "1"]
    argv += ["--emb_dim", "32", "--layers", "1", "--max_patches", "64", "--vocab_size", "400"]
    assert reading.main(argv) == 0
    res = json.loads((out / "reading.json").read_text())["results"]
    assert res["stage1"]["curve"] == [] and list(res["stage2"]) == ["from_scratch"]
    run = res["stage2"]["from_scratch"]
    assert [p["step"] for p in run["curve"]] == [2]
    assert 0.0 <= run["number_cells"]["exact"] <= 1.0
    assert run["reads_values"]["best_constant_rms_f1_no_title"] >= 0.0
    assert res["heldout_charts"] >= 1
    assert (out / "reading.png").stat().st_size > 0
    stamp = json.loads((out / "tfds_train" / "corpus.json").read_text())
    assert stamp["text_grid"] == 32  # the corpus says it was drawn on the lattice


def test_nothing_to_train_is_refused():
    with pytest.raises(SystemExit):
        reading.parse_args(["--out", "x", "--stage1_steps", "0", "--stage2_steps", "0"])
