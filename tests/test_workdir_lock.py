"""One run per workdir (chartjax/workdir_lock.py) as chartjax-train meets it, in this process:
a workdir held by a live run or by a run on another host is refused in one line naming the
holder, and nothing is written; a lock left by a process that is gone is taken over with a
warning; a rerun whose config differs from config.gin is refused naming each differing binding
(the workdir untouched), resumes with the same config, and with --allow_config_change goes on.
(Two real concurrent runs: tests/test_train_processes.py.)"""

import json
import logging
import os
import socket
import subprocess
import sys

import gin
import pytest

from chartjax import workdir_lock
from chartjax.tools import train as train_cli

TINY = [
    "RNConfig.image_size=16",
    "synthetic_task.image_size=16",
    "RNConfig.conv_layers=2",
    "RNConfig.conv_channels=8",
    "RNConfig.g_dim=16",
    "RNConfig.f_dim=16",
    "train.progress=False",
    "train.global_batch_size=8",  # the 8 test devices
    "train.final_eval=False",
    "train.log_every=1",
    "train.checkpoint_every=2",
]


@pytest.fixture(autouse=True)
def _clean_gin():
    gin.clear_config()
    yield
    gin.clear_config()


@pytest.fixture(autouse=True)
def warnings():
    """Warning lines of the `chartjax` logger (it does not propagate to pytest's handler). With
    a handler present RunLog adds no stderr handler bound to a `capsys` stream that closes."""
    got = []

    class Keep(logging.Handler):
        def emit(self, record):
            got.append(record.getMessage())

    handler = Keep(logging.WARNING)
    logger = logging.getLogger("chartjax")
    logger.addHandler(handler)
    yield got
    logger.removeHandler(handler)


def _train(workdir, *bindings, flags=()):
    """chartjax-train's main, as the command runs it (gin cleared after)."""
    argv = ["--gin_file=tasks/synthetic_rn.gin", f"--workdir={workdir}", *flags]
    try:
        return train_cli.main(argv + [f"--gin_bindings={b}" for b in TINY + list(bindings)])
    finally:
        gin.clear_config()


def _snapshot(workdir):
    """Every file under workdir with its size and modification time."""
    out = {}
    for root, _, files in os.walk(workdir):
        for name in files:
            st = os.stat(os.path.join(root, name))
            out[os.path.relpath(os.path.join(root, name), workdir)] = (st.st_size, st.st_mtime_ns)
    return out


def _logged_steps(workdir):
    with open(os.path.join(workdir, "train_metrics.jsonl")) as f:
        return [r["step"] for r in map(json.loads, f)]


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _write_lock(workdir, **holder):
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, workdir_lock.LOCK_FILE)
    with open(path, "w") as f:
        json.dump({"since": "2026-01-02 03:04:05+00:00", **holder}, f)
    return path


def test_a_lock_of_another_host_is_refused_naming_it_and_nothing_is_written(tmp_path, capsys):
    run = tmp_path / "run"
    lock = _write_lock(run, host="gpu-node-7", pid=4242)
    before = _snapshot(run)
    assert _train(run, "train.num_train_steps=2") == 2
    assert capsys.readouterr().err == (
        f"chartjax-train: error: {run} is in use by another run: pid 4242 on host gpu-node-7 "
        f"since 2026-01-02 03:04:05+00:00 (lock file {lock}; remove it if that run has ended)\n"
    )
    assert _snapshot(run) == before  # the lock kept, nothing else written


def test_a_live_holder_on_this_host_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = _write_lock(run, host=socket.gethostname(), pid=holder.pid)
        assert _train(run, "train.num_train_steps=2") == 2
    finally:
        holder.kill()
        holder.wait()
    assert capsys.readouterr().err == (
        f"chartjax-train: error: {run} is in use by another run: pid {holder.pid} on host "
        f"{socket.gethostname()} since 2026-01-02 03:04:05+00:00 (lock file {lock}; stop that "
        "run or choose another --workdir)\n"
    )
    assert sorted(os.listdir(run)) == [workdir_lock.LOCK_FILE]


@pytest.mark.parametrize("damage", ["binary", "directory"])
def test_a_damaged_lock_is_refused_in_one_line(tmp_path, capsys, damage):
    """A train.lock that is binary, or a directory, used to end in a traceback (issue 44 item 8)."""
    run = tmp_path / "run"
    run.mkdir()
    lock = run / workdir_lock.LOCK_FILE
    if damage == "binary":
        lock.write_bytes(b"\xff\xfe\x00garbage\x81")
        why = "cannot be read; remove it if no run is using this workdir"
    else:
        lock.mkdir()
        why = "is a directory, not a lock file: remove it"
    assert _train(run, "train.num_train_steps=2") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"chartjax-train: error: {run}") and why in err, err
    assert err.count("\n") == 1 and sorted(os.listdir(run)) == [workdir_lock.LOCK_FILE]


