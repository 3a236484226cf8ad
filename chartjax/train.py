"""chartjax training loop, read top to bottom (big_vision style).

    chartjax-train --gin_file=gin_configs/tasks/<recipe>.gin --workdir=runs/<name>

(the command line is chartjax/tools/train.py's).

Sections: settings check -> distributed init, workdir lock -> mesh and rules -> task and
input -> model, optimizer and sharded state -> resume -> jitted step -> loop (log, checkpoint,
evaluate, NaN guard, SIGTERM / Ctrl-C) -> close.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable

import gin
import jax
import jax.numpy as jnp
import optax
from jax.sharding import NamedSharding, PartitionSpec

from chartjax import checkpoint as ckpt_lib
from chartjax import config_checks as checks
from chartjax import evaluate as eval_lib
from chartjax import init_checkpoint, optim, plots, profiling, workdir_lock
from chartjax import mesh as mesh_lib
from chartjax import selection as selection_lib
from chartjax import state as state_lib
from chartjax import trainable as trainable_lib
from chartjax.data import pipeline, sources
from chartjax.models import flops, lora
from chartjax.run_log import RunLog
from chartjax.tasks import catalog
from chartjax.tasks.core.task import Task


def make_loss_fn(model_def: state_lib.ModelDef, task: Task, labels: dict | None = None):
    """`loss_fn(params, state, batch) -> (loss, (aux, model_state))`: the training loss of the
    step at `state`'s step (its dropout key), frozen parameters behind stop_gradient."""

    def loss_fn(params, state, batch):
        rng = jax.random.fold_in(jax.random.wrap_key_data(state["rng"]), state["step"])
        params = trainable_lib.stop_frozen(params, labels)
        model = model_def.merge(params, state["model_state"], rng)
        lora.set_dropout(model, True)
        loss, aux = task.loss(model, batch, train=True)
        return loss, (aux, state_lib.split_model_state(model))

    return loss_fn


def make_train_step(
    model_def: state_lib.ModelDef,
    task: Task,
    tx: optax.GradientTransformation,
    sched: optax.Schedule,
    labels: dict | None = None,
) -> Callable:
    """`labels`: chartjax/trainable.py's TRAIN / FREEZE tree (None: every parameter trains);
    `tx` must be wrapped with it (`trainable.wrap`)."""
    loss_fn = make_loss_fn(model_def, task, labels)

    def train_step(state, batch):
        # allow_int: int8 base kernels (LoraConfig.base_dtype, always frozen) get no gradient.
        (loss, (aux, model_state)), grads = jax.value_and_grad(
            loss_fn, has_aux=True, allow_int=True
        )(state["params"], state, batch)
        grads = trainable_lib.zero_int_grads(grads, state["params"])
        updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
        new_state = {
            "step": state["step"] + 1,
            "params": trainable_lib.keep_frozen(
                optax.apply_updates(state["params"], updates), state["params"], labels
            ),
            "opt_state": opt_state,
            "model_state": model_state,
            "rng": state["rng"],
        }
        metrics = {
            "loss": loss,
            "grad_norm": optax.global_norm(grads),
            "learning_rate": sched(state["step"]),
            **aux,
        }
        return new_state, metrics

    return train_step


def jit_train_step(spec, task: Task, tx, sched, labels, mesh) -> Callable:
    """`make_train_step` jitted over the sharded state (donated) and a global batch."""
    replicated = NamedSharding(mesh, PartitionSpec())
    return jax.jit(
        make_train_step(spec.model_def, task, tx, sched, labels),
        in_shardings=(spec.shardings, None),
        out_shardings=(spec.shardings, replicated),
        donate_argnums=0,
    )


