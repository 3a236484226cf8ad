"""Whole runs in subprocesses: multi-host equivalence and kill-then-resume bit-identity.

Multi-host: 2 processes on localhost joined by `jax.distributed.initialize` (gloo), 2 CPU
devices each, must log the same losses as 1 process with 4 devices reading the same global
batches (tolerance 1e-5: the cross-process all-reduce sums in another order).
Resume: a run SIGKILLed after its first checkpoint and then resumed ends with parameters
bit-identical to an uninterrupted run on the same mesh, and logs each step once.
SIGTERM: the run saves and exits 143; its rerun, after the latest checkpoint is damaged, names
that checkpoint in one line, keeps it, resumes from the one before and logs each step once.
Busy workdir and Ctrl-C: a second run on the workdir of a running one is refused in one line
naming it (pid, host, since when) and writes nothing; a first Ctrl-C saves and stops (130).
"""

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import orbax.checkpoint as ocp
import pytest

ROOT = str(Path(__file__).resolve().parents[1])
TINY = [
    "RNConfig.image_size=16",
    "synthetic_task.image_size=16",
    "RNConfig.conv_layers=2",
    "RNConfig.conv_channels=8",
    "RNConfig.g_dim=16",
    "RNConfig.f_dim=16",
    "RNConfig.g_layers=2",  # few arrays: fewer files at each checkpoint
    "RNConfig.lstm_dim=8",
    "RNConfig.embed_dim=8",
    "RNConfig.dropout=0.25",
    "train.progress=False",
]


def _cmd(workdir, bindings, flags=()):
    # Not `-m chartjax.train`: gin would see the configurables twice (__main__ and module).
    cmd = [
        sys.executable,
        "-c",
        "import sys; from chartjax.tools.train import main; sys.exit(main(sys.argv[1:]))",
        "--gin_file=tasks/synthetic_rn.gin",
        f"--workdir={workdir}",
        *flags,
    ]
    return cmd + [f"--gin_bindings={b}" for b in TINY + bindings]


def _env(devices, **extra):
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        TF_CPP_MIN_LOG_LEVEL="2",
        XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
        **extra,
    )
    env.pop("CHARTJAX_COORDINATOR", None)
    env.update(extra)
    return env


def _losses(workdir):
    with open(os.path.join(workdir, "train_metrics.jsonl")) as f:
        return {r["step"]: r["loss"] for r in map(json.loads, f)}


