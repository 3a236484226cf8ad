"""A thin Orbax wrapper: periodic save, keep the latest N, keep the best by an eval metric,
save on SIGTERM, and resume of everything the train state holds plus the input position.

Two managers side by side: `<workdir>/checkpoints` (the latest N, used to resume) and
`<workdir>/best` (the single best checkpoint by `best_metric`, saved after evaluations), so
keeping the best never evicts the checkpoint a preempted run must resume from.

Resume (`Checkpointer.restore_newest_good`) reads the newest checkpoint that can be read: a
damaged one (a truncated or missing array file, a missing `_METADATA`) is reported in one line and
renamed to `<step>.damaged` beside the others (kept, and out of Orbax's sight, so neither its
keep-N policy deletes it nor a save of the same step collides with it). A checkpoint whose
parameters differ from the model is a `ModelMismatchError` naming each parameter and both shapes.

Stopping (`Checkpointer.install_stop_handlers`): SIGTERM, a multi-host preemption notice, or a
first Ctrl-C make `should_stop` true, and the loop saves and stops after the step it is in; a
second Ctrl-C aborts at once (KeyboardInterrupt).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable

import jax
import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers as policies


class CheckpointError(ValueError):
    """A checkpoint a run cannot resume from; the message names it and says why."""


class ModelMismatchError(CheckpointError):
    """The stored tree differs from the model's (shapes, missing or unexpected parameters)."""


class DamagedCheckpointError(CheckpointError):
    """No checkpoint of the run can be read; the message lists each one and why."""


# Why a run stopped early (train.train's `stop_reason`); both are rerun to resume.
PREEMPTED = "preempted (SIGTERM)"
INTERRUPTED = "interrupted (Ctrl-C)"


@functools.cache
def save_without_replica_slices_on_cpu() -> None:
    """On CPU, saves write each replicated array from its first replica (called by the writers:
    `Checkpointer` and interop/chartjax_ckpt.save; once per process).

    Orbax's default on CPU and TPU (its `_get_default_use_replica_parallel`; GPUs are already
    off) splits a replicated array into one slice per replica so that each device writes part
    of it. CPU devices share the host's memory, so the split saves no copy, and each slice is a
    `jit_slice` compiled per shape: 48 programs, ~2 CPU s, at a tiny run's first save over 8
    simulated devices. Registered for jax.Array in Orbax's global registry: its StandardSave
    takes no registry of its own, so other Orbax saves of the process on CPU write this way too
    (the same files; only who writes them changes)."""
    if jax.default_backend() != "cpu":
        return
    handler = ocp.type_handlers.ArrayHandler(use_replica_parallel=False)
    absl = logging.getLogger("absl")  # Orbax warns of every override, in each run's log
    level = absl.level
    absl.setLevel(logging.ERROR)
    try:
        ocp.type_handlers.register_type_handler(jax.Array, handler, override=True)
    finally:
        absl.setLevel(level)


