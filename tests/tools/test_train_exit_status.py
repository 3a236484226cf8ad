"""chartjax-train's exit statuses, which schedulers read: 0 finished, 143 stopped by SIGTERM
(after saving), 130 stopped by Ctrl-C (after saving, or aborted by a second one), 3 NaN/Inf, 2
checkpoints that cannot be resumed or a workdir in use; each failure is one line on stderr
without a traceback. The loop itself is replaced (its SIGTERM, Ctrl-C, lock and damage paths
run for real in tests/test_train_processes.py and tests/test_workdir_lock.py)."""

import argparse

import pytest

from chartjax import checkpoint as ckpt_lib
from chartjax import workdir_lock
from chartjax.tools import train as train_cli


def _main(monkeypatch, tmp_path, outcome):
    def fake_train(workdir, allow_config_change):
        if isinstance(outcome, BaseException):
            raise outcome
        return {"step": 7, "train": {}, "eval": {}, "stop_reason": outcome}

    monkeypatch.setattr(
        train_cli.config,
        "parse_flags",
        lambda argv, **kw: argparse.Namespace(
            workdir=str(tmp_path), allow_config_change=False, compile_only=False
        ),
    )
    monkeypatch.setattr(train_cli.train_lib, "train", fake_train)
    return train_cli.main(["--gin_file=unused.gin", f"--workdir={tmp_path}"])


@pytest.mark.parametrize(
    "stop_reason,status",
    [("done", 0), ("time budget", 0), ("preempted (SIGTERM)", 143), ("interrupted (Ctrl-C)", 130)],
)
def test_a_returning_run(monkeypatch, tmp_path, stop_reason, status):
    assert _main(monkeypatch, tmp_path, stop_reason) == status


def test_the_named_statuses():
    assert (train_cli.EXIT_DONE, train_cli.EXIT_PREEMPTED, train_cli.EXIT_INTERRUPTED) == (
        0,
        143,
        130,
    )
    assert train_cli.EXIT_NON_FINITE == 3 and train_cli.EXIT_CANNOT_RESUME == 2


@pytest.mark.parametrize(
    "error,status,line",
    [
        (
            FloatingPointError("loss is nan at step 7; stopping. The last good checkpoint is 5"),
            3,
            "chartjax-train: stopped: loss is nan at step 7; stopping. The last good "
            "checkpoint is 5",
        ),
        (
            ckpt_lib.ModelMismatchError(
                "runs/x/checkpoints/5 does not fit the model: 1 array(s) differ (was the model "
                "configuration changed?):\n  params.w: stored (2,), model (3,)"
                "\n  In call to configurable 'train' (<function train at 0x0>)"
            ),
            2,
            "chartjax-train: error: runs/x/checkpoints/5 does not fit the model: 1 array(s) "
            "differ (was the model configuration changed?):\n  params.w: stored (2,), model (3,)",
        ),
        (
            workdir_lock.WorkdirBusyError("runs/x is in use by another run: pid 7 on host h"),
            2,
            "chartjax-train: error: runs/x is in use by another run: pid 7 on host h",
        ),
        (
            KeyboardInterrupt(),  # a second Ctrl-C
            130,
            "chartjax-train: aborted by Ctrl-C; nothing saved since the last checkpoint",
        ),
    ],
)
def test_a_failing_run(monkeypatch, tmp_path, capsys, error, status, line):
    assert _main(monkeypatch, tmp_path, error) == status
    assert capsys.readouterr().err == line + "\n"  # gin's "In call to configurable" dropped
