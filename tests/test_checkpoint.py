"""chartjax.checkpoint.Checkpointer: what train.py and evaluate.py rely on.

Round trip of a small train-state-shaped pytree (sharded over the 8 simulated devices) with its
JSON metadata, keep-the-latest-N, keep-the-best-by-metric, `latest_step`, the SIGTERM flag (and
its handler put back by close), a shape mismatch on restore naming the arrays, and resuming
past damaged checkpoints (reported in one line, renamed, never deleted). Only the public
methods are used.
"""

import glob
import logging
import os
import signal
import sys
import threading
import time
import types

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from chartjax import checkpoint as ckpt_lib

pytestmark = pytest.mark.multi_device  # arrays sharded over the 8 devices


def _mesh():
    return jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))


def _state(step=5, seed=0):
    rng = np.random.default_rng(seed)
    mesh = _mesh()
    kernel = jax.device_put(
        jnp.asarray(rng.normal(size=(8, 3)), jnp.float32),
        NamedSharding(mesh, PartitionSpec("data")),
    )
    return {
        "step": jnp.int32(step),
        "params": {
            "kernel": kernel,
            "bias": jnp.asarray(rng.normal(size=(3,)), jnp.bfloat16),
        },
        "opt_state": {"mu": jnp.asarray(rng.normal(size=(8, 3)), jnp.float32)},
        "rng": jax.random.key_data(jax.random.key(seed)),
    }


def _shardings():
    mesh = _mesh()
    return {
        "step": NamedSharding(mesh, PartitionSpec()),
        "params": {
            "kernel": NamedSharding(mesh, PartitionSpec("data")),
            "bias": NamedSharding(mesh, PartitionSpec()),
        },
        "opt_state": {"mu": NamedSharding(mesh, PartitionSpec(None, None))},
        "rng": NamedSharding(mesh, PartitionSpec()),
    }


def _abstract(state):
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), state)


def _meta(step):
    return {"step": step, "examples_seen": step * 8, "global_batch_size": 8, "data_seed": 0}


def _steps_on_disk(folder):
    return sorted(int(n) for n in os.listdir(folder) if n.isdigit())


def test_save_then_restore_in_a_new_checkpointer_is_bit_equal(tmp_path):
    state = _state(step=5)
    ck = ckpt_lib.Checkpointer(str(tmp_path))
    assert ck.latest_step() is None
    assert ck.save(5, state, _meta(5), force=True)
    ck.close()

    ck = ckpt_lib.Checkpointer(str(tmp_path))  # as a resumed run or evaluate.py sees it
    assert ck.dir == os.path.join(str(tmp_path), "checkpoints")
    assert ck.latest_step() == 5
    shardings = _shardings()
    restored, meta = ck.restore(_abstract(state), shardings)
    ck.close()
    assert meta == _meta(5)
    assert jax.tree.structure(restored) == jax.tree.structure(state)
    for got, want, sh in zip(
        jax.tree.leaves(restored), jax.tree.leaves(state), jax.tree.leaves(shardings), strict=True
    ):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        assert got.sharding.is_equivalent_to(sh, got.ndim)


def test_restore_of_an_explicit_step_and_async_save(tmp_path):
    ck = ckpt_lib.Checkpointer(str(tmp_path), keep=5, async_save=True)
    for step in (1, 2, 3):
        ck.save(step, _state(step=step, seed=step), _meta(step), force=True)
    ck.close()  # waits for the asynchronous writes
    ck = ckpt_lib.Checkpointer(str(tmp_path), keep=5)
    assert ck.latest_step() == 3
    state = _state(step=2, seed=2)
    restored, meta = ck.restore(_abstract(state), _shardings(), step=2)
    ck.close()
    assert meta["step"] == 2 and int(restored["step"]) == 2
    np.testing.assert_array_equal(
        np.asarray(restored["params"]["kernel"]), np.asarray(state["params"]["kernel"])
    )