class Checkpointer:
    def __init__(
        self,
        workdir: str,
        *,
        keep: int = 3,
        best_metric: str | None = None,
        best_mode: str = "max",
        async_save: bool = False,
    ):
        save_without_replica_slices_on_cpu()
        self.dir = os.path.abspath(os.path.join(workdir, "checkpoints"))
        self.manager = ocp.CheckpointManager(
            self.dir,
            options=ocp.CheckpointManagerOptions(
                preservation_policy=policies.LatestN(keep),
                create=True,
                enable_async_checkpointing=async_save,
            ),
            item_names=("state", "meta"),
        )
        self.best_metric = best_metric
        self.best = None
        if best_metric:
            self.best = ocp.CheckpointManager(
                os.path.abspath(os.path.join(workdir, "best")),
                options=ocp.CheckpointManagerOptions(
                    preservation_policy=policies.BestN(
                        get_metric_fn=lambda m: m[best_metric], reverse=best_mode == "min", n=1
                    ),
                    # Without best_fn Orbax keeps the metrics in memory only: a resumed run
                    # could not rank the best checkpoints it finds and kept them all.
                    best_fn=lambda m: m[best_metric],
                    best_mode=best_mode,
                    create=True,
                    enable_async_checkpointing=async_save,
                ),
                item_names=("state", "meta"),
            )
        self._stop_reason: str | None = None  # set by a signal handler
        self._ctrl_c = False  # a first Ctrl-C came: the next one aborts
        self._previous_handlers: dict = {}  # signal -> the handler install_stop_handlers replaced

    # -- saving -------------------------------------------------------------------------------

    def save(self, step: int, state, meta: dict, *, force: bool = False) -> bool:
        saved = self.manager.save(step, args=_args(state, meta), force=force)
        if saved:
            logging.info("saved checkpoint %d to %s", step, self.dir)
        return saved

    def save_best(self, step: int, state, meta: dict, metrics: dict) -> None:
        if self.best is None or self.best_metric not in metrics:
            return
        self.best.save(step, args=_args(state, meta), metrics=metrics, force=True)

    # -- resuming -----------------------------------------------------------------------------

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def restore(self, abstract_state, shardings, step: int | None = None):
        """Restores (state, meta) sharded as `shardings`; step None = latest.

        A stored tree that differs from `abstract_state` is a ModelMismatchError."""
        step = self.latest_step() if step is None else step
        stored, _ = _stored_tree(os.path.join(self.dir, str(step)))
        if stored is not None:  # else Orbax says what it cannot read
            check_tree(stored, abstract_state, os.path.join(self.dir, str(step)))
        return self._restore(abstract_state, shardings, step)

    def _restore(self, abstract_state, shardings, step: int):
        target = jax.tree.map(
            lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
            abstract_state,
            shardings,
        )
        out = self.manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(target), meta=ocp.args.JsonRestore()
            ),
        )
        return out["state"], out["meta"]

    def restore_newest_good(
        self, abstract_state, shardings, *, report: Callable[[str], None] = logging.warning
    ):
        """(state, meta) of the newest checkpoint that can be read; None when there is none.

        Each newer, damaged checkpoint is reported in one line through `report` and renamed to
        `<step>.damaged` (never deleted). A checkpoint whose tree differs from the model raises
        ModelMismatchError (an older one would not fit either); when no checkpoint can be read,
        DamagedCheckpointError lists them and nothing is renamed.
        """
        _hide_abandoned_reads()
        damaged = []
        for step in sorted(self.manager.all_steps(), reverse=True):
            step_dir = os.path.join(self.dir, str(step))
            stored, why = _stored_tree(step_dir)
            if stored is not None:
                check_tree(stored, abstract_state, step_dir)
                try:
                    state, meta = self._restore(abstract_state, shardings, step)
                    break
                except Exception as err:  # what a damaged file raises is Orbax's/tensorstore's
                    why = _one_line(err, step_dir)
            damaged.append((step, why))
        else:
            if damaged:
                raise DamagedCheckpointError(
                    f"no checkpoint in {self.dir} can be read: "
                    + "; ".join(f"step {s}: {why}" for s, why in damaged)
                )
            return None
        for bad, why in damaged:
            kept = self._set_aside(bad)
            report(
                f"checkpoint {bad} is damaged ({why}); kept as {kept}; "
                f"resuming from checkpoint {step}"
            )
        if damaged:
            self.manager.reload()
        return state, meta

    def _set_aside(self, step: int) -> str:
        """Renames step folder `step` to `<step>.damaged` (`.damaged.<n>` if that exists)."""
        src = os.path.join(self.dir, str(step))
        dst, n = f"{src}.damaged", 1
        while os.path.exists(dst):
            dst, n = f"{src}.damaged.{n}", n + 1
        if jax.process_index() == 0:
            os.rename(src, dst)
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices(f"chartjax set aside checkpoint {step}")
        return dst

    # -- preemption ---------------------------------------------------------------------------

    def install_stop_handlers(self, report: Callable[[str], None] = logging.warning) -> None:
        """SIGTERM asks the train loop to save and stop after the current step. So does a first
        Ctrl-C (SIGINT), which says so through `report`; a second one raises KeyboardInterrupt
        at once, as Python's own handler would. Ctrl-C is left alone where the caller ignores
        SIGINT (nohup, `&` in a script) and on multi-host runs: there every process must stop at
        the same step, which JAX's preemption sync gives SIGTERM and nothing gives a terminal's
        Ctrl-C to one process."""
        if threading.current_thread() is not threading.main_thread():
            return  # signal.signal works on the main thread only

        def on_sigterm(signum, frame):
            self._stop_reason = self._stop_reason or PREEMPTED

        def on_sigint(signum, frame):
            if self._ctrl_c:
                raise KeyboardInterrupt
            self._ctrl_c = True
            self._stop_reason = self._stop_reason or INTERRUPTED
            report(
                "Ctrl-C: saving a checkpoint after this step, then stopping "
                "(press Ctrl-C again to abort without saving)"
            )

        handlers = {signal.SIGTERM: on_sigterm}
        if jax.process_count() == 1 and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            handlers[signal.SIGINT] = on_sigint
        for signum, handler in handlers.items():
            previous = signal.signal(signum, handler)
            self._previous_handlers.setdefault(signum, previous)

    @property
    def stop_reason(self) -> str | None:
        """PREEMPTED or INTERRUPTED once a stop was asked for, else None."""
        return self._stop_reason

    def should_stop(self, step: int) -> bool:
        if self._stop_reason is not None:
            return True
        # On multi-host runs JAX's preemption sync point makes every process agree.
        if jax.process_count() > 1 and self.manager.reached_preemption(step):
            self._stop_reason = PREEMPTED
            return True
        return False

    def close(self) -> None:
        """Waits for pending saves, closes the managers and puts back the signal handlers that
        install_stop_handlers replaced."""
        if threading.current_thread() is threading.main_thread():
            for signum, previous in self._previous_handlers.items():
                signal.signal(signum, previous)
            self._previous_handlers = {}
        self.manager.wait_until_finished()
        self.manager.close()
        if self.best is not None:
            self.best.wait_until_finished()
            self.best.close()


