"""Evaluation: predict -> postprocess -> metrics -> metrics.json, predictions.jsonl, plots.

    chartjax-eval --gin_file=gin_configs/tasks/<recipe>.gin --workdir=runs/<name> \
        [--checkpoint=runs/<name>/checkpoints/1200] [--split=<split>]

Padded rows (`_mask` False) are dropped before anything is scored. On multi-host runs each
process writes its rows to a part file and process 0 scores the union.

A split without answers (a test split whose answers are not released) is predicted, not
scored: its predictions.jsonl has no target, and metrics.json no metric, each listed in
`unavailable` with the reason. report.html reads rows as the task's view says and shows the
figures it names (the task's `report_view`, chartjax/report_figures.py). Evaluating a
workdir's checkpoint also writes its metrics to TensorBoard (`eval/<split>/<metric>` at the
checkpoint's step, chartjax/run_log.py). A progress bar counts the batches on stderr.
"""

from __future__ import annotations

import glob
import os
import re
import sys

import gin
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec
from tqdm import tqdm

from chartjax import checkpoint as ckpt_lib
from chartjax import config_checks as checks
from chartjax import init_checkpoint, report_figures, run_log
from chartjax import mesh as mesh_lib
from chartjax import state as state_lib
from chartjax.config_checks import ConfigError
from chartjax.data import pipeline, sources
from chartjax.metrics import html_report, prediction_files, report
from chartjax.tasks import catalog
from chartjax.tasks.core.task import Task

# A split may be a TFDS slice (`train[95%:]`, `validation1[:10%]`): its folder under eval/
# keeps only characters that need no quoting in a shell and no escaping in a file:// link.
_SPLIT_FOLDER_SUBS = (("%", "pct"), ("[", "_"), (":", "_"), ("]", ""))
_NOT_FOLDER_SAFE = re.compile(r"[^\w.+-]", re.ASCII)


def split_folder(split: str) -> str:
    """The folder of `split` under eval/: a plain split name as it is, a slice made safe
    (`train[95%:]` -> `train_95pct_`, `train[:95%]` -> `train__95pct`). metrics.json keeps the
    split as given, and the readers (plots, paper_tables) take it from there, so runs written
    before (`eval/train[95%:]/`) read as before."""
    for old, new in _SPLIT_FOLDER_SUBS:
        split = split.replace(old, new)
    return _NOT_FOLDER_SAFE.sub("_", split)


def make_predict_fn(model_def, task, state_shardings, mesh):
    """The jitted prediction step; build it once per run so evaluations reuse the compile."""

    def predict(state, batch):
        model = model_def.merge(state["params"], state["model_state"])
        return task.predict(model, batch)

    return jax.jit(
        predict,
        in_shardings=(state_shardings, None),
        out_shardings=NamedSharding(mesh, PartitionSpec()),
    )


LOSS = "loss"  # the metric name of the teacher-forced validation loss (train.best_metric)


def make_loss_fn(model_def, task, state_shardings, mesh):
    """The jitted teacher-forced loss of a padded eval batch -> (sum over target tokens, number
    of target tokens), both replicated. Padding rows (`_mask` False) get only padding targets,
    so they count no token. Text-to-text tasks only (their loss reports `num_tokens`): train
    refuses `best_metric = "loss"` for other tasks before building the model."""

    def loss(state, batch, mask):
        model = model_def.merge(state["params"], state["model_state"])
        pad = getattr(model.cfg, "pad_id", 0)
        targets = jnp.where(mask[:, None], batch["decoder_target_tokens"], pad)
        mean, aux = task.loss(model, {**batch, "decoder_target_tokens": targets}, train=False)
        return mean * aux["num_tokens"], aux["num_tokens"]

    replicated = NamedSharding(mesh, PartitionSpec())
    return jax.jit(loss, in_shardings=(state_shardings, None, None), out_shardings=replicated)