def test_keep_n_deletes_the_oldest_steps(tmp_path):
    ck = ckpt_lib.Checkpointer(str(tmp_path), keep=2)
    state = _state()
    for step in (10, 20, 30, 40):
        ck.save(step, state, _meta(step), force=True)
    ck.close()
    assert _steps_on_disk(ck.dir) == [30, 40]
    assert ckpt_lib.Checkpointer(str(tmp_path), keep=2).latest_step() == 40


@pytest.mark.parametrize(
    "mode,values,best",
    [("max", {1: 0.5, 2: 0.9, 3: 0.7}, 2), ("min", {1: 0.5, 2: 0.9, 3: 0.3}, 3)],
)
def test_save_best_keeps_only_the_best_step_and_never_touches_the_latest(
    tmp_path, mode, values, best
):
    ck = ckpt_lib.Checkpointer(str(tmp_path), keep=1, best_metric="score", best_mode=mode)
    for step, value in values.items():
        state = _state(step=step, seed=step)
        ck.save(step, state, _meta(step), force=True)
        ck.save_best(step, state, _meta(step), {"score": value, "other": 0.0})
    ck.close()
    assert _steps_on_disk(os.path.join(str(tmp_path), "best")) == [best]
    assert _steps_on_disk(ck.dir) == [3]  # the resume checkpoint is the latest, not the best

    # The best step folder holds that step's state and meta (an init from a run reads it).
    want = _state(step=best, seed=best)
    with ocp.CheckpointManager(
        os.path.join(str(tmp_path), "best"), item_names=("state", "meta")
    ) as mgr:
        out = mgr.restore(
            best,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(_abstract(want)), meta=ocp.args.JsonRestore()
            ),
        )
    assert out["meta"] == _meta(best)
    np.testing.assert_array_equal(
        np.asarray(out["state"]["opt_state"]["mu"]), np.asarray(want["opt_state"]["mu"])
    )


def test_a_resumed_run_still_ranks_the_best_checkpoint_it_finds(tmp_path):
    # Each run opens a new Checkpointer; Orbax writes the metrics it ranks by to disk only
    # when best_fn is set (before, the first run's best was kept beside every later one).
    best = os.path.join(str(tmp_path), "best")
    for step, value, on_disk in [(2, 0.5, [2]), (4, 0.3, [2]), (6, 0.7, [6])]:
        ck = ckpt_lib.Checkpointer(str(tmp_path), keep=1, best_metric="score")
        ck.save_best(step, _state(step=step), _meta(step), {"score": value})
        ck.close()
        assert _steps_on_disk(best) == on_disk, step


def test_save_best_is_a_no_op_without_the_metric_or_without_best_metric(tmp_path):
    ck = ckpt_lib.Checkpointer(str(tmp_path / "a"), best_metric="accuracy")
    ck.save_best(1, _state(), _meta(1), {"loss": 0.1})  # metric missing from this eval
    ck.close()
    assert _steps_on_disk(str(tmp_path / "a" / "best")) == []

    ck = ckpt_lib.Checkpointer(str(tmp_path / "b"))
    ck.save_best(1, _state(), _meta(1), {"accuracy": 1.0})
    ck.close()
    assert not os.path.exists(tmp_path / "b" / "best")


def test_restore_with_a_different_shape_is_an_error(tmp_path):
    # One leaf only: when one read fails Orbax abandons the others, whose coroutines then warn
    # as unraisable exceptions whenever they are collected.
    mesh = _mesh()
    state = {"kernel": jnp.zeros((8, 3), jnp.float32)}
    ck = ckpt_lib.Checkpointer(str(tmp_path))
    ck.save(5, state, _meta(5), force=True)
    ck.close()
    ck = ckpt_lib.Checkpointer(str(tmp_path))
    wrong = {"kernel": jax.ShapeDtypeStruct((8, 4), jnp.float32)}  # saved as (8, 3)
    try:
        with pytest.raises(ckpt_lib.ModelMismatchError) as err:
            ck.restore(wrong, {"kernel": NamedSharding(mesh, PartitionSpec())})
        with pytest.raises(ckpt_lib.ModelMismatchError, match=r"kernel: stored \(8, 3\)"):
            ck.restore_newest_good(wrong, {"kernel": NamedSharding(mesh, PartitionSpec())})
    finally:
        ck.close()
    assert str(err.value).startswith(os.path.join(ck.dir, "5") + " does not fit the model")
    assert "kernel: stored (8, 3), model (8, 4)" in str(err.value)
    assert _steps_on_disk(ck.dir) == [5]  # a mismatch is not damage: nothing set aside


