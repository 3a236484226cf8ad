"""Whole runs in subprocesses: multi-host equivalence and kill-then-resume bit-identity.

Multi-host: 2 processes on localhost joined by `jax.distributed.initialize` (gloo), 2 CPU
devices each, must log the same losses as 1 process with 4 devices reading the same global
batches (tolerance 1e-5: the cross-process all-reduce sums in another order).
Resume: a run SIGKILLed after its first checkpoint and then resumed ends with parameters
bit-identical to an uninterrupted run on the same mesh, and logs each step once.
Busy workdir, SIGTERM, a damaged checkpoint and Ctrl-C, in one workdir and two processes: a
second run on the workdir of a running one is refused in one line naming it (pid, host, since
when) and writes nothing; SIGTERM saves and exits 143; the rerun, after the latest checkpoint
is damaged, names that checkpoint in one line, keeps it and resumes from the one before; a
first Ctrl-C saves and stops it (130); each step is logged once across both runs.
"""

import contextlib
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


def _wait(proc, done, what):
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if done():
            return
        time.sleep(0.05)
    raise AssertionError(f"the run ended (or 600 s passed) before {what}")


def _last_logged(workdir):
    """The last step train_metrics.jsonl holds (0: none yet), read while a run writes it."""
    try:
        with open(os.path.join(workdir, "train_metrics.jsonl")) as f:
            return max((json.loads(line)["step"] for line in f if line.endswith("\n")), default=0)
    except FileNotFoundError:
        return 0


def _checkpoints(ckpts):
    return sorted(int(d) for d in (os.listdir(ckpts) if ckpts.exists() else []) if d.isdigit())


@pytest.mark.slow
def test_a_busy_workdir_sigterm_a_damaged_checkpoint_and_ctrl_c(tmp_path, capsys):
    """One workdir, two processes (each start costs an import and a compile, so the four
    behaviours share them): the first run refuses a second one in this process, then SIGTERM
    saves and exits 143; its latest checkpoint is damaged; the rerun names it in one line, keeps
    it, resumes from the one before, and a first Ctrl-C saves and stops it (130)."""
    import gin

    from chartjax.tools import train as train_cli
    from tests.test_run_log import _tb_scalars_as_tensorboard_shows_them

    common = [
        "train.log_every=1",
        "train.checkpoint_every=5",
        "train.global_batch_size=8",
        "train.final_eval=False",
        "train.num_train_steps=100000",
    ]
    run, ckpts = tmp_path / "run", tmp_path / "run" / "checkpoints"
    lock = run / "train.lock"

    @contextlib.contextmanager
    def running(name):
        with open(tmp_path / f"{name}.err", "w") as err:
            proc = subprocess.Popen(
                _cmd(run, common),
                env=_env(1),
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=err,
                # As a terminal starts it: a test runner in the background may ignore SIGINT.
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
            try:
                yield proc
            finally:
                if proc.poll() is None:
                    proc.kill()

    with running("first") as first:
        _wait(first, lambda: _last_logged(run) > 0, "it logged a step")
        held = lock.read_text()
        since = json.loads(held)["since"]
        # A second run, in this process: the same config, then another one.
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

        _wait(first, lambda: len(_checkpoints(ckpts)) >= 2, "its second checkpoint")
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=120)
    first_err = (tmp_path / "first.err").read_text()
    assert first.returncode == 143, first_err[-3000:]
    steps = _checkpoints(ckpts)
    stopped = steps[-1]
    assert f"stopped at step {stopped}: preempted (SIGTERM)" in first_err
    assert _logged_steps(run) == list(range(1, stopped + 1))
    assert not lock.exists()

    _truncate_array_files(ckpts / str(stopped))
    with running("rerun") as rerun:
        # Past the damaged step: the rows the first run logged after steps[-2] are gone by then.
        _wait(rerun, lambda: _last_logged(run) > stopped, f"it passed step {stopped}")
        rerun.send_signal(signal.SIGINT)
        rerun.wait(timeout=120)
    rerun_err = (tmp_path / "rerun.err").read_text()
    assert rerun.returncode == 130, rerun_err[-3000:]
    damaged = [line for line in rerun_err.splitlines() if "damaged" in line]
    kept = ckpts / f"{stopped}.damaged"
    assert len(damaged) == 1, rerun_err[-3000:]
    assert f"checkpoint {stopped} is damaged (" in damaged[0]
    assert f"kept as {kept}; resuming from checkpoint {steps[-2]}" in damaged[0]
    assert glob.glob(str(kept / "state" / "**" / "d" / "*"), recursive=True)
    assert f"resumed from step {steps[-2]}" in rerun_err
    said = [line for line in rerun_err.splitlines() if "Ctrl-C" in line]
    assert said[0].endswith(
        "WARNING Ctrl-C: saving a checkpoint after this step, then stopping (press Ctrl-C "
        "again to abort without saving)"
    )
    assert len(said) == 2, rerun_err[-3000:]
    end = int(said[1].rpartition("stopped at step ")[2].partition(":")[0])
    assert said[1].endswith(f"INFO stopped at step {end}: interrupted (Ctrl-C)")
    assert _checkpoints(ckpts)[-1] == end  # saved on Ctrl-C
    for text in (first_err, rerun_err):
        assert "Traceback" not in text and "Event loop is closed" not in text
    assert "stale" not in rerun_err  # the first run let go of its lock
    assert _logged_steps(run) == list(range(1, end + 1))  # each step once, across both runs
    scalars, _ = _tb_scalars_as_tensorboard_shows_them(str(run))
    assert [step for step, _ in scalars["train/loss"]] == list(range(1, end + 1))
    assert not lock.exists()