def evaluate_split(
    task: Task,
    model_def: state_lib.ModelDef,
    state,
    mesh,
    rules,
    *,
    split: str,
    step: int,
    global_batch_size: int,
    out_dir: str,
    checkpoint: str | None = None,
    predict=None,
    progress: bool = True,
    loss_fn=None,
) -> dict:
    """Predicts `split`, scores it and writes `<out_dir>/<split_folder(split)>/step_<step>/`
    (metrics.json, predictions.jsonl, plots, report.html). Returns {"metrics", "breakdowns", "unavailable",
    "num_examples", "predictions_only", "dir"} on process 0, {"metrics": {}} elsewhere.

    `loss_fn` (make_loss_fn): also the teacher-forced loss per target token over the split,
    as metric "loss" (the HF Trainer's `eval_loss`, which averages per-batch means instead)."""
    pid, nproc = jax.process_index(), jax.process_count()
    if predict is None:
        predict = make_predict_fn(model_def, task, jax.tree.map(lambda x: x.sharding, state), mesh)
    local = pipeline.local_batch_size(global_batch_size, nproc)
    columns: dict[str, list] = {}
    loss_sum, loss_tokens = 0.0, 0.0
    bar = tqdm(
        pipeline.eval_batches(task, split, global_batch_size, pid, nproc),
        total=_num_batches(task, split, local, pid, nproc),
        desc=f"eval {split}",
        unit="batch",
        file=sys.stderr,
        dynamic_ncols=True,
        mininterval=1.0,
        # Left at 100% when it is the only bar (chartjax-eval, a run's final evaluation);
        # cleared under the training bar of a periodic evaluation.
        leave=None,
        disable=not progress or pid != 0,
    )
    for batch in bar:
        inputs = pipeline.to_global(batch, mesh, rules, task.model_inputs)
        preds = np.asarray(jax.device_get(predict(state, inputs)))
        if loss_fn is not None:
            mask = pipeline.to_global({"_mask": batch["_mask"]}, mesh, rules, ("_mask",))
            total, tokens = jax.device_get(loss_fn(state, inputs, mask["_mask"]))
            loss_sum, loss_tokens = loss_sum + float(total), loss_tokens + float(tokens)
        mine = preds[pid * local : (pid + 1) * local]  # replicated output: take our rows
        keep = np.asarray(batch["_mask"], bool)
        columns.setdefault("_prediction", []).append(mine[keep])
        for k, v in batch.items():
            if k != "_mask" and (k not in task.model_inputs or k in task.host_inputs):
                columns.setdefault(k, []).append(np.asarray(v)[keep])
    cols = _gather_to_process0(
        {k: np.concatenate(v) for k, v in columns.items()}, out_dir, split, step
    )
    bar.close()
    if pid != 0:
        return {"metrics": {}}
    predictions = cols.pop("_prediction")
    scores, rows = task.evaluate(predictions, cols, split)
    if loss_fn is not None:
        scores.metrics[LOSS] = loss_sum / max(loss_tokens, 1.0)
    # Nothing scored and no target anywhere: a split without answers, predicted only.
    predictions_only = not scores.metrics and not any("target" in r for r in rows)
    split_dir = os.path.join(out_dir, split_folder(split), f"step_{step}")
    os.makedirs(split_dir, exist_ok=True)
    obj = report.build_metrics(
        task=task.name,
        split=split,
        step=step,
        num_examples=len(predictions),
        metrics=scores.metrics,
        breakdowns=scores.breakdowns,
        unavailable=scores.unavailable,
        provenance=report.provenance(
            config_text=gin.config_str(), checkpoint=checkpoint, libraries=scores.libraries
        ),
    )
    report.write_metrics(os.path.join(split_dir, "metrics.json"), obj)
    prediction_files.write_jsonl(os.path.join(split_dir, "predictions.jsonl"), rows)
    plot_groups = {
        k: v
        for k, v in scores.breakdowns.items()
        if k not in ("confusion_matrix", "confusion") and any("accuracy" in g for g in v.values())
    }
    if plot_groups:
        report.plot_breakdown(
            plot_groups,
            os.path.join(split_dir, "accuracy_by_group.png"),
            title=f"{task.name} {split} @ step {step}",
        )
    plots = [os.path.join(split_dir, "accuracy_by_group.png")] if plot_groups else []
    view = task.report_view
    figures = None
    if view is not None and view.image_stem is not None:
        # only the rows whose thumbnails the report inlines
        stems = {view.image_stem(r) for r in rows[: html_report.MAX_INLINE_THUMBNAILS]} - {None}
        figures = report_figures.write_figures(
            task.source, split, stems, os.path.join(out_dir, ".figures", split_folder(split))
        )
    html_report.write_report(
        os.path.join(split_dir, "report.html"),
        obj,
        rows,
        plots=plots,
        view=view,
        image_for=lambda row: html_report.find_image(row, [figures] if figures else [], view),
    )
    return {
        "metrics": scores.metrics,
        "breakdowns": scores.breakdowns,
        "unavailable": scores.unavailable,
        "num_examples": len(predictions),
        "predictions_only": predictions_only,
        "dir": split_dir,
    }


