"""train.profile_steps writes a profiler trace TensorBoard and Perfetto read; bad windows are
refused before anything is built. The loop times itself (step time, input wait, compile time
in train_metrics.jsonl and TensorBoard), and train.compile_only / --compile_only writes XLA's
memory analysis and FLOPs of the step without training."""

import glob
import gzip
import json
import os
import time

import gin
import jax
import jax.numpy as jnp
import pytest

from chartjax import config as config_lib
from chartjax import profiling
from chartjax import train as train_lib
from chartjax.config_checks import ConfigError
from chartjax.tools import train as train_cli
from tests.test_run_log import _tb_scalars

BINDINGS = [
    "T5Config.dtype = 'float32'",
    "T5Config.num_encoder_layers = 1",  # tracing and compiling are most of a tiny run's time
    "T5Config.num_decoder_layers = 1",
    "train.num_train_steps = 4",
    "train.log_every = 1",
    "train.checkpoint_every = 4",
    "train.final_eval = False",
    "train.progress = False",
]


def _run(workdir, extra):
    gin.clear_config()
    config_lib.parse_gin(["tasks/t5_synthetic_smoke.gin"], BINDINGS + extra)
    try:
        return train_lib.train(str(workdir))
    finally:
        gin.clear_config()


@pytest.mark.slow
def test_profile_steps_write_an_xplane_and_a_perfetto_trace(tmp_path):
    out = _run(tmp_path / "run", ["train.profile_steps = (2, 3)"])
    assert out["step"] == 4
    runs = glob.glob(str(tmp_path / "run/profile/plugins/profile/*"))
    assert len(runs) == 1, runs
    assert glob.glob(f"{runs[0]}/*.xplane.pb")
    with gzip.open(glob.glob(f"{runs[0]}/perfetto_trace.json.gz")[0]) as f:
        trace = json.load(f)
    # The traced window holds the jitted train step's execution.
    names = {e.get("name", "") for e in trace["traceEvents"]}
    assert any("train_step" in n for n in names), sorted(names)[:20]
    _assert_rows_are_timed(tmp_path / "run")  # one training run checks both


@pytest.mark.parametrize("window", ["(3, 2)", "(0, 2)", "(1,)", "'2'"])
def test_a_bad_window_is_one_config_error(tmp_path, window):
    with pytest.raises(ConfigError, match=r"train\.profile_steps = .*first, last"):
        _run(tmp_path / "bad", [f"train.profile_steps = {window}"])
    assert not (tmp_path / "bad").exists()


