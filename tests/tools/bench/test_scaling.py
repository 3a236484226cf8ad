"""tools/bench/scaling.py's fits on hand-made series and its size arguments."""

import os
import sys
import types

import pytest

from chartjax.tools.bench import scaling


def test_fit_linear_quadratic_and_fixed_cost():
    lin = scaling.fit([1000, 10000, 100000], [2.0, 20.0, 200.0])
    assert lin["slope"] == pytest.approx(1.0) and lin["slope_top"] == pytest.approx(1.0)
    assert lin["per_item_s"] == pytest.approx(0.002) and lin["fixed_s"] == pytest.approx(0.0)
    assert not lin["super_linear"]
    quad = scaling.fit([1, 2, 4], [1.0, 4.0, 16.0])
    assert quad["slope"] == pytest.approx(2.0) and quad["super_linear"]
    # 10 s start-up + 1 ms per item: the log-log slope is far below 1 until the work dominates.
    fixed = scaling.fit([1000, 4000, 16000], [11.0, 14.0, 26.0])
    assert fixed["fixed_s"] == pytest.approx(10.0) and fixed["per_item_s"] == pytest.approx(1e-3)
    assert fixed["slope_top"] == pytest.approx(0.4465, abs=1e-4)  # log(26/14) / log(4)
    assert not fixed["super_linear"]
    with pytest.raises(ValueError, match=">= 2"):
        scaling.fit([1], [1.0])
    with pytest.raises(ValueError, match="positive"):
        scaling.fit([0, 1], [1.0, 2.0])


def test_one_size_is_no_slope():
    for argv in (["--summaries", "10"], ["--figureqa", "100"], ["--t5x-sizes", "base"]):
        with pytest.raises(SystemExit):
            scaling.main(argv)


def test_series_fits_cpu_seconds_when_every_row_has_them():
    rows = [
        {"n": 1000, "wall_s": 10.0, "cpu_s": 4.0},
        {"n": 4000, "wall_s": 80.0, "cpu_s": 16.0},  # wall bent by load, CPU linear
    ]
    s = scaling._series(rows, "n")
    assert s["fit"]["super_linear"] and s["fit"]["slope"] == pytest.approx(1.5)
    assert s["fit_cpu"]["slope"] == pytest.approx(1.0) and not s["fit_cpu"]["super_linear"]
    assert "fit_cpu" not in scaling._series([{"n": 1, "wall_s": 1.0}, {"n": 2, "wall_s": 2.0}], "n")


def test_build_rows_are_extrapolated_to_the_release(monkeypatch, tmp_path):
    from chartjax.tools.bench import build

    def fake_build(builder, raw, data_dir, mode):
        n = int(os.path.basename(raw).split("_")[1])
        # 50 MB + 1 kB per figure of memory, 30 kB per figure of build: linear by design.
        return {
            "charts": n,
            "mode": mode,
            "wall_s": n / 100,
            "cpu_s": n / 200,
            "peak_rss_bytes": 50e6 + 1e3 * n,
            "build_bytes": 3e4 * n,
            "raw_bytes": 7e4 * n,
        }

    monkeypatch.setattr(build, "generate", lambda *a: {"charts": a[2], "wall_s": a[2] / 50})
    monkeypatch.setattr(build, "build_measured", fake_build)
    monkeypatch.setitem(sys.modules, "apache_beam", types.ModuleType("apache_beam"))
    out = scaling.bench_build(str(tmp_path), [1000, 4000], ["plain", "beam2"], 2)
    memory = out["build_beam2"]["extrapolated"]["peak_rss_bytes"]
    assert memory["fixed"] == pytest.approx(50e6) and memory["per_figure"] == pytest.approx(1e3)
    assert memory["at"]["train1"] == pytest.approx(50e6 + 1e3 * 100_000)
    assert memory["at"]["release"] == pytest.approx(50e6 + 1e3 * 180_000)
    size = out["build_plain"]["extrapolated"]["build_bytes"]
    assert size["log_log_slope"] == pytest.approx(1.0) and size["at"]["train1"] == pytest.approx(
        3e9
    )
    assert out["release"]["train1"] == {"figures": 100_000, "questions": 1_327_368}


def test_peak_memory_counts_the_whole_process_tree():
    """A child and a grandchild each hold 150 MB at once: the tree's peak holds both."""
    from chartjax.tools.bench import process_memory

    hold = (
        "b = bytearray(150 * 2**20); b[::4096] = b'x' * len(b[::4096]); import time; time.sleep(2)"
    )
    code = (
        "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', sys.argv[1]]); "
        "exec(sys.argv[1]); p.wait()"
    )
    proc, peak = process_memory.run([sys.executable, "-c", code, hold], interval_s=0.05)
    assert proc.returncode == 0, proc.stderr
    assert peak > 2 * 150 * 2**20