def summary(out: dict) -> str:
    """One line of a split's results for the console."""
    if out.get("predictions_only"):
        return (
            f"predictions only ({out['num_examples']:,} examples, the split has no answers): "
            f"{os.path.join(out['dir'], 'predictions.jsonl')}"
        )
    return ", ".join(f"{k}={v:.4f}" for k, v in out["metrics"].items())


def _num_batches(task: Task, split: str, local: int, pid: int, nproc: int) -> int | None:
    """Process 0's eval batches of `split`, the progress bar's total (its share is the largest);
    None where the count would cost a second reading of the examples."""
    source = task.source
    if pid != 0:
        return None
    if hasattr(source, "examples"):  # a TFDS source keeps a split's examples: read once
        n = len(source.examples(split, pid, nproc))
    elif hasattr(source, "num_eval"):  # an indexed source: the same examples for every split
        n = min(-(-source.num_eval // nproc), source.num_eval)
    else:
        return None
    return -(-n // local)


def _gather_to_process0(cols: dict, out_dir: str, split: str, step: int) -> dict:
    if jax.process_count() == 1:
        return cols
    parts = os.path.join(out_dir, ".parts", f"{split_folder(split)}_{step}")
    os.makedirs(parts, exist_ok=True)
    # tf.data hands strings over as object arrays of bytes; .npz keeps them without pickle only
    # as fixed-width bytes.
    plain = {k: v.astype(bytes) if v.dtype == object else v for k, v in cols.items()}
    np.savez(os.path.join(parts, f"{jax.process_index():05d}.npz"), **plain)
    multihost_utils.sync_global_devices(f"eval parts {split} {step}")
    if jax.process_index() != 0:
        return {}
    loaded = [
        dict(np.load(p, allow_pickle=False))
        for p in sorted(glob.glob(os.path.join(parts, "*.npz")))
    ]
    return {k: np.concatenate([part[k] for part in loaded]) for k in loaded[0]}


@gin.configurable(denylist=["workdir", "checkpoint", "splits"])
def evaluate(
    workdir: str,
    checkpoint: str | None = None,
    splits=None,
    *,
    task: str = gin.REQUIRED,
    model_fn=gin.REQUIRED,
    seed: int = 0,
    mesh_shape=(-1, 1),
    rules: str = "data_parallel",
    eval_batch_size: int = 64,
    init_format: str = "random",
    init_path: str | None = None,
    progress: bool = True,
) -> dict:
    """Restores a checkpoint (latest in workdir by default) and evaluates the task's splits.

    Only what prediction reads is restored (parameters, model state such as BatchNorm
    statistics, the step): no optimizer is built. Zero- and few-shot rows have no training run:
    with `init_format` t5x/hf/chartjax (the `init/*.gin` files bind it) and no checkpoint in
    `workdir`, the pretrained weights are evaluated as they are, at step 0.

    The settings and `splits` are checked before the model is built (config_checks.py).
    The metrics go to `<workdir>/tensorboard` as `eval/<split>/<metric>` at the checkpoint's
    step; `progress`: a bar over each split's batches on stderr.
    """
    checks.check(
        "evaluate",
        {
            "task": (task, checks.one_of(catalog.TASKS, "task")),
            "seed": (seed, checks.non_negative_int),
            "mesh_shape": (mesh_shape, checks.mesh_shape),
            "rules": (rules, checks.one_of(mesh_lib.RULES_PRESETS, "rules preset")),
            "eval_batch_size": (eval_batch_size, checks.positive_int),
            "init_format": (init_format, checks.one_of(init_checkpoint.FORMATS, "init format")),
            "progress": (progress, checks.boolean),
        },
    )
    mesh_lib.initialize_distributed()
    mesh = mesh_lib.make_mesh(mesh_shape)
    axis_rules = mesh_lib.axis_rules(rules)
    the_task = catalog.get_task(task)
    sources.check_splits(the_task.source, the_task.name, splits or ())
    spec, init_fn = state_lib.create(model_fn, optax.identity(), mesh, axis_rules, seed)
    if checkpoint is None:
        step = ckpt_lib.latest_step(workdir)
        if step is not None:
            checkpoint = os.path.join(workdir, "checkpoints", str(step))
    if checkpoint is None and init_format == "random":
        raise ConfigError(  # nothing to evaluate: a setting, one line from chartjax-eval
            f"no checkpoint in {os.path.join(workdir, 'checkpoints')} "
            f"and no pretrained init (init/*.gin) to evaluate"
        )
    if checkpoint is not None:
        state = ckpt_lib.restore_for_prediction(checkpoint, spec)
        step, source = int(state["step"]), os.path.abspath(checkpoint)
    else:
        state = init_checkpoint.pretrained_state(
            init_format, init_path, model_fn, spec, init_fn, optax.identity()
        )
        step, source = 0, f"{init_format}:{init_path}"
    os.makedirs(workdir, exist_ok=True)
    config_file = os.path.join(workdir, "config.gin")
    if jax.process_index() == 0 and not os.path.exists(config_file):
        # An evaluation-only run has no training run to save it: its workdir then records
        # what was evaluated (recipe.gin_files names the recipe), as a train run's does.
        with open(config_file, "w") as f:
            f.write(gin.config_str())
    out_dir, changes = eval_folder(workdir)
    if changes and jax.process_index() == 0:
        print(
            f"chartjax-eval: the settings differ from {config_file} in {len(changes)} "
            f"binding(s) ({'; '.join(changes[:4])}{'; ...' if len(changes) > 4 else ''}): "
            f"results go to {out_dir}/, not over the run's eval/",
            file=sys.stderr,
            flush=True,
        )
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "settings.txt"), "w", encoding="utf-8") as f:
            f.write("".join(c + "\n" for c in changes))
    results = {}
    predict = make_predict_fn(spec.model_def, the_task, spec.shardings, mesh)
    with mesh_lib.activate(mesh, axis_rules):
        for split in splits or the_task.eval_splits:
            results[split] = evaluate_split(
                the_task,
                spec.model_def,
                state,
                mesh,
                axis_rules,
                split=split,
                step=step,
                global_batch_size=eval_batch_size,
                out_dir=out_dir,
                checkpoint=source,
                predict=predict,
                progress=progress,
            )
    if jax.process_index() == 0 and not changes:  # the run's own curves, its own settings
        run_log.write_eval_events(workdir, step, {s: out["metrics"] for s, out in results.items()})
    return results


# Bindings that do not change what an evaluation predicts: training, the optimizer and its
# schedule, the selection of parameters, how the evaluation is batched, laid out or shown.
_NOT_COMPARED = (
    "train.",
    "train/",
    "make_optimizer.",
    "schedule.",
    "trainable.",
    "BatchEmaSelection.",
    "recipe.",
    "loader_workers.",
    "initialize_distributed.",
    "evaluate.progress",
    "evaluate.eval_batch_size",
    "evaluate.mesh_shape",
    "evaluate.rules",
)


def eval_folder(workdir: str) -> tuple[str, list[str]]:
    """Where an evaluation of `workdir` writes: `eval/`, or with settings other than the
    run's config.gin (a decoding binding, another eval batch) `eval_<digest>/`, so results of
    other settings never land over the run's own; and the differing bindings."""
    import hashlib

    from chartjax import workdir_lock

    path = os.path.join(workdir, "config.gin")
    if not os.path.exists(path):
        return os.path.join(workdir, "eval"), []
    with open(path, encoding="utf-8") as f:
        changes = workdir_lock.config_changes(f.read(), gin.config_str())
    changes = [c for c in changes if not c.split(":")[0].startswith(_NOT_COMPARED)]
    if not changes:
        return os.path.join(workdir, "eval"), []
    digest = hashlib.sha1("\n".join(changes).encode()).hexdigest()[:8]
    return os.path.join(workdir, f"eval_{digest}"), changes