def test_restore_with_a_different_tree_is_an_error(tmp_path):
    state = _state()
    ck = ckpt_lib.Checkpointer(str(tmp_path))
    ck.save(5, state, _meta(5), force=True)
    ck.close()
    ck = ckpt_lib.Checkpointer(str(tmp_path))
    extra = _abstract(state)
    extra["params"]["scale"] = jax.ShapeDtypeStruct((3,), jnp.float32)  # not in the checkpoint
    shardings = _shardings()
    shardings["params"]["scale"] = shardings["params"]["bias"]
    del extra["params"]["bias"]
    del shardings["params"]["bias"]
    try:
        with pytest.raises(ckpt_lib.ModelMismatchError) as err:
            ck.restore(extra, shardings)
    finally:
        ck.close()
    lines = str(err.value).splitlines()
    assert "2 array(s) differ" in lines[0]
    assert lines[1:] == [
        "  params.bias: not in the model (stored (3,))",
        "  params.scale: not in the checkpoint (model (3,))",
    ]


def _run_pending_handlers(until=lambda: False, timeout_s: float = 5.0) -> None:
    """Lets the Python handler of a signal just sent to this process run. CPython runs it in
    the main thread at its next check of the eval loop: at once when the kernel hands the signal
    to the main thread, a few bytecodes later when another thread of the process takes it (JAX
    and TensorFlow start many), so asserting on the very next line is a race."""
    end = time.monotonic() + timeout_s
    while not until() and time.monotonic() < end:
        time.sleep(0.001)


def test_sigterm_sets_should_stop(tmp_path):
    ck = ckpt_lib.Checkpointer(str(tmp_path))
    previous = signal.getsignal(signal.SIGTERM)
    try:
        ck.install_stop_handlers()
        assert not ck.should_stop(1)
        os.kill(os.getpid(), signal.SIGTERM)
        _run_pending_handlers(until=lambda: ck.stop_reason is not None)
        assert ck.should_stop(1) and ck.stop_reason == ckpt_lib.PREEMPTED
        assert ck.should_stop(2)  # stays set until the run exits
    finally:
        signal.signal(signal.SIGTERM, previous)
        ck.close()
    assert not ckpt_lib.Checkpointer(str(tmp_path / "other")).should_stop(1)


def test_a_first_ctrl_c_asks_to_save_and_stop_and_a_second_aborts(tmp_path):
    # A run started in the background of a script (as `cmd &` starts pytest) inherits SIGINT
    # ignored, and then Ctrl-C is rightly left alone (the next test): give this one a terminal's.
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    ck = ckpt_lib.Checkpointer(str(tmp_path))
    previous = signal.getsignal(signal.SIGINT)
    said = []
    try:
        ck.install_stop_handlers(report=said.append)
        os.kill(os.getpid(), signal.SIGINT)
        _run_pending_handlers(until=lambda: ck.stop_reason is not None)
        assert ck.should_stop(1) and ck.stop_reason == ckpt_lib.INTERRUPTED
        assert said == [
            "Ctrl-C: saving a checkpoint after this step, then stopping (press Ctrl-C again to "
            "abort without saving)"
        ]
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            _run_pending_handlers()  # the handler raises here
        assert len(said) == 1
    finally:
        ck.close()
        restored = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, outer)
    assert restored is previous


