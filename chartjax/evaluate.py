"""Evaluation: predict -> postprocess -> metrics -> metrics.json, predictions.jsonl, plots.

    chartjax-eval --gin_file=gin_configs/tasks/figureqa_rn.gin --workdir=runs/rn \
        [--checkpoint=runs/rn/checkpoints/1200] [--split=validation2]

Padded rows (`_mask` False) are dropped before anything is scored. On multi-host runs each
process writes its rows to a part file and process 0 scores the union.
"""

from __future__ import annotations

import glob
import os

import gin
import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec

from chartjax import host_memory
from chartjax import mesh as mesh_lib
from chartjax import state as state_lib
from chartjax.data import pipeline
from chartjax.metrics import report
from chartjax.tasks import registry


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


def evaluate_split(
    task: registry.Task,
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
) -> dict:
    pid, nproc = jax.process_index(), jax.process_count()
    if predict is None:
        predict = make_predict_fn(model_def, task, jax.tree.map(lambda x: x.sharding, state), mesh)
    local = global_batch_size // nproc
    rows: dict[str, list] = {}
    for batch in task.eval_batches(split, global_batch_size, pid, nproc):
        inputs = pipeline.to_global(batch, mesh, rules, task.model_inputs)
        preds = np.asarray(jax.device_get(predict(state, inputs)))
        mine = preds[pid * local : (pid + 1) * local]  # replicated output: take our rows
        keep = np.asarray(batch["_mask"], bool)
        rows.setdefault("_prediction", []).append(mine[keep])
        for k, v in batch.items():
            if k not in task.model_inputs or k in task.score_inputs:
                rows.setdefault(k, []).append(np.asarray(v)[keep])
    local_cols = {k: np.concatenate(v) for k, v in rows.items()}
    cols = _gather_to_process0(local_cols, out_dir, split, step)
    if pid != 0:
        return {"metrics": {}}
    predictions = cols.pop("_prediction")
    cols.pop("_mask", None)
    scored = task.score(predictions, cols, split)
    metrics, breakdowns, pred_rows = scored[:3]
    # seq2seq tasks also name the metrics they could not compute and the metric signatures.
    extra = scored[3] if len(scored) > 3 else {}
    split_dir = os.path.join(out_dir, split, f"step_{step}")
    os.makedirs(split_dir, exist_ok=True)
    obj = report.build_metrics(
        task=task.name,
        split=split,
        step=step,
        num_examples=len(predictions),
        metrics=metrics,
        breakdowns=breakdowns,
        unavailable=extra.get("unavailable"),
        provenance=report.provenance(
            config_text=gin.config_str(), checkpoint=checkpoint, libraries=extra.get("libraries")
        ),
    )
    report.write_metrics(os.path.join(split_dir, "metrics.json"), obj)
    report.write_jsonl(os.path.join(split_dir, "predictions.jsonl"), pred_rows)
    plot_groups = {
        k: v
        for k, v in breakdowns.items()
        if k not in ("confusion_matrix", "confusion") and any("accuracy" in g for g in v.values())
    }
    if plot_groups:
        report.plot_breakdown(
            plot_groups,
            os.path.join(split_dir, "accuracy_by_group.png"),
            title=f"{task.name} {split} @ step {step}",
        )
    return {"metrics": metrics, "breakdowns": breakdowns, "dir": split_dir}


def _gather_to_process0(cols: dict, out_dir: str, split: str, step: int) -> dict:
    if jax.process_count() == 1:
        return cols
    parts = os.path.join(out_dir, ".parts", f"{split}_{step}")
    os.makedirs(parts, exist_ok=True)
    np.savez(os.path.join(parts, f"{jax.process_index():05d}.npz"), **cols)
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
) -> dict:
    """Restores a checkpoint (latest in workdir by default) and evaluates the task's splits.

    Zero- and few-shot rows have no training run: with `init_format` t5x/hf/chartjax (the
    `init/*.gin` files bind it) and no checkpoint in `workdir`, the pretrained weights are
    evaluated as they are, at step 0.
    """
    from chartjax import checkpoint as ckpt_lib
    from chartjax import init_checkpoint, optim

    mesh_lib.initialize_distributed()
    mesh = mesh_lib.make_mesh(mesh_shape)
    axis_rules = mesh_lib.axis_rules(rules)
    the_task = registry.get_task(task)
    tx, _ = optim.make_optimizer()
    spec, init_fn = state_lib.create(model_fn, tx, mesh, axis_rules, seed)
    ckpt = None
    if checkpoint:
        ckpt_dir, step = (
            os.path.dirname(os.path.normpath(checkpoint)),
            int(os.path.basename(os.path.normpath(checkpoint))),
        )
        ckpt = ckpt_lib.Checkpointer(os.path.dirname(ckpt_dir))
    else:
        ckpt = ckpt_lib.Checkpointer(workdir)
        step = ckpt.latest_step()
        if step is None:
            ckpt.close()
            ckpt = None
    if ckpt is None and init_format == "random":
        raise FileNotFoundError(
            f"no checkpoint in {os.path.join(workdir, 'checkpoints')} "
            f"and no pretrained init (init/*.gin) to evaluate"
        )
    if ckpt is not None:
        state, _ = ckpt.restore(spec.abstract, spec.shardings, step=step)
        source = os.path.join(ckpt.dir, str(step))
    else:
        state = init_checkpoint.pretrained_state(
            init_format, init_path, model_fn, spec, init_fn, tx
        )
        step, source = 0, f"{init_format}:{init_path}"
    os.makedirs(workdir, exist_ok=True)
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
                out_dir=os.path.join(workdir, "eval"),
                checkpoint=source,
                predict=predict,
            )
    if ckpt is not None:
        ckpt.close()
    return results


def main(argv=None):
    from chartjax import config as config_lib

    def extra(p):
        p.add_argument("--checkpoint", default=None, help="a checkpoint step folder")
        p.add_argument("--split", action="append", default=None)

    args = config_lib.parse_flags(argv, description=__doc__, extra=extra)
    host_memory.keep_freed_memory()
    for split, out in evaluate(args.workdir, args.checkpoint, args.split).items():
        if out.get("metrics"):
            print(split, {k: round(v, 4) for k, v in out["metrics"].items()}, out["dir"])