def compile_step(
    task: Task, spec, step_fn, mesh, axis_rules, global_batch_size, seed, loss_fn=None
) -> dict:
    """`train.compile_only`: `step_fn` lowered and compiled at the state's shapes and one real
    training batch (the pipeline's first, featurized as training would), then XLA's analysis
    of it (profiling.compile_report: per device). Nothing runs on the device. With `loss_fn`
    (make_loss_fn's) also what the forward pass saves for the backward under the model's remat
    policy (profiling.residual_report: the whole batch, traced only)."""
    pid, nproc = jax.process_index(), jax.process_count()
    host = pipeline.train_batches(task, global_batch_size, seed, 0, pid, nproc)
    batch = pipeline.to_global(next(iter(host)), mesh, axis_rules, task.model_inputs)
    with mesh_lib.activate(mesh, axis_rules):
        t0 = time.perf_counter()
        lowered = step_fn.lower(spec.abstract, batch)
        t1 = time.perf_counter()
        compiled = lowered.compile()
        t2 = time.perf_counter()
        residuals = {}
        if loss_fn is not None:
            residuals = profiling.residual_report(
                lambda params, state, batch: loss_fn(params, state, batch)[0],
                spec.abstract["params"],
                spec.abstract,
                batch,
            )
    return {
        "task": task.name,
        "global_batch_size": global_batch_size,
        "batch_shapes": {k: list(v.shape) for k, v in batch.items()},
        "mesh": dict(mesh.shape),
        "devices": jax.device_count(),
        "device_kind": jax.devices()[0].device_kind,
        "parameters": state_lib.num_params(spec.abstract),
        "lower_s": t1 - t0,
        "compile_s": t2 - t1,
        **profiling.compile_report(compiled),
        **residuals,
    }


def _all_finite(tree) -> jax.Array:
    return jnp.all(
        jnp.stack(
            [
                jnp.all(jnp.isfinite(x))
                for x in jax.tree.leaves(tree)
                if jnp.issubdtype(x.dtype, jnp.floating)
            ]
        )
    )


def _packing_bound() -> bool:
    """Whether gin binds `Features.pack` (seq2seq.Features) to True (unscoped)."""
    try:
        return gin.query_parameter("Features.pack") is True
    except ValueError:  # not bound
        return False


def _lora_ignored(model_fn) -> bool:
    """Whether gin binds `build_model.lora` (peft/lora.gin) while the model comes from another
    builder (a baseline's own), which would never read it."""
    try:
        lora_bound = gin.query_parameter("build_model.lora") is not None
    except ValueError:
        return False
    return lora_bound and getattr(model_fn, "__name__", "") != "build_model"


