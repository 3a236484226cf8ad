"""tools/bench/harness.py on a fake clock: warm-up kept apart, the summary statistics, A/B
interleaving and its ratios, the report's JSON shape, and child processes' JSON."""

import json

import pytest

from chartjax.tools.bench import harness


class FakeClock:
    """Time moves only when a fake callable says how long it took."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def callable(self, name, durations, log):
        durations = iter(durations)

        def fn():
            log.append(name)
            self.now += next(durations)

        return fn


def test_timeit_keeps_warmup_apart():
    clock, log = FakeClock(), []
    fn = clock.callable("f", [7.0, 1.0, 4.0, 2.0, 3.0], log)
    t = harness.timeit(fn, repeats=4, warmup=1, clock=clock)
    assert log == ["f"] * 5
    assert t == {
        "n": 4,
        "median_s": 2.5,
        "min_s": 1.0,
        "max_s": 4.0,
        "mean_s": 2.5,
        "warmup_s": [7.0],
    }
    with pytest.raises(ValueError):
        harness.timeit(fn, repeats=0, clock=clock)


def test_interleaved_alternates_and_reports_the_median_ratio():
    clock, log = FakeClock(), []
    # Warm-up first (9 and 8), then five alternations; b takes 2, 3, 1, 4, 2 times a's time.
    a = clock.callable("a", [9.0, 1.0, 2.0, 1.0, 0.5, 2.0], log)
    b = clock.callable("b", [8.0, 2.0, 6.0, 1.0, 2.0, 4.0], log)
    r = harness.interleaved(a, b, alternations=5, warmup=1, clock=clock)
    assert log == ["a", "b"] * 6
    assert r["alternations"] == 5
    assert r["speedup_a_over_b"] == {"median": 2.0, "min": 1.0, "max": 4.0}
    assert r["a"] == {"n": 5, "median_s": 1.0, "min_s": 0.5, "max_s": 2.0, "mean_s": 1.3}
    assert r["b"]["median_s"] == 2.0 and r["b"]["mean_s"] == 3.0
    with pytest.raises(ValueError, match=">= 5"):
        harness.interleaved(a, b, alternations=4, clock=clock)


def test_report_shape_and_emit(tmp_path, capsys):
    run = harness.Run("fake", {"batch": 2}, libs=("numpy", "no-such-distribution-xyz"))
    report = run.report({"examples_per_s": 3.5})
    assert list(report) == ["name", "config", "results", "machine", "wall_s"]
    assert report["name"] == "fake" and report["config"] == {"batch": 2}
    assert report["results"] == {"examples_per_s": 3.5}
    m = report["machine"]
    assert m["cpu_count"] >= 1 and len(m["load_avg_start"]) == len(m["load_avg_end"]) == 3
    assert list(m["versions"]) == ["chartjax", "numpy", "no-such-distribution-xyz"]
    assert m["versions"]["numpy"].count(".") >= 1
    assert m["versions"]["no-such-distribution-xyz"] is None
    out = tmp_path / "r.json"
    harness.emit(report, str(out))
    printed = capsys.readouterr().out
    assert json.loads(printed) == json.loads(out.read_text()) == report


def test_child_json(tmp_path):
    one = tmp_path / "one.json"
    one.write_text('{"a": [1, 2]}')
    assert harness.child_json("json.tool", [str(one)]) == {"a": [1, 2]}
    lines = tmp_path / "lines.json"  # two objects, one per line: the last one is the result
    lines.write_text('{"progress": 1}\n{"done": true}\n')
    assert harness.child_json("json.tool", ["--json-lines", "--compact", str(lines)]) == {
        "done": True
    }
    with pytest.raises(harness.ChildError, match="No module named") as e:
        harness.child_json("chartjax.tools.bench.no_such_bench")
    assert e.value.returncode == 1 and e.value.module == "chartjax.tools.bench.no_such_bench"


def test_interleaved_many_round_robin_and_ratios_against_the_reference():
    clock, log = FakeClock(), []
    # Warm-up (5, 5, 5), then five rounds; hf takes 2x, 4x, 1x, 2x, 3x of a's time and b is
    # always half of hf's.
    a = clock.callable("a", [5.0, 1.0, 1.0, 2.0, 1.0, 1.0], log)
    b = clock.callable("b", [5.0, 1.0, 2.0, 1.0, 1.0, 1.5], log)
    hf = clock.callable("hf", [5.0, 2.0, 4.0, 2.0, 2.0, 3.0], log)
    r = harness.interleaved_many({"a": a, "b": b, "hf": hf}, "hf", alternations=5, clock=clock)
    assert log == ["a", "b", "hf"] * 6
    assert r["speedup_over_hf"] == {
        "a": {"median": 2.0, "min": 1.0, "max": 4.0},
        "b": {"median": 2.0, "min": 2.0, "max": 2.0},
    }
    assert r["hf"]["median_s"] == 2.0 and r["a"]["mean_s"] == 1.2
    with pytest.raises(ValueError, match="reference"):
        harness.interleaved_many({"a": a}, "hf", clock=clock)
    with pytest.raises(ValueError, match=">= 5"):
        harness.interleaved_many({"a": a, "hf": hf}, "hf", alternations=3, clock=clock)