@pytest.mark.slow
def test_a_stale_lock_is_taken_over_and_a_changed_config_refused_unless_allowed(
    tmp_path, capsys, warnings
):
    run = tmp_path / "run"
    dead = _dead_pid()  # a run killed with SIGKILL leaves its lock behind
    lock = _write_lock(run, host=socket.gethostname(), pid=dead)
    assert _train(run, "train.num_train_steps=2") == 0
    assert warnings == [
        f"took over the stale lock {lock} of pid {dead} on host {socket.gethostname()} since "
        "2026-01-02 03:04:05+00:00: that process is no longer running"
    ]
    assert _logged_steps(run) == [1, 2]
    assert not os.path.exists(lock)  # released at the end
    capsys.readouterr()
    warnings.clear()
    before = _snapshot(run)

    assert _train(run, "train.num_train_steps=4", "RNConfig.dropout=0.5") == 2
    assert capsys.readouterr().err == (
        f"chartjax-train: error: the config differs from {run}/config.gin in 2 binding(s): "
        "RNConfig.dropout: 0.0 -> 0.5; train.num_train_steps: 2 -> 4. Its checkpoints were "
        "written with that config: rerun with it, or pass --allow_config_change to resume with "
        "the new one, or choose another --workdir\n"
    )
    assert _snapshot(run) == before  # no lock, config, log row or checkpoint written

    # The same config resumes (at its last step here: nothing left to do, nothing to compile).
    assert _train(run, "train.num_train_steps=2") == 0
    # Not a refusal ("chartjax-train: error"); a logging handler left by an earlier test in
    # the same worker may print "--- Logging error ---" to a closed stream, which is not ours.
    assert "chartjax-train: error" not in capsys.readouterr().err and warnings == []
    assert _logged_steps(run) == [1, 2]

    assert (
        _train(run, "train.num_train_steps=2", "train.log_every=2", flags=["--allow_config_change"])
        == 0
    )
    assert warnings == [
        f"the config differs from {run}/config.gin in 1 binding(s): train.log_every: 1 -> 2"
    ]
    assert "train.log_every = 2" in (run / "config.gin").read_text()
    assert not os.path.exists(lock)


def test_config_changes_compares_bindings_not_text():
    saved = """import chartjax.models.configurables

# Parameters for train:
train.log_every = 5
train.mesh_shape = (
    -1,
    1,
)
train.model_fn = @relation_network.build
recipe.gin_files = ['tasks/a.gin']
STEPS = 10
"""
    same = "STEPS = 10\nrecipe.gin_files = ['gin_configs/tasks/a.gin']\n" + (
        "train.model_fn = @relation_network.build\ntrain.mesh_shape = (-1, 1)\n"
        "train.log_every = 5\n"
    )
    assert workdir_lock.config_changes(saved, same) == []
    other = same.replace("(-1, 1)", "(-1, 2)").replace("STEPS = 10", "STEPS = %N") + (
        "train/RNConfig.g_dim = 32\n"
    )
    other = other.replace("train.log_every = 5\n", "")
    assert workdir_lock.config_changes(saved, other) == [
        "STEPS: 10 -> %N",
        "train.log_every: 5 -> (unset)",
        "train.mesh_shape: (-1, 1) -> (-1, 2)",
        "train/RNConfig.g_dim: (unset) -> 32",
    ]


def test_lora_after_a_recipe_whose_model_takes_none_is_refused(tmp_path, capsys):
    """peft/lora.gin after a Relation Network recipe trained every parameter, silently
    (issue 44 item 16): refused in one line, as Features.pack is for a task that does not pack."""
    run = tmp_path / "run"
    assert _train(run, "train.num_train_steps=2", flags=["--gin_file=peft/lora.gin"]) == 2
    assert capsys.readouterr().err == (
        "chartjax-train: error: build_model.lora (peft/lora.gin): this recipe builds its model "
        "with chartjax.models.relation_network.build, which takes no LoRA adapters (all "
        "its parameters would train); LoRA is for "
        "the chartjax families built by build_model\n"
    )
    assert not run.exists()
