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


def restore_params_only(path: str):
    """Load only `params` from a chartjax checkpoint step folder (for init from a run)."""
    mgr = ocp.CheckpointManager(
        os.path.dirname(os.path.abspath(path)), item_names=("state", "meta")
    )
    step = int(os.path.basename(os.path.normpath(path)))
    restored = mgr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
    return restored["state"]["params"]
