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


def test_a_beam_build_that_cannot_fit_in_memory_is_skipped_and_counted(monkeypatch, tmp_path):
    from chartjax.tools.bench import build

    def fake_build(builder, raw, data_dir, mode):
        os.makedirs(data_dir)
        n = int(os.path.basename(raw).split("_")[1])
        with open(os.path.join(data_dir, "x.tfrecord"), "wb") as f:
            f.write(b"\0" * n)  # one byte per chart
        return {"charts": n, "mode": mode, "wall_s": n / 100, "cpu_s": n / 200}

    monkeypatch.setattr(build, "generate", lambda *a: {"charts": a[2], "wall_s": a[2] / 50})
    monkeypatch.setattr(build, "build", fake_build)
    # Beam needs 8 B per chart here: 8,000 at 1k, 16,000 at 2k fit; 32,000 at 4k does not.
    monkeypatch.setattr(scaling.host_memory, "available_bytes", lambda: 20_000)
    monkeypatch.setitem(sys.modules, "apache_beam", types.ModuleType("apache_beam"))
    out = scaling.bench_build(str(tmp_path), [1000, 2000, 4000], ["plain", "beam1"], 2)
    assert [("skipped" in r) for r in out["build_beam1"]["rows"]] == [False, False, True]
    assert (
        out["build_beam1"]["skipped"] == 1
        and "~0.0 GiB" in out["build_beam1"]["rows"][2]["skipped"]
    )
    assert out["build_beam1"]["fit"]["slope"] == pytest.approx(1.0)  # the two measured rows
    assert (
        out["build_plain"]["skipped"] == 0 and out["build_plain"]["rows"][2]["output_bytes"] == 4000
    )