def test_an_ignored_sigint_stays_ignored(tmp_path):
    # nohup and `cmd &` in a script start the run with SIGINT ignored: it must not stop then.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    ck = ckpt_lib.Checkpointer(str(tmp_path))
    try:
        ck.install_stop_handlers()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGINT)
        _run_pending_handlers(timeout_s=0.1)  # time for a handler, were there one
        assert not ck.should_stop(1)
    finally:
        ck.close()
        signal.signal(signal.SIGINT, previous)


def test_install_sigterm_handler_off_the_main_thread_changes_nothing(tmp_path):
    ck = ckpt_lib.Checkpointer(str(tmp_path))
    previous = signal.getsignal(signal.SIGTERM)
    errors = []

    def install():
        try:
            ck.install_stop_handlers()
        except Exception as e:  # signal.signal raises ValueError off the main thread
            errors.append(e)

    t = threading.Thread(target=install)
    t.start()
    t.join()
    ck.close()
    assert errors == []
    assert signal.getsignal(signal.SIGTERM) is previous


def test_close_puts_back_the_previous_sigterm_handler(tmp_path):
    # After an in-process train() (tests, tools/demo.py) SIGTERM must terminate the process
    # again, not set the flag of a closed Checkpointer.
    previous = signal.getsignal(signal.SIGTERM)
    ck = ckpt_lib.Checkpointer(str(tmp_path))
    try:
        ck.install_stop_handlers()
        ck.install_stop_handlers()  # twice: close still puts back the original one
        assert signal.getsignal(signal.SIGTERM) is not previous
        ck.close()
        assert signal.getsignal(signal.SIGTERM) is previous
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- damaged checkpoints -------------------------------------------------------------------------