def _logged_steps(workdir):
    with open(os.path.join(workdir, "train_metrics.jsonl")) as f:
        return [r["step"] for r in map(json.loads, f)]


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_match_one_process(tmp_path):
    steps = [
        "train.num_train_steps=6",
        "train.log_every=1",
        "train.checkpoint_every=3",
        "train.global_batch_size=16",
    ]
    one = tmp_path / "one"
    subprocess.run(_cmd(one, steps), env=_env(4), cwd=ROOT, check=True, timeout=600)
    two = tmp_path / "two"
    port = _free_port()
    procs = [
        subprocess.Popen(
            _cmd(two, steps),
            cwd=ROOT,
            env=_env(
                2,
                CHARTJAX_COORDINATOR=f"localhost:{port}",
                CHARTJAX_NUM_PROCESSES="2",
                CHARTJAX_PROCESS_ID=str(i),
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=600)[0].decode() for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
    assert "process 0/2" in outs[0] or "2 processes" in outs[0], outs[0][-2000:]
    ref, got = _losses(one), _losses(two)
    assert sorted(ref) == sorted(got) == list(range(1, 7))
    np.testing.assert_allclose(
        [got[s] for s in sorted(got)], [ref[s] for s in sorted(ref)], rtol=1e-5, atol=1e-5
    )
    # Both processes evaluated together and process 0 wrote the union of their rows.
    metrics = json.loads((two / "eval" / "validation" / "step_6" / "metrics.json").read_text())
    assert metrics["num_examples"] == 64


def _params(workdir, step):
    mgr = ocp.CheckpointManager(os.path.join(workdir, "checkpoints"), item_names=("state", "meta"))
    out = mgr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
    return out["state"]


@pytest.mark.slow
def test_killed_run_resumes_bit_identical(tmp_path):
    # 5 checkpoints after the first (each an Orbax save, most of a step's cost here) leave the
    # poll below time to kill the run between its first checkpoint and its end.
    total = 60
    common = [
        f"train.num_train_steps={total}",
        "train.log_every=10",
        "train.checkpoint_every=10",
        "train.global_batch_size=8",
        "train.final_eval=False",
    ]
    # Two devices: a mesh to restore onto, without the cost of the suite's 8 in every process.
    ref = tmp_path / "uninterrupted"
    subprocess.run(_cmd(ref, common), env=_env(2), cwd=ROOT, check=True, timeout=600)

    run = tmp_path / "interrupted"
    proc = subprocess.Popen(
        _cmd(run, common),
        env=_env(2),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ckpts = run / "checkpoints"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        done = [d for d in (os.listdir(ckpts) if ckpts.exists() else []) if d.isdigit()]
        if done:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    killed_at = max(int(d) for d in os.listdir(ckpts) if d.isdigit())
    assert killed_at < total

    subprocess.run(_cmd(run, common), env=_env(2), cwd=ROOT, check=True, timeout=600)
    a, b = _params(ref, total), _params(run, total)
    import jax

    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert int(b["step"]) == total
    assert _logged_steps(run) == _logged_steps(ref) == list(range(10, total + 1, 10))


def _truncate_array_files(step_dir):
    for path in glob.glob(os.path.join(step_dir, "state", "**", "d", "*"), recursive=True):
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)


@pytest.mark.slow
def test_sigterm_exits_143_and_a_damaged_checkpoint_is_skipped_and_kept(tmp_path):
    from tests.test_run_log import _tb_scalars_as_tensorboard_shows_them

    common = [
        "train.log_every=1",
        "train.checkpoint_every=5",
        "train.global_batch_size=8",
        "train.final_eval=False",
    ]
    env = _env(1, JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jax_cache"))
    run = tmp_path / "run"
    err = open(tmp_path / "first.err", "w")
    proc = subprocess.Popen(
        _cmd(run, common + ["train.num_train_steps=100000"]),
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=err,
    )
    ckpts = run / "checkpoints"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if len([d for d in (os.listdir(ckpts) if ckpts.exists() else []) if d.isdigit()]) >= 2:
            proc.send_signal(signal.SIGTERM)
            break
        time.sleep(0.05)
    proc.wait(timeout=120)
    err.close()
    first_err = (tmp_path / "first.err").read_text()
    assert proc.returncode == 143, first_err[-3000:]
    steps = sorted(int(d) for d in os.listdir(ckpts) if d.isdigit())
    stopped = steps[-1]
    assert f"stopped at step {stopped}: preempted (SIGTERM)" in first_err
    assert _logged_steps(run) == list(range(1, stopped + 1))

    _truncate_array_files(ckpts / str(stopped))
    total = stopped + 3
    rerun = subprocess.run(
        _cmd(run, common + [f"train.num_train_steps={total}"], ["--allow_config_change"]),
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    damaged = [line for line in rerun.stderr.splitlines() if "damaged" in line]
    kept = ckpts / f"{stopped}.damaged"
    assert len(damaged) == 1, rerun.stderr[-3000:]
    assert f"checkpoint {stopped} is damaged (" in damaged[0]
    assert f"kept as {kept}; resuming from checkpoint {steps[-2]}" in damaged[0]
    assert "Traceback" not in rerun.stderr and "Event loop is closed" not in rerun.stderr
    assert glob.glob(str(kept / "state" / "**" / "d" / "*"), recursive=True)
    assert f"resumed from step {steps[-2]}" in rerun.stderr
    assert _logged_steps(run) == list(range(1, total + 1))
    scalars, _ = _tb_scalars_as_tensorboard_shows_them(str(run))
    assert [step for step, _ in scalars["train/loss"]] == list(range(1, total + 1))
    assert sorted(int(d) for d in os.listdir(ckpts) if d.isdigit())[-1] == total


def _wait_for_rows(proc, workdir, rows=1):
    path = os.path.join(workdir, "train_metrics.jsonl")
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if os.path.exists(path) and len(_logged_steps(workdir)) >= rows:
            return
        time.sleep(0.05)
    raise AssertionError("the run ended before it logged a step")


@pytest.mark.slow
def test_a_second_run_is_refused_and_ctrl_c_saves_and_stops(tmp_path, capsys):
    import gin

    from chartjax.tools import train as train_cli

    common = [
        "train.log_every=1",
        "train.checkpoint_every=1000",
        "train.global_batch_size=8",
        "train.final_eval=False",
        "train.num_train_steps=100000",
    ]
    run = tmp_path / "run"
    err = open(tmp_path / "first.err", "w")
    first = subprocess.Popen(
        _cmd(run, common),
        env=_env(1),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=err,
        # As a terminal starts it: a test runner in the background may have SIGINT ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        _wait_for_rows(first, run)
        lock = run / "train.lock"
        held = lock.read_text()
        since = json.loads(held)["since"]
        # The second run, in this process: the same config, then another one.
        for extra in ([], ["RNConfig.g_dim=32"]):
            try:
                status = train_cli.main(_cmd(run, common + extra)[3:])
            finally:
                gin.clear_config()
            assert status == 2
            assert capsys.readouterr().err == (
                f"chartjax-train: error: {run} is in use by another run: pid {first.pid} on host "
                f"{socket.gethostname()} since {since} (lock file {lock}; stop that run or "
                "choose another --workdir)\n"
            )
        assert lock.read_text() == held

        first.send_signal(signal.SIGINT)
        first.wait(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
        err.close()
    first_err = (tmp_path / "first.err").read_text()
    assert first.returncode == 130, first_err[-3000:]
    said = [line for line in first_err.splitlines() if "Ctrl-C" in line]
    stopped = int(os.listdir(run / "checkpoints")[0])  # the only one: saved on Ctrl-C
    assert said[0].endswith(
        "WARNING Ctrl-C: saving a checkpoint after this step, then stopping (press Ctrl-C "
        "again to abort without saving)"
    )
    assert len(said) == 2, first_err[-3000:]
    assert said[1].endswith(f"INFO stopped at step {stopped}: interrupted (Ctrl-C)")
    assert "Traceback" not in first_err
    assert _logged_steps(run) == list(range(1, stopped + 1))  # each step once
    assert not lock.exists()