def _args(state, meta):
    return ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))


# -- what a step folder holds ------------------------------------------------------------------


def _stored_tree(step_dir: str):
    """(the stored state's tree metadata, None), or (None, why it cannot be read)."""
    if not os.path.isdir(os.path.join(step_dir, "state")):
        return None, "its state/ folder is missing"
    if not os.path.isfile(os.path.join(step_dir, "state", "_METADATA")):
        return None, "state/_METADATA is missing"
    mgr = _reader(step_dir)
    try:
        stored = mgr.item_metadata(int(os.path.basename(step_dir)))["state"]
    except Exception as err:
        return None, "its tree metadata cannot be read: " + _one_line(err, step_dir)
    finally:
        mgr.close()
    if stored is None:
        return None, "its tree metadata (state/_METADATA) cannot be read"
    return getattr(stored, "tree", stored), None


def check_tree(stored, target, where: str, *, partial: bool = False) -> None:
    """Raises ModelMismatchError, naming each differing array (dotted path) with the stored
    and the model's shape, unless the stored tree (Orbax metadata) has `target`'s array names
    and shapes (with `partial`: at least its names). Parameters are listed first."""
    have = {m.name: tuple(getattr(m, "shape", ())) for m in jax.tree.leaves(stored)}
    names = jax.tree.leaves(ocp.tree.get_param_names(target, include_empty_nodes=False))
    want = dict(zip(names, (tuple(a.shape) for a in jax.tree.leaves(target)), strict=True))
    keys = set(want) | (set() if partial else set(have))
    problems = []
    for k in sorted(keys, key=lambda k: (not k.startswith("params."), k)):
        if k not in have:
            problems.append(f"{k}: not in the checkpoint (model {want[k]})")
        elif k not in want:
            problems.append(f"{k}: not in the model (stored {have[k]})")
        elif have[k] != want[k]:
            problems.append(f"{k}: stored {have[k]}, model {want[k]}")
    if problems:
        shown = problems[:20] + (
            [f"... and {len(problems) - 20} more"] if len(problems) > 20 else []
        )
        raise ModelMismatchError(
            f"{where} does not fit the model: {len(problems)} array(s) differ (was the model "
            "configuration changed?):\n  " + "\n  ".join(shown)
        )


def _hide_abandoned_reads() -> None:
    """When one read of a checkpoint fails, Orbax abandons the others. Later, tensorstore
    completes them on a closed event loop ("RuntimeError: Event loop is closed") and the
    abandoned read coroutines fail when they are collected ("Exception ignored in: <coroutine
    _read_array_index_and_device_put>", with tensorstore's whole spec): dozens of tracebacks
    through sys.unraisablehook for one damaged file, at any time afterwards, and asyncio logs
    "Task exception was never retrieved" for the abandoned tasks. From the first resume or
    partial read on, those (and only those) are dropped."""
    previous = sys.unraisablehook
    if getattr(previous, "_chartjax_hides_abandoned_reads", False):
        return

    def hook(unraisable):
        if not _from_abandoned_read(unraisable):
            previous(unraisable)

    hook._chartjax_hides_abandoned_reads = True
    sys.unraisablehook = hook
    asyncio_log = logging.getLogger("asyncio")
    if not any(isinstance(f, _AbandonedReadLogs) for f in asyncio_log.filters):
        asyncio_log.addFilter(_AbandonedReadLogs())