def _truncate_array_files(step_dir):
    for f in glob.glob(os.path.join(step_dir, "state", "**", "d", "*"), recursive=True):
        with open(f, "r+b") as fh:
            fh.truncate(os.path.getsize(f) // 2)


def _remove_array_files(step_dir):
    for f in glob.glob(os.path.join(step_dir, "state", "**", "d", "*"), recursive=True):
        os.remove(f)


def _remove_tree_metadata(step_dir):
    os.remove(os.path.join(step_dir, "state", "_METADATA"))


def _remove_json_meta(step_dir):
    os.remove(os.path.join(step_dir, "meta", "metadata"))


@pytest.mark.parametrize(
    "damage,why",
    [
        (_truncate_array_files, "is not valid for value of size"),
        (_remove_array_files, "NOT_FOUND"),
        (_remove_tree_metadata, "state/_METADATA is missing"),
        (_remove_json_meta, "meta/metadata not found"),
    ],
)
def test_a_damaged_latest_checkpoint_is_reported_kept_and_skipped(tmp_path, damage, why):
    ck = ckpt_lib.Checkpointer(str(tmp_path), keep=3)
    for step in (1, 2, 3):
        ck.save(step, _state(step=step, seed=step), _meta(step), force=True)
    ck.close()
    damage(os.path.join(ck.dir, "3"))
    files_before = sorted(glob.glob(os.path.join(ck.dir, "3", "**"), recursive=True))

    reports = []
    ck = ckpt_lib.Checkpointer(str(tmp_path), keep=3)
    want = _state(step=2, seed=2)
    restored, meta = ck.restore_newest_good(_abstract(want), _shardings(), report=reports.append)
    assert meta == _meta(2) and ck.latest_step() == 2
    np.testing.assert_array_equal(
        np.asarray(restored["params"]["kernel"]), np.asarray(want["params"]["kernel"])
    )
    # The run goes on and saves step 3 again, which must neither collide with the damaged
    # folder nor let keep-N delete it.
    for step in (3, 4, 5, 6):
        ck.save(step, want, _meta(step), force=True)
    ck.close()

    assert len(reports) == 1 and "\n" not in reports[0], reports
    kept = os.path.join(ck.dir, "3.damaged")
    assert reports[0].startswith("checkpoint 3 is damaged (")
    assert why in reports[0] and f"kept as {kept}" in reports[0]
    assert reports[0].endswith("resuming from checkpoint 2")
    assert sorted(glob.glob(os.path.join(kept, "**"), recursive=True)) == [
        f.replace(os.path.join(ck.dir, "3"), kept, 1) for f in files_before
    ]
    assert _steps_on_disk(ck.dir) == [4, 5, 6]


def test_damaged_data_of_a_large_array_is_found_on_restore(tmp_path):
    # Large arrays live in their own data files (small ones sit inside the index): damage there
    # passes the metadata check and fails the read itself.
    big = {"w": jnp.arange(100_000, dtype=jnp.float32)}
    sh = {"w": NamedSharding(_mesh(), PartitionSpec())}
    ck = ckpt_lib.Checkpointer(str(tmp_path))
    ck.save(1, big, _meta(1), force=True)
    ck.save(2, big, _meta(2), force=True)
    ck.close()
    files = glob.glob(os.path.join(ck.dir, "2", "state", "**", "d", "*"), recursive=True)
    largest = max(files, key=os.path.getsize)
    with open(largest, "r+b") as fh:
        fh.truncate(os.path.getsize(largest) // 2)
    reports = []
    ck = ckpt_lib.Checkpointer(str(tmp_path))
    _, meta = ck.restore_newest_good(_abstract(big), sh, report=reports.append)
    ck.close()
    assert meta["step"] == 1
    assert (
        len(reports) == 1 and "OUT_OF_RANGE" in reports[0] and "tensorstore_spec" not in reports[0]
    )
    assert "Event loop is closed" not in reports[0]


def test_the_tracebacks_of_abandoned_reads_are_dropped_and_nothing_else(monkeypatch):
    # After one failed read, Orbax's abandoned reads print dozens of tracebacks when they are
    # collected (seen as sys.unraisablehook calls and asyncio "never retrieved" logs).
    got = []
    monkeypatch.setattr(sys, "unraisablehook", got.append)
    ckpt_lib._hide_abandoned_reads()

    def unraisable(err, obj=None):
        return types.SimpleNamespace(exc_value=err, exc_traceback=None, object=obj)

    sys.unraisablehook(unraisable(RuntimeError("Event loop is closed")))
    sys.unraisablehook(unraisable(ValueError('OUT_OF_RANGE: Error reading "w/0" in OCDBT')))
    mine = unraisable(ValueError("something else"))
    sys.unraisablehook(mine)
    assert got == [mine]

    def record(msg, err):
        return logging.LogRecord("asyncio", logging.ERROR, "", 0, msg, (), (type(err), err, None))

    log_filter = logging.getLogger("asyncio").filter
    assert not log_filter(record("Task exception was never retrieved", ValueError("NOT_FOUND: x")))
    assert log_filter(record("Task exception was never retrieved", ValueError("mine")))
    assert log_filter(record("Unclosed client session", ValueError("NOT_FOUND: x")))


def test_when_every_checkpoint_is_damaged_nothing_is_moved(tmp_path):
    ck = ckpt_lib.Checkpointer(str(tmp_path))
    for step in (1, 2):
        ck.save(step, _state(step=step), _meta(step), force=True)
    ck.close()
    for step in (1, 2):
        _remove_tree_metadata(os.path.join(ck.dir, str(step)))
    ck = ckpt_lib.Checkpointer(str(tmp_path))
    try:
        with pytest.raises(ckpt_lib.DamagedCheckpointError, match="step 2: .*; step 1: "):
            ck.restore_newest_good(_abstract(_state()), _shardings())
    finally:
        ck.close()
    assert _steps_on_disk(ck.dir) == [1, 2]
    ck = ckpt_lib.Checkpointer(str(tmp_path / "empty"))
    assert ck.restore_newest_good({}, {}) is None
    ck.close()