def _rows(workdir):
    with open(os.path.join(workdir, "train_metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def _assert_rows_are_timed(workdir):
    """train_metrics.jsonl and TensorBoard time the loop (a run logging every step)."""
    rows = _rows(workdir)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    # The first update (tracing, compiling) is timed alone, once; no interval holds it.
    first, later = rows[0], rows[1:]
    assert first["compile_s"] > 0 and first["first_batch_s"] >= 0
    assert "step_s" not in first and "examples_per_s" not in first
    for r in later:
        assert "compile_s" not in r and "first_batch_s" not in r
        assert r["step_s"] > 0
        assert 0 <= r["input_wait_s"] <= r["step_s"]
        assert 0 <= r["input_wait_fraction"] <= 1
        assert r["examples_per_s"] == pytest.approx(16 / r["step_s"])
    tags = _tb_scalars(str(workdir))
    for name in ("step_s", "input_wait_s", "input_wait_fraction"):
        assert [s for s, _ in tags[f"train/{name}"]] == [2, 3, 4]
    assert [s for s, _ in tags["train/compile_s"]] == [1]


def test_step_clock_counts_input_wait_and_leaves_out_pauses():
    """A slow input shows as input wait; a pause (checkpoint, evaluation) is not step time."""

    def batches(delay):
        while True:
            time.sleep(delay)
            yield {}

    def one_interval(delay, steps=4, step_time=0.01, pause=0.0):
        clock, it = profiling.StepClock(), batches(delay)
        clock.next_batch(it)
        clock.compiled()
        clock.interval()  # the first row's compile_s / first_batch_s
        for _ in range(steps):
            clock.next_batch(it)
            time.sleep(step_time)  # the update
            clock.updated()
            with clock.paused():
                time.sleep(pause)
        return clock.interval()

    fast, slow = one_interval(0.0), one_interval(0.05)
    assert fast["input_wait_s"] < 0.01 and fast["input_wait_fraction"] < 0.5
    assert slow["input_wait_s"] >= 0.05 and slow["input_wait_fraction"] > 0.7
    assert slow["step_s"] >= 0.06
    paused = one_interval(0.0, pause=0.1)
    assert paused["step_s"] < 0.1  # the 0.1 s pauses are left out


def test_saved_residuals_are_the_activations_the_backward_pass_keeps():
    """sum(tanh(x @ w)): the forward keeps tanh's output and 1 - tanh^2 (its derivative), each
    [2, 4]; w and x are the arguments (held anyway); full remat keeps nothing."""

    def f(w, x):
        return jnp.sum(jnp.tanh(x @ w))

    w, x = jnp.ones((3, 4)), jnp.ones((2, 3))
    assert profiling.residual_report(f, w, x) == {"saved_residuals": {"bytes": 64, "count": 2}}
    half = profiling.residual_report(f, w.astype(jnp.bfloat16), x.astype(jnp.bfloat16))
    assert half["saved_residuals"] == {"bytes": 32, "count": 2}
    remat = jax.checkpoint(f, policy=jax.checkpoint_policies.nothing_saveable)
    assert profiling.residual_report(remat, w, x)["saved_residuals"] == {"bytes": 0, "count": 0}
    shapes = jax.ShapeDtypeStruct((3, 4), jnp.float32)  # traced at shapes, as compile_only does
    assert profiling.residual_report(f, shapes, x)["saved_residuals"]["bytes"] == 64
    # A frozen w (trainable.stop_frozen: stop_gradient) is still the parameter's own buffer.
    frozen = profiling.residual_report(lambda w, x: f(jax.lax.stop_gradient(w), x), w, x)
    assert frozen["saved_residuals"] == {"bytes": 64, "count": 2}


@pytest.mark.slow
def test_compile_only_writes_memory_and_flops_and_trains_nothing(tmp_path, capsys):
    workdir = tmp_path / "compiled"
    gin.clear_config()
    args = [
        "--gin_file=tasks/t5_synthetic_smoke.gin",
        f"--workdir={workdir}",
        *[f"--gin_bindings={b}" for b in BINDINGS[:3]],
        "--compile_only",
    ]
    try:
        status = train_cli.main(args)
    finally:
        gin.clear_config()
    err = capsys.readouterr().err
    assert status == 0, err
    assert "XLA memory per device" in err and "XLA FLOPs" in err
    assert os.listdir(workdir) == ["compile_only.json"]  # no checkpoint, lock, config or log
    report = json.loads((workdir / "compile_only.json").read_text())
    assert report["batch_shapes"]["encoder_input_tokens"] == [16, 16]
    mem = report["memory"]
    assert mem["argument_bytes"] > 0 and mem["output_bytes"] > 0 and mem["temp_bytes"] > 0
    assert mem["peak_bytes"] >= mem["argument_bytes"]
    # Per device: the batch is split over the data axis of the tests' 8 CPU devices.
    assert report["devices"] == 8 and report["mesh"]["data"] == 8
    assert report["flops"] > 0 and report["bytes_accessed"] > 0
    # XLA counts everything it runs; the analytic count only the matmuls.
    assert 0.5 < report["flops"] / report["analytic_flops"] < 3
    assert report["compile_s"] > 0
    assert report["saved_residuals"]["bytes"] > 0 and "saved for the backward pass" in err
