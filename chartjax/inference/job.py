"""The batch job behind `chartjax-infer`: every input of a source through the engine into
predictions.jsonl (and the task's files), data parallel, streamed, resumable.

Global batch k is the job's inputs [k*G, (k+1)*G), G = the batch size rounded up to a multiple
of the device count; process p featurizes the p-th slice of it in a loader worker (training's
layout: the global batch is the concatenation of the per-process shards in process order). The
outputs come back replicated and process 0 writes every row, in input order, so the files do
not depend on the number of devices or processes. A skipped input leaves a masked hole, so every
process runs the same batches. Rows stream to disk in chunks, and a stopped run resumes
(chartjax/inference/output.py).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import time
from collections.abc import Callable

import numpy as np

from chartjax import workdir_lock
from chartjax.data import loader
from chartjax.inference import inputs as inputs_lib
from chartjax.inference.engine import Engine, make_row
from chartjax.inference.features import BadExample, featurized_slots
from chartjax.inference.inputs import InputError
from chartjax.inference.settings import Inputs, Job, Prompt
from chartjax.tasks.core.task import InferenceSpec

# What decides a row, as infer_progress.json records it: a resumed run must have the same
# (batch size, skip_bad, flush_every do not change a row; an input that stopped a run may be
# skipped on resuming it). The names are chartjax-infer's flags.
RUN_FLAGS = (
    "task",
    "checkpoint",
    "format",
    "vocab",
    "images",
    "inputs",
    "tfds",
    "data_dir",
    "header",
    "template",
    "pair_template",
    "table_field",
    "target_field",
    "max_decode_len",
    "beam_size",
    "alpha",
    "header_font_size",
    "font_path",
    "max_patches",
    "max_input_len",
    "dtype",
    "temperature",
    "top_k",
    "top_p",
    "seed",
    "shard",
)
_PATH_FLAGS = ("checkpoint", "vocab", "images", "inputs", "data_dir", "font_path")


def run_settings(
    engine: Engine, checkpoint: dict, inputs: Inputs, prompt: Prompt, job: Job
) -> dict:
    """RUN_FLAGS as infer_progress.json records them (paths absolute, the checkpoint as located:
    a run folder's step, so a newer checkpoint is not picked up on resuming; the settings as
    resolved, the checkpoint's own included)."""
    given = {
        "task": engine.spec.name,
        **checkpoint,
        "checkpoint": engine.loc.path,
        "images": list(inputs.images) if inputs.images else None,
        "inputs": inputs.jsonl,
        "tfds": inputs.tfds,
        "data_dir": inputs.data_dir,
        **{f.name: getattr(prompt, f.name) for f in dataclasses.fields(prompt)},
        **engine.settings.values,
        "shard": job.shard,
    }

    def norm(key, value):
        if key in _PATH_FLAGS and value is not None:
            if isinstance(value, list | tuple):
                return [os.path.abspath(os.path.expanduser(v)) for v in value]
            return os.path.abspath(os.path.expanduser(value))
        if key == "shard":
            return shard_text(value)
        return value

    return {k: norm(k, given.get(k)) for k in RUN_FLAGS}


def shard_text(shard) -> str | None:
    return None if shard is None else f"{shard[0]}/{shard[1]}"


def _from_process0(err: Exception | None, value: int = 0) -> int:
    """Process 0 checks --out (and the record of a run to resume) alone; every process learns
    whether it may go on, and process 0's `value` (the inputs already done)."""
    import jax

    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        ok, value = (
            int(x)
            for x in multihost_utils.broadcast_one_to_all(
                np.asarray([err is None, value], np.int64)
            )
        )
        if not ok and err is None:
            raise InputError("process 0 stopped before the work (its message says why)")
    if err is not None:
        raise err
    return value


def run(
    spec: InferenceSpec,
    make_engine: Callable[[], Engine],
    checkpoint: dict,
    inputs: Inputs,
    prompt: Prompt,
    job: Job,
    templates: dict,
    output_dirs=(),
    say_note: Callable[[str], None] | None = None,
) -> dict | None:
    """Inference of task `spec` over `inputs` into `job.out`. `make_engine` builds the engine
    (after --out is checked, so a bad --out costs nothing); `checkpoint`: how it was named
    (`format`, `vocab`), for the progress record; `templates`: the named prompts a template may
    choose; `output_dirs`: the folders any task writes in --out (removed by overwrite);
    `say_note`: where the engine's setting notes go. Returns the run's summary (None on
    processes other than 0: process 0 writes and reports)."""
    t0 = time.time()
    import jax

    from chartjax import mesh as mesh_lib
    from chartjax.inference import output as infer_output

    mesh_lib.initialize_distributed()
    pid = jax.process_index()
    progress, err, lock = None, None, None
    existed = os.path.isdir(job.out)
    if pid == 0:
        try:  # before anything is read, so a bad --out costs nothing
            infer_output.check_writable(job.out)
            # One job per --out, as one run per workdir: two writers would interleave rows.
            lock = workdir_lock.WorkdirLock(job.out, infer_output.LOCK, "--out")
            lock.acquire(say_note or print)
            progress = infer_output.prepare_out(
                job.out, set(output_dirs) | set(spec.output_dirs), job.overwrite, job.resume
            )
        except (InputError, workdir_lock.RunRefusedError) as e:
            err = InputError(str(e))
    try:
        _from_process0(err)
        return _infer(spec, make_engine, checkpoint, inputs, prompt, job, templates, progress,
                      say_note, t0)  # fmt: skip
    finally:
        if lock is not None:
            lock.release()
            if not existed and os.path.isdir(job.out) and not os.listdir(job.out):
                os.rmdir(job.out)  # a run that wrote nothing leaves no folder behind


def _infer(spec, make_engine, checkpoint, inputs, prompt, job, templates, progress, say_note, t0):
    """`run` once process 0 holds --out: `progress` is the record to resume from (or None)."""
    import jax

    from chartjax.data import sources
    from chartjax.inference import output as infer_output

    pid = jax.process_index()
    err = None
    engine = make_engine()
    for note in engine.settings.notes:
        (say_note or print)(note)
    loc = engine.loc
    examples = inputs_lib.open_inputs(inputs, prompt, spec, templates)
    # This job's inputs: a contiguous block, so the shards' files, concatenated in shard order,
    # are the whole run's.
    order = sources.process_records(len(examples), *(job.shard or (0, 1)))
    settings = run_settings(engine, checkpoint, inputs, prompt, job)
    start = 0
    if pid == 0 and progress is not None:
        try:
            infer_output.check_resume(
                job.out, progress, settings, len(order), lambda i: examples[order[i]].id
            )
            start = progress["done"]
        except InputError as e:
            err = e
    start = _from_process0(err, start)
    todo = order[start:]

    nproc = jax.process_count()
    devices = engine.devices if todo else jax.device_count()  # loads and places the model
    size = -(-job.batch_size // devices) * devices  # the global batch
    local = size // nproc
    t_loaded = time.time()

    from tqdm import tqdm

    writer = None
    if pid == 0:
        writer = infer_output.Writer(job.out, spec.output_dirs, settings, len(order), progress)
    used = infer_output.TakenPaths(job.out)
    counts = {k: writer.state[k] if writer else 0 for k in ("skipped", "truncated", "rows")}
    rows_before = counts["rows"]
    bar = tqdm(
        total=len(order),
        initial=start,
        desc=f"infer {spec.name}",
        unit="ex",
        file=sys.stderr,
        dynamic_ncols=True,
        mininterval=1.0,
        disable=pid != 0,
    )

    def say(msg: str):
        if pid == 0:
            bar.write(msg, file=sys.stderr)
        else:
            print(f"[process {pid}] {msg}", file=sys.stderr, flush=True)

    fill = []

    def filler():
        """Features for slots without an input (padding, skipped inputs), when a process has
        none of its own in a batch: the first good input's. None: no input is good."""
        if not fill:
            fill.append(None)
            for i in todo:
                try:
                    fill[0] = engine.featurize(examples[i])[0]
                    break
                except BadExample:
                    continue
        return fill[0]

    def slots(k: int) -> list:
        """This process's examples of global batch k (None past the end)."""
        return [
            examples[todo[i]] if i < len(todo) else None
            for i in range(k * size + pid * local, k * size + (pid + 1) * local)
        ]

    def local_batch(k: int, done: dict):
        """This process's slots of global batch k: their examples, and the features (made by
        `_featurized_slots` in a loader worker) with `_mask` (False on padding and skipped
        inputs) and `_cut` (truncated)."""
        exs = slots(k)
        for _, msg in done.pop("bad"):
            if not job.skip_bad:
                raise BadExample(f"{msg} (use --skip_bad to skip bad inputs)")
            say(f"chartjax-infer: skipped {msg}")
        if done:
            return exs, done
        pad = filler()
        if pad is None:
            return exs, None
        batch = {key: np.stack([pad[key]] * local) for key in pad}
        batch["_mask"] = batch["_cut"] = np.zeros(local, bool)
        return exs, batch

    featurized = loader.map_ordered(
        functools.partial(featurized_slots, engine.featurizer.featurize),  # to the workers
        (slots(k) for k in range(-(-len(todo) // size))),
    )

    def finish(k: int, exs, result):
        n = min(size, len(todo) - k * size)  # the inputs of this global batch
        if result is None:  # no good input anywhere: nothing ran
            out, mask, cut = None, np.zeros(size, bool), np.zeros(size, bool)
        else:
            out, mask, cut = (np.asarray(x) for x in result)
        keep = np.flatnonzero(mask[:n])
        counts["skipped"] += n - len(keep)
        counts["truncated"] += int(cut[keep].sum())
        counts["rows"] += len(keep)
        bar.update(n)
        if writer is None:
            return

        def example(r):  # process 0's own slots come first; the others' are read here
            return exs[r] if r < local else examples[todo[k * size + r]]

        batch_exs = [example(r) for r in keep]
        rows = (
            [
                make_row(ex, pred, spec, job.out, used, extra)
                for ex, (pred, extra) in zip(batch_exs, engine.outputs(batch_exs, out[keep]))
            ]
            if len(keep)
            else []
        )
        writer.write(
            rows,
            done=start + k * size + n,
            skipped=counts["skipped"],
            truncated=counts["truncated"],
            last_id=example(n - 1).id,
        )
        if writer.uncommitted >= job.flush_every:
            writer.commit()

    pending = None
    try:
        for k, done in enumerate(featurized):
            try:
                exs, batch = local_batch(k, done)
            except BadExample:
                if pending is not None:  # the batches before the bad input are kept
                    finish(*pending)
                raise
            result = None
            if batch is not None:  # dispatched; the next batch is prepared meanwhile
                result = engine.step(batch)
            if pending is not None:
                finish(*pending)
            pending = (k, exs, result)
        if pending is not None:
            finish(*pending)
        if writer is not None:
            writer.commit(complete=True)
    except BaseException:
        if writer is not None:  # keep what is complete (the state stops at a batch boundary)
            try:
                if writer.fresh and writer.state["done"] == 0:
                    writer.discard()
                else:
                    writer.commit()
            except OSError:
                pass
        raise
    finally:
        bar.close()
        if writer is not None:
            writer.close()
    t_end = time.time()
    if pid != 0:
        return None
    return {
        "task": spec.name,
        "checkpoint": loc.path,
        "format": loc.fmt,
        "settings": engine.settings.values,
        "examples": counts["rows"],
        "skipped": counts["skipped"],
        "truncated_inputs": counts["truncated"],
        "predictions": os.path.join(job.out, infer_output.PREDICTIONS),
        "devices": devices,
        "processes": nproc,
        "batch_size": size,
        "shard": shard_text(job.shard),
        "inputs": len(order),
        "resumed": start,
        "load_seconds": round(t_loaded - t0, 2),
        "seconds": round(t_end - t0, 2),
        "examples_per_s": round((counts["rows"] - rows_before) / max(t_end - t_loaded, 1e-9), 3),
    }
