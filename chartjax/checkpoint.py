"""A thin Orbax wrapper: periodic save, keep the latest N, keep the best by an eval metric,
save on SIGTERM, and resume of everything the train state holds plus the input position.

Two managers side by side: `<workdir>/checkpoints` (the latest N, used to resume) and
`<workdir>/best` (the single best checkpoint by `best_metric`, saved after evaluations), so
keeping the best never evicts the checkpoint a preempted run must resume from.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

import jax
import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers as policies


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
                    create=True,
                    enable_async_checkpointing=async_save,
                ),
                item_names=("state", "meta"),
            )
        self._sigterm = threading.Event()

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
        """Restores (state, meta) sharded as `shardings`; step None = latest."""
        step = self.latest_step() if step is None else step
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

    # -- preemption ---------------------------------------------------------------------------

    def install_sigterm_handler(self) -> None:
        """SIGTERM sets a flag; the train loop saves and exits cleanly at the next step."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: self._sigterm.set())

    def should_stop(self, step: int) -> bool:
        if self._sigterm.is_set():
            return True
        # On multi-host runs JAX's preemption sync point makes every process agree.
        return jax.process_count() > 1 and self.manager.reached_preemption(step)

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()
        if self.best is not None:
            self.best.wait_until_finished()
            self.best.close()


def _args(state, meta):
    return ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))


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
    mgr = _reader(step_dir)
    # Orbax cannot restore an empty subtree (a model without BatchNorm has model_state {}):
    # such items are put back as they are.
    empty = {k: v for k, v in target.items() if not jax.tree.leaves(v)}
    item = {k: v for k, v in target.items() if k not in empty}
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