class _AbandonedReadLogs(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if "exception was never retrieved" not in str(record.msg) or not record.exc_info:
            return True
        return not (_in_orbax(record.exc_info[2]) or _TENSORSTORE.match(str(record.exc_info[1])))


# How tensorstore's errors start (absl status codes).
_TENSORSTORE = re.compile(
    r"(OUT_OF_RANGE|NOT_FOUND|FAILED_PRECONDITION|DATA_LOSS|INVALID_ARGUMENT|UNKNOWN|INTERNAL"
    r"|UNAVAILABLE|ABORTED|CANCELLED|DEADLINE_EXCEEDED|PERMISSION_DENIED): "
)


_ORBAX_DIR = os.path.dirname(os.path.abspath(ocp.__file__)) + os.sep


def _from_abandoned_read(unraisable) -> bool:
    err = unraisable.exc_value
    if isinstance(err, RuntimeError) and str(err) == "Event loop is closed":
        return True
    code = getattr(unraisable.object, "cr_code", None)  # a collected coroutine
    if code is not None and code.co_filename.startswith(_ORBAX_DIR):
        return True
    return _in_orbax(unraisable.exc_traceback) or bool(_TENSORSTORE.match(str(err)))


def _in_orbax(tb) -> bool:
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(_ORBAX_DIR):
            return True
        tb = tb.tb_next
    return False


_DRIVER_NOISE = re.compile(r'Error opening "\w+" driver: ')


def _one_line(err: BaseException, step_dir: str) -> str:
    """An Orbax/tensorstore error as one short line, paths relative to the step folder: the
    innermost cause (Orbax wraps tensorstore's error in one that prints the whole spec)."""
    while err.__cause__ is not None:
        err = err.__cause__
    text = str(err).split(" [tensorstore_spec")[0]
    text = _DRIVER_NOISE.sub("", text).replace(step_dir.rstrip("/") + "/", "")
    text = " ".join(text.split())
    if len(text) > 400:
        text = text[:400] + " ..."
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


# -- reading a run's step folder (init from a run, evaluate, convert, infer) --------------------


def latest_step(workdir: str) -> int | None:
    """The latest step saved in `<workdir>/checkpoints`, or None (creates nothing)."""
    path = os.path.abspath(os.path.join(workdir, "checkpoints"))
    if not os.path.isdir(path):
        return None
    mgr = ocp.CheckpointManager(path, item_names=("state", "meta"))
    try:
        return mgr.latest_step()
    finally:
        mgr.close()


def restore_partial(path: str, target: dict) -> dict:
    """The items of `target` from the train state of step folder `<dir>/<step>`; what `target`
    leaves out (e.g. the optimizer moments) is not read. The one reader of a run's step folder
    besides resume (`Checkpointer.restore`).

    `target`: a subtree of the state with `jax.ShapeDtypeStruct` leaves carrying shardings; it
    fixes the result's shapes, dtypes, key types (int layer indices, where Orbax alone gives back
    "0") and placement.
    """
    step_dir = os.path.abspath(path)
    # Orbax cannot restore an empty subtree (a model without BatchNorm has model_state {}):
    # such items are put back as they are.
    empty = {k: v for k, v in target.items() if not jax.tree.leaves(v)}
    item = {k: v for k, v in target.items() if k not in empty}
    _hide_abandoned_reads()
    stored, _ = _stored_tree(step_dir)
    if stored is not None:  # else Orbax says what it cannot read
        check_tree(stored, item, step_dir, partial=True)
    mgr = _reader(step_dir)
    restore_args = jax.tree.map(lambda a: ocp.ArrayRestoreArgs(sharding=a.sharding), item)
    try:
        out = mgr.restore(
            int(os.path.basename(step_dir)),
            args=ocp.args.Composite(
                state=ocp.args.PyTreeRestore(
                    item=item, restore_args=restore_args, partial_restore=True
                )
            ),
        )
    finally:
        mgr.close()
    return {**out["state"], **empty}


def restore_params_only(path: str, target=None) -> dict:
    """Only `params` of a step folder. `target` as in `restore_partial` (the params subtree);
    None = the stored shapes and dtypes, on this process's first device."""
    if target is None:
        step_dir = os.path.abspath(path)
        mgr = _reader(step_dir)
        try:
            stored = mgr.item_metadata(int(os.path.basename(step_dir)))["state"]
        finally:
            mgr.close()
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        target = jax.tree.map(
            lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device),
            getattr(stored, "tree", stored)["params"],
        )
    return restore_partial(path, {"params": target})["params"]


def restore_for_prediction(path: str, spec) -> dict:
    """A train state for prediction from a step folder, placed as `spec` (`state.StateSpec`)
    says: everything but the optimizer state is read. `spec` must come from a leafless optimizer
    (`optax.identity()`), whose empty state stands in for the run's."""
    if jax.tree.leaves(spec.abstract["opt_state"]):
        raise ValueError("restore_for_prediction: build the spec with optax.identity()")
    target = {
        k: jax.tree.map(
            lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
            spec.abstract[k],
            spec.shardings[k],
        )
        for k in spec.abstract
        if k != "opt_state"
    }
    return {**restore_partial(path, target), "opt_state": spec.abstract["opt_state"]}


def _reader(step_dir: str) -> ocp.CheckpointManager:
    return ocp.CheckpointManager(
        os.path.dirname(step_dir),
        item_handlers={"state": ocp.PyTreeCheckpointHandler(), "meta": ocp.JsonCheckpointHandler()},
    )