@gin.configurable(denylist=["workdir", "allow_config_change"])
def train(
    workdir: str,
    *,
    allow_config_change: bool = True,
    task: str = gin.REQUIRED,
    model_fn: Callable = gin.REQUIRED,
    global_batch_size: int = 32,
    num_train_steps: int = 1000,
    max_train_time_s: float | None = None,  # excludes compilation
    seed: int = 0,
    mesh_shape: tuple[int, ...] = (-1, 1),
    rules: str = "data_parallel",
    log_every: int = 50,
    checkpoint_every: int = 500,
    keep_checkpoints: int = 3,
    eval_every: int = 0,
    eval_batch_size: int | None = None,
    best_metric: str | None = None,
    selection: selection_lib.BatchEmaSelection | None = None,
    flops_per_example: float | str | None = "auto",
    final_eval: bool = True,
    init_format: str = "random",
    init_path: str | None = None,
    progress: bool = True,
    profile_steps: tuple[int, int] | None = None,
    compile_only: bool = False,
) -> dict:
    """Trains `model_fn` on `task`; returns the last logged metrics (and eval results).

    The best checkpoint (`<workdir>/best/`) is chosen by one of two rules: `best_metric`, on
    the first eval split at each periodic evaluation (highest wins; `"loss"`, the
    teacher-forced loss per target token of text-to-text tasks, lowest), or `selection`
    (chartjax/selection.py),
    a moving average of one random batch's score after every update; with `selection`, the
    selected parameters are also evaluated on `selection.final_split` at the end
    (`<workdir>/eval_best/<split>/step_<N>/`).

    One run at a time per workdir (chartjax/workdir_lock.py). A workdir whose config.gin differs
    from this run's config is refused unless `allow_config_change` (chartjax-train refuses it
    by default; `--allow_config_change`); allowed, the differences are logged.

    `profile_steps = (first, last)` writes a profiler trace of those updates to
    `<workdir>/profile/` (chartjax/profiling.py). Logged rows carry `tflops_per_s_per_device`,
    `mfu` where the device's peak is known, and `peak_memory_gb` on GPU/TPU; and the loop's own
    timing (chartjax/profiling.py's StepClock): `step_s`, `input_wait_s`, `input_wait_fraction`,
    and `compile_s` / `first_batch_s` in the first row of a start or resume.

    `compile_only`: build the model and the sharded step, compile it at the shapes of one real
    training batch, write XLA's memory analysis and FLOPs to `<workdir>/compile_only.json` and
    return (`stop_reason` "compile_only"): no training, no checkpoint, no workdir lock.
    """
    # ---------------------------------------------------------------- settings ---------
    # Checked before anything is built or written: a zero period would divide by zero
    # mid-run, a non-positive step count would "finish" with a step-0 checkpoint.
    settings = {
        "global_batch_size": (global_batch_size, checks.positive_int),
        "num_train_steps": (num_train_steps, checks.positive_int),
        "max_train_time_s": (max_train_time_s, checks.optional(checks.positive_number)),
        "seed": (seed, checks.non_negative_int),
        "mesh_shape": (mesh_shape, checks.mesh_shape),
        "rules": (rules, checks.one_of(mesh_lib.RULES_PRESETS, "rules preset")),
        "log_every": (log_every, checks.positive_int),
        "checkpoint_every": (checkpoint_every, checks.positive_int),
        "keep_checkpoints": (keep_checkpoints, checks.positive_int),
        "eval_every": (eval_every, checks.non_negative_int),  # 0: no periodic evaluation
        "eval_batch_size": (eval_batch_size, checks.optional(checks.positive_int)),
        "best_metric": (best_metric, checks.optional(checks.string)),
        "final_eval": (final_eval, checks.boolean),
        "init_format": (init_format, checks.one_of(init_checkpoint.FORMATS, "init format")),
        "progress": (progress, checks.boolean),
        "profile_steps": (profile_steps, checks.optional(checks.step_range)),
        "compile_only": (compile_only, checks.boolean),
    }
    if isinstance(task, str):  # else a Task the caller built
        settings["task"] = (task, checks.one_of(catalog.TASKS, "task"))
    if flops_per_example != "auto":
        settings["flops_per_example"] = (flops_per_example, checks.optional(checks.positive_number))
    checks.check("train", settings)
    if selection is not None and best_metric:
        raise checks.ConfigError(
            f"train.best_metric={best_metric!r} and train.selection both choose the best "
            "checkpoint: bind one of them (train.best_metric = None with a selection rule)"
        )
    mesh_lib.initialize_distributed()
    pid, nproc = jax.process_index(), jax.process_count()
    # ---------------------------------------------------------------- task, data -------
    the_task = catalog.get_task(task) if isinstance(task, str) else task
    # A dataset that is not built (or lacks a split) is one line, before the model is built.
    train_split = getattr(the_task.source, "train_split", None)
    evaluates = (final_eval or eval_every) and not compile_only
    eval_splits = tuple(the_task.eval_splits) if evaluates else ()
    splits = ((train_split,) if train_split else ()) + eval_splits
    sources.check_splits(the_task.source, the_task.name, splits, flag="split")
    if best_metric == eval_lib.LOSS and "decoder_target_tokens" not in the_task.model_inputs:
        raise checks.ConfigError(
            f"train.best_metric = {eval_lib.LOSS!r}: {the_task.name} is not a text-to-text task; "
            "select by one of its metrics instead"
        )
    if the_task.pack is None and _packing_bound():
        raise checks.ConfigError(
            f"Features.pack = True: {the_task.name} does not pack (its examples do not go "
            "through seq2seq.Features); docs/packing.md lists the tasks that do"
        )
    if _lora_ignored(model_fn):
        raise checks.ConfigError(
            f"build_model.lora (peft/lora.gin): this recipe builds its model with "
            f"{model_fn.__module__}.{model_fn.__name__}, which takes no LoRA adapters (all its "
            "parameters would train); LoRA is for the chartjax families built by build_model"
        )
    # ---------------------------------------------------------------- workdir lock -----
    log = RunLog(workdir, enabled=pid == 0)
    # The lock comes before anything is written; released however the run ends. compile_only
    # takes none: it writes one report and may look at the step of a workdir in use.
    lock = workdir_lock.hold(
        workdir, gin.config_str(), allow_config_change=allow_config_change, warn=log.warning
    )
    with contextlib.nullcontext() if compile_only else lock:
        # ------------------------------------------------------------ mesh -------------
        mesh = mesh_lib.make_mesh(mesh_shape)
        axis_rules = mesh_lib.axis_rules(rules)
        if global_batch_size % mesh.shape["data"]:
            raise checks.ConfigError(
                f"train.global_batch_size = {global_batch_size}: must be divisible by the "
                f"data axis ({mesh.shape['data']} devices)"
            )
        log.info(
            f"mesh {dict(mesh.shape)} over {jax.device_count()} devices "
            f"({nproc} processes), rules={rules}"
        )

        # ------------------------------------------------------------ model, optimizer -
        tx, sched = optim.make_optimizer()
        # Frozen parameters (trainable.freeze / .train, LoRA) get no optimizer state.
        labels = trainable_lib.model_labels(model_fn)
        tx = trainable_lib.wrap(tx, labels)
        spec, init_fn = state_lib.create(model_fn, tx, mesh, axis_rules, seed)
        if compile_only:  # before the checkpointer, which would make checkpoints/
            step_fn = jit_train_step(spec, the_task, tx, sched, labels, mesh)
            if flops_per_example == "auto":
                flops_per_example = flops.for_task(model_fn, the_task.lengths)
            loss_fn = make_loss_fn(spec.model_def, the_task, labels)
            report = compile_step(
                the_task, spec, step_fn, mesh, axis_rules, global_batch_size, seed, loss_fn
            )
            if flops_per_example:  # the analytic count (matmuls only), per device and step
                report["analytic_flops"] = flops_per_example * global_batch_size / mesh.size
            profiling.write_compile_report(workdir, report, log.info)
            log.close()
            return {
                "step": 0,
                "train": {},
                "eval": {},
                "stop_reason": "compile_only",
                "compile": report,
            }
        ckpt = ckpt_lib.Checkpointer(
            workdir,
            keep=keep_checkpoints,
            best_metric=selection.key if selection else best_metric,
            # The validation loss is the one metric where lower is better.
            best_mode="min" if best_metric == eval_lib.LOSS and not selection else "max",
        )
        ckpt.install_stop_handlers(report=log.warning)
        if flops_per_example == "auto":  # analytic count for T5/Pix2Struct on the task's lengths
            flops_per_example = flops.for_task(model_fn, the_task.lengths)

        # ------------------------------------------------------------ resume -----------
        # The newest readable checkpoint: damaged newer ones are reported and set aside.
        try:
            resumed = ckpt.restore_newest_good(spec.abstract, spec.shardings, report=log.warning)
            if resumed is not None and (
                resumed[1]["global_batch_size"] != global_batch_size
                or resumed[1]["data_seed"] != seed
            ):
                raise ckpt_lib.CheckpointError(
                    f"cannot resume {ckpt.dir}: it was written with global_batch_size="
                    f"{resumed[1]['global_batch_size']}, seed={resumed[1]['data_seed']}"
                )
        except ckpt_lib.CheckpointError:
            ckpt.close()  # puts back the signal handlers
            log.close()
            raise
        if resumed is not None:
            state, meta = resumed
            log.info(f"resumed from step {int(meta['step'])} ({ckpt.dir})")
        else:
            if init_format == "random":
                state = init_fn()
            else:
                state = init_checkpoint.pretrained_state(
                    init_format, init_path, model_fn, spec, init_fn, tx
                )
                log.info(f"initialized parameters from {init_format} checkpoint {init_path}")
        start_step = int(jax.device_get(state["step"]))
        log.resume_from(start_step)  # rows and events of steps after it are dropped / purged
        log.info(f"{state_lib.num_params(state):,} parameters; starting at step {start_step}")
        if labels is not None:
            n = trainable_lib.count(state["params"], labels)
            log.info(f"{n:,} of them train (trainable.*, LoRA); the others are frozen")
        save_config(workdir, gin.config_str())

        # ------------------------------------------------------------ input ------------
        batches = pipeline.train_batches(the_task, global_batch_size, seed, start_step, pid, nproc)
        device_batches = pipeline.prefetch_to_device(
            batches, mesh, axis_rules, the_task.model_inputs
        )

        # ------------------------------------------------------------ jitted step ------
        replicated = NamedSharding(mesh, PartitionSpec())
        step_fn = jit_train_step(spec, the_task, tx, sched, labels, mesh)
        finite_fn = jax.jit(_all_finite, out_shardings=replicated)
        predict_fn = eval_lib.make_predict_fn(spec.model_def, the_task, spec.shardings, mesh)
        loss_fn = None  # the teacher-forced validation loss, when it chooses the best checkpoint
        if best_metric == eval_lib.LOSS:
            loss_fn = eval_lib.make_loss_fn(spec.model_def, the_task, spec.shardings, mesh)
        selector = None
        if selection is not None:
            select_batch = selection.batch_size or eval_batch_size or global_batch_size
            log.info(
                f"selecting by the moving average of {selection.metric} on one random "
                f"{selection.split} batch of {select_batch} per update, from update "
                f"{selection.start} on (train.selection = None turns it off)"
            )
            scorer = selection_lib.make_scorer(
                selection,
                the_task,
                predict_fn,
                mesh,
                axis_rules,
                batch_size=select_batch,
                seed=seed,
                start_update=start_step,
            )
            selector = selection_lib.Selector(
                selection,
                score=scorer,
                state_shardings=spec.shardings,
                resumed_meta=resumed[1] if resumed is not None else None,
            )

        profiler = profiling.StepProfiler(workdir, profile_steps, report=log.info)

        def meta_for(step):
            return {
                "step": step,
                "examples_seen": step * global_batch_size,
                "global_batch_size": global_batch_size,
                "data_seed": seed,
                **(selector.meta() if selector else {}),
            }

        def stop_non_finite(message):
            """A NaN/Inf stop: close what the run opened (the signal handlers too), then raise."""
            profiler.stop()
            log.close_progress()
            ckpt.close()
            log.close()
            raise FloatingPointError(message)

        def save(step, force=False):
            if not bool(jax.device_get(finite_fn(state["params"]))):
                stop_non_finite(
                    f"parameters are NaN/Inf at step {step}; not saving. The last good checkpoint "
                    f"is step {ckpt.latest_step()} in {ckpt.dir}"
                )
            if selector:  # before the checkpoint whose metadata names it
                selector.write_best(ckpt, meta_for)
            ckpt.save(step, state, meta_for(step), force=force)

        def run_evals(step):
            results = {}
            with mesh_lib.activate(mesh, axis_rules):
                for split in the_task.eval_splits:
                    out = eval_lib.evaluate_split(
                        the_task,
                        spec.model_def,
                        state,
                        mesh,
                        axis_rules,
                        split=split,
                        step=step,
                        global_batch_size=eval_batch_size or global_batch_size,
                        out_dir=os.path.join(workdir, "eval"),
                        checkpoint=os.path.join(ckpt.dir, str(step)),
                        predict=predict_fn,
                        progress=progress,
                        loss_fn=loss_fn,
                    )
                    results[split] = out["metrics"]
                    log.eval_metrics(step, split, out["metrics"])
                    log.info(f"eval {split} @ {step}: {eval_lib.summary(out)}")
            if best_metric and the_task.eval_splits:
                first = results[the_task.eval_splits[0]]
                if best_metric not in first and pid == 0:  # said at every evaluation, not silent
                    log.warning(
                        f"train.best_metric = {best_metric!r}: {the_task.eval_splits[0]} gave "
                        f"no such metric (it gave {', '.join(sorted(first)) or 'none'}); "
                        "no best checkpoint is kept"
                    )
                ckpt.save_best(step, state, meta_for(step), first)
            return results

        def evaluate_selected(selector, ckpt, state, spec, step):
            """The selection rule's parameters on its whole final split (the last step's are in
            eval/); None when no update reached `selection.start`."""
            best = selector.best(ckpt, state, spec.abstract, spec.shardings)
            if best is None:
                log.warning(
                    f"no parameters selected: the run stopped at update {step}, before "
                    f"selection.start={selection.start}"
                )
                return None
            best_step, best_state = best
            with mesh_lib.activate(mesh, axis_rules):
                out = eval_lib.evaluate_split(
                    the_task,
                    spec.model_def,
                    best_state,
                    mesh,
                    axis_rules,
                    split=selection.final_split,
                    step=best_step,
                    global_batch_size=eval_batch_size or global_batch_size,
                    out_dir=os.path.join(workdir, "eval_best"),
                    checkpoint=os.path.join(workdir, "best", str(best_step)),
                    predict=predict_fn,
                    progress=progress,
                )
            log.eval_metrics(best_step, selection.final_split, out["metrics"], prefix="eval_best")
            value = selector.tracker.best_value
            log.info(
                f"selected update {best_step} ({selection.key}={value:.4f}) on "
                f"{selection.final_split}: "
                + ", ".join(f"{k}={v:.4f}" for k, v in out["metrics"].items())
            )
            return {"step": best_step, selection.key: value, "eval": out["metrics"]}

        # ------------------------------------------------------------ loop -------------
        log.start_progress(start_step, num_train_steps, enabled=progress, budget_s=max_train_time_s)
        t0 = time.time()
        last, evals, stop_reason = {}, {}, "done"
        budget_start = None  # the wall-clock budget starts after the first (compiling) step
        # Input wait and wall time per update between log steps (profiling.StepClock: the
        # first, compiling update apart; checkpoints and evaluations paused).
        clock = profiling.StepClock()
        step = start_step
        with mesh_lib.activate(mesh, axis_rules):
            while step < num_train_steps:
                batch = clock.next_batch(device_batches)
                profiler.before(step, start_step)
                state, metrics = step_fn(state, batch)
                step += 1
                profiler.after(step, state)
                if selector:
                    selector.after_update(step, state)
                log.advance()
                if not clock.started:
                    # The first step includes compilation: time from its end.
                    jax.block_until_ready(metrics["loss"])
                    clock.compiled()
                    budget_start = time.time()
                    log.start_budget()
                else:
                    clock.updated()
                if step % log_every == 0 or step == num_train_steps:
                    # device_get blocks until this update has run: the interval's step_s holds
                    # the device's time, not just the asynchronous dispatch.
                    m = {k: float(v) for k, v in jax.device_get(metrics).items()}
                    if not math.isfinite(m["loss"]):
                        stop_non_finite(
                            f"loss is {m['loss']} at step {step}; stopping. The last good "
                            f"checkpoint is step {ckpt.latest_step()} in {ckpt.dir}"
                        )
                    now = time.time()
                    m.update(clock.interval())
                    if "step_s" in m:  # an update after the first in the interval
                        eps = global_batch_size / m["step_s"]
                        m["examples_per_s"] = eps
                        if "examples_per_row" in m:  # packed: eps counts rows
                            m["packed_examples_per_s"] = eps * m["examples_per_row"]
                        if flops_per_example:
                            tflops, mfu = flops.mfu(
                                eps,
                                flops_per_example,
                                jax.device_count(),
                                jax.devices()[0].device_kind,
                            )
                            m["tflops_per_s_per_device"] = tflops
                            if mfu is not None:  # peak known (not on CPU)
                                m["mfu"] = mfu
                    peak = profiling.peak_memory_bytes()
                    if peak is not None:  # GPU/TPU; CPU keeps no statistics
                        m["peak_memory_gb"] = peak / 1e9
                    m.update(step=step, elapsed_s=now - t0, **(selector.last if selector else {}))
                    with clock.paused():  # the first row opens the files (imports tensorboardX)
                        log.metrics(m)
                    last = m
                if step % checkpoint_every == 0:
                    with clock.paused():
                        save(step)
                if eval_every and step % eval_every == 0:
                    with clock.paused():
                        evals = run_evals(step)
                if ckpt.should_stop(step):  # SIGTERM, a preemption notice or Ctrl-C
                    stop_reason = ckpt.stop_reason
                    break
                if max_train_time_s is not None and time.time() - budget_start > max_train_time_s:
                    stop_reason = "time budget"
                    break
        # ------------------------------------------------------------ close ------------
        device_batches.close()  # its input thread ends now, not inside JAX at exit
        profiler.stop(state)  # a run that stopped inside the window keeps its trace
        log.close_progress()
        if ckpt.latest_step() != step:
            save(step, force=True)
        # Stopped by a signal: saved; the evaluations are for the rerun that finishes.
        stopped = stop_reason in (ckpt_lib.PREEMPTED, ckpt_lib.INTERRUPTED)
        if final_eval and (not eval_every or step % eval_every):
            if the_task.eval_splits and not stopped:
                evals = run_evals(step)
        selected = None
        if selector and selection.final_split and not stopped:
            selected = evaluate_selected(selector, ckpt, state, spec, step)
        ckpt.close()
        log.info(f"stopped at step {step}: {stop_reason}")
        save_config(workdir, gin.operative_config_str(), name="operative_config.gin")
        log.close()
        if pid == 0 and last:
            plots.plot_training_curves(
                {os.path.basename(os.path.abspath(workdir)): workdir},
                os.path.join(workdir, "training_curves.png"),
            )
        out = {"step": step, "train": last, "eval": evals, "stop_reason": stop_reason}
        if selected is not None:
            out["selected"] = selected
        return out


def save_config(workdir: str, text: str, name: str = "config.gin") -> None:
    """The resolved gin config next to the checkpoints (process 0 only)."""
    if jax.process_index() == 0:
        with open(os.path.join(workdir, name), "w") as f:
            f.write(text)
