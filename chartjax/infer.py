"""Batch inference with a T5X, HuggingFace or chartjax checkpoint -> predictions.jsonl.

The engine behind `chartjax-infer` (its flags and outputs: chartjax/tools/infer.py). The task
(an InferenceSpec, chartjax/tasks/catalog.py) decides the modality and prompt, any extra
outputs, and whether the model writes text or labels; inputs come from chartjax/infer_inputs.py;
examples are featurized with the training pipeline's own functions (chartjax/tasks/seq2seq.py:
header rendering, Pix2Struct patches, SentencePiece or BART's BPE; chartjax/tasks/
text_classification.py: the DeBERTa / TAPAS tokenizers), so a model sees what it was trained
on, and batched with a `_mask` on padding rows so its step compiles once. Each batch is split
over every device of a data-parallel mesh (chartjax/mesh.py, `pipeline.to_global`, as evaluation
does); rows stream to disk in chunks, and a stopped run resumes (chartjax/infer_output.py).

Two kinds of model: decoders (Pix2Struct, T5, BART) write text, KV-cached greedy or beam search
(chartjax/models/decoding.py); encoder classifiers (DeBERTa, TAPAS) write the `id2label` name of
their argmax as `prediction` and their logits as `scores`. The model's family and size come from
the checkpoint (config.json, T5X shapes or the run's gin); its tokenizer from `--vocab`, else
from the checkpoint's own tokenizer files.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import time
from collections.abc import Callable

import numpy as np

from chartjax import infer_inputs
from chartjax.data import loader, pipeline
from chartjax.infer_inputs import Example, InputError
from chartjax.tasks.task import InferenceSpec


class BadExample(InputError):
    """One input cannot be used (skippable with --skip_bad)."""


class BadImage(BadExample):
    """One input image cannot be used (skippable with --skip_bad)."""


# ------------------------------------------------------------------------ model -------------


def model_kind(cfg) -> str:
    """ "image" (Pix2Struct family), "text" (T5, BART) or "labels" (DeBERTa, TAPAS)."""
    from chartjax.models.model_configs import Pix2StructConfig
    from chartjax.tasks import text_classification

    if isinstance(cfg, Pix2StructConfig):
        return "image"
    if text_classification.family_of(cfg) is not None:
        return "labels"
    return "text"


_KIND_NAMES = {
    "image": "a Pix2Struct-family image model",
    "text": "a T5 (text-to-text) model",
    "labels": "an encoder classifier (DeBERTa / TAPAS)",
}


def check_family(cfg, spec: InferenceSpec, where: str) -> None:
    kind = model_kind(cfg)
    if kind == "text" and type(cfg).__name__ == "BartConfig":
        name = "a BART (text-to-text) model"
    else:
        name = _KIND_NAMES[kind]
    want = "labels" if spec.output == "labels" else spec.modality
    if kind == want:
        return
    runs = {
        "image": "use an image task",
        "text": "a T5 or BART runs with a text task (--task text)",
        "labels": "a classifier runs with --task classify",
    }[kind]
    needs = {
        "image": "a Pix2Struct-family image model",
        "text": "a T5 / Flan-T5 or BART checkpoint",
        "labels": "a DeBERTa or TAPAS classifier",
    }[want]
    raise InputError(f"{where} holds {name}; --task {spec.name} needs {needs} ({runs})")


@dataclasses.dataclass
class Engine:
    """What one kind of model needs: featurize an example, run a batch, read predictions.

    featurize(ex) -> (features {name: array}, truncated?); may raise BadExample.
    forward: what the device step runs on a batch, a hashable key of `_forward` (so a model
      structure and batch shape compile once per process, however many runs).
    outputs(exs, host array) -> per example (prediction, extra row fields).
    """

    featurize: Callable[[Example], tuple[dict, bool]]
    forward: tuple
    outputs: Callable[[list[Example], np.ndarray], list[tuple[object, dict]]]


def _forward(forward: tuple, model, batch):
    """A decoder's token ids `[B, max_decode_len]` (the evaluation's own prediction: greedy, or
    the best beam), or a classifier's fp32 logits `[B, num_labels]`."""
    if forward[0] == "decode":
        from chartjax.tasks import seq2seq

        _, max_decode_len, beam_size, alpha = forward
        predict = seq2seq.make_predict(
            seq2seq.Decoding(max_decode_len=max_decode_len, beam_size=beam_size, alpha=alpha)
        )
        return predict(model, {"encoder_input_tokens": batch["encoder_input_tokens"]})
    from chartjax.data import classifier_inputs
    from chartjax.tasks import text_classification

    return text_classification.predict(
        model, {k: batch[k] for k in classifier_inputs.FEATURES if k in batch}
    )


@functools.cache
def _step_fn(forward: tuple, mesh):
    """The jitted data-parallel step, built once per process: parameters replicated, the batch
    split over `data`; the outputs, `_mask` and `_cut` come back replicated, so process 0 can
    write every row of the global batch."""
    import jax
    from flax import nnx
    from jax.sharding import NamedSharding, PartitionSpec

    def step(graphdef, state, batch):
        return _forward(forward, nnx.merge(graphdef, state), batch), batch["_mask"], batch["_cut"]

    return jax.jit(step, static_argnums=0, out_shardings=NamedSharding(mesh, PartitionSpec()))


def _replicated(state, mesh):
    """The model's state on every device of the mesh. Several processes: each builds its own
    devices' copies from its host copy (no collective, no equality check of ~1 GB)."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    sharding = NamedSharding(mesh, PartitionSpec())
    if jax.process_count() == 1:
        return jax.device_put(state, sharding)

    def one(x):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return jax.random.wrap_key_data(
                one(jax.random.key_data(x)), impl=jax.random.key_impl(x)
            )
        host = np.asarray(x)
        return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])

    return jax.tree.map(one, state)


# ------------------------------------------------------------------------ features ----------


def featurize(ex: Example, features, vocab) -> tuple[np.ndarray, bool]:
    """Model input of one example (+ whether a text input was truncated)."""
    from chartjax.tasks import seq2seq

    if features.modality == "text":
        n = len(vocab.encode(ex.prompt, add_eos=True))
        ids = vocab.encode_batch([ex.prompt], max_len=features.max_input_len, add_eos=True)[0]
        return ids, n > features.max_input_len
    from PIL import Image

    from chartjax.data.images import decode_image_bytes

    try:
        image = decode_image_bytes(infer_inputs.read_image_bytes(ex))
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise BadImage(f"{ex.source}: cannot read image ({type(e).__name__}: {e})") from None
    rendered = seq2seq.image_with_header(image, ex.prompt, features)
    try:
        out = seq2seq.image_features(rendered, features)
    except ValueError as e:  # extreme aspect ratio: row/col ids too large
        raise BadImage(f"{ex.source}: {e}") from None
    return out, False


def _featurized_slots(featurize, exs: list) -> dict:
    """The features of one batch's slots, stacked (a loader worker runs this): slots without
    features (past the end, or a bad input) repeat the first good one, `_mask` False; `bad`
    lists (slot, why) for the caller to skip or raise. Only `bad` when no slot is good."""
    feats, bad = [], []
    for i, ex in enumerate(exs):
        f, cut = None, False
        if ex is not None:
            try:
                f, cut = featurize(ex)
            except BadExample as e:
                bad.append((i, str(e)))
        feats.append((f, cut))
    first = next((f for f, _ in feats if f is not None), None)
    if first is None:
        return {"bad": bad}
    batch = {key: np.stack([(f or first)[key] for f, _ in feats]) for key in first}
    batch["_mask"] = np.array([f is not None for f, _ in feats])
    batch["_cut"] = np.array([f is not None and cut for f, cut in feats])
    return {**batch, "bad": bad}


def decoder_engine(
    args, cfg, spec: InferenceSpec, vocab_path: str, *, allow_unused_ids: bool = False
) -> Engine:
    """`allow_unused_ids`: the run that wrote the checkpoint bound
    `vocabulary_check.allow_unused_ids = True` (its config.gin)."""
    from chartjax import config
    from chartjax.data import vocab as vocab_lib
    from chartjax.tasks import seq2seq

    vocab = vocab_lib.open_vocabulary(vocab_path)
    try:  # the check chartjax-train and chartjax-eval make (config.py)
        config.check_vocabulary(
            vocab.vocab_size,
            cfg.vocab_size,
            vocab=vocab_path,
            model=f"the checkpoint's {type(cfg).__name__}.vocab_size = {cfg.vocab_size}",
            allow_unused_ids=allow_unused_ids,
            remedy="not this checkpoint's vocabulary: give its own with --vocab",
        )
    except config.ConfigError as e:
        raise InputError(str(e)) from None
    features = seq2seq.Features(
        modality=spec.modality,
        vocab_file=vocab_path,
        max_patches=args.max_patches,
        patch_size=getattr(cfg, "patch_size", 16),
        max_position_id=getattr(cfg, "max_position_embeddings", 4096),
        header_font_size=args.header_font_size,
        font_path=args.font_path,
        max_input_len=args.max_input_len,
    )

    def feats(ex):
        f, cut = featurize(ex, features, vocab)
        return {"encoder_input_tokens": f}, cut

    def outputs(exs, tokens):
        return [(t, {}) for t in vocab.decode_batch(tokens[: len(exs)])]

    return Engine(feats, ("decode", args.max_decode_len, args.beam_size, args.alpha), outputs)


def classifier_engine(args, cfg, tokenizer_path: str, labels) -> Engine:
    from chartjax.data import classifier_inputs
    from chartjax.tasks import text_classification

    family = text_classification.family_of(cfg)
    try:
        tok = classifier_inputs.ClassifierTokenizer(tokenizer_path, family, args.max_input_len)
    except FileNotFoundError as e:
        raise InputError(str(e)) from None
    if tok.vocab_size > cfg.vocab_size:
        raise InputError(
            f"{tokenizer_path}: the tokenizer has {tok.vocab_size} ids but the model's "
            f"vocabulary has {cfg.vocab_size}: not this checkpoint's tokenizer"
        )
    names = text_classification.label_names(labels, cfg.num_labels)
    max_len = args.max_input_len

    def feats(ex):
        try:
            out = tok(ex.prompt, ex.pair, ex.table)
        except classifier_inputs.BadInput as e:
            raise BadExample(f"{ex.source}: {e}") from None
        # Counted as truncated: an input that fills --max_input_len (HF cuts silently).
        return out, bool(out["attention_mask"].sum() >= max_len)

    def outputs(exs, logits):
        logits = np.asarray(logits, np.float32)[: len(exs)]
        return [(names[int(np.argmax(row))], {"scores": [float(x) for x in row]}) for row in logits]

    return Engine(feats, ("classify",), outputs)


# ------------------------------------------------------------------------ outputs -----------


def make_row(
    ex: Example,
    prediction,
    spec: InferenceSpec,
    out_dir: str,
    used: set[str],
    extra: dict | None = None,
) -> dict:
    from chartjax.tasks import seq2seq

    row = {"id": ex.id, "prediction": prediction, "input": ex.prompt[: seq2seq.INPUT_CHARS]}
    row.update(extra or {})
    if ex.target is not None:
        row["target"] = ex.target
    if spec.write_outputs is not None:
        spec.write_outputs(row, out_dir, used)
    return row


# ------------------------------------------------------------------------ run ---------------


def _allows_unused_ids(loc) -> bool:
    """Whether the train run that wrote checkpoint `loc` bound
    `vocabulary_check.allow_unused_ids = True` (its saved config.gin): its vocabulary then
    passes here as it did in training."""
    from chartjax import recipe
    from chartjax.interop import formats

    saved = formats.run_config_file(loc)
    return bool(saved and recipe.saved_binding(saved, "vocabulary_check", "allow_unused_ids"))


def _tokenizer_path(args, loc) -> str:
    from chartjax.interop import formats

    if args.vocab:
        return args.vocab
    own = formats.vocabulary(loc)  # its tokenizer files, or the one its run's config.gin names
    if own is None:
        raise InputError(
            f"{loc.path} carries no tokenizer files ({', '.join(formats.TOKENIZER_FILES)}): "
            "give --vocab"
        )
    return own


# The flags that decide what a row holds: a resumed run must have the same (--batch_size,
# --skip_bad, --flush_every do not change a row; an input that stopped a run may be skipped on
# resuming it).
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
    "shard",
)
_PATH_FLAGS = ("checkpoint", "vocab", "images", "inputs", "data_dir", "font_path")


def run_settings(args, checkpoint: str) -> dict:
    """RUN_FLAGS as infer_progress.json records them (paths absolute, the checkpoint as
    located: a run folder's step, so a newer checkpoint is not picked up on resuming)."""

    def norm(key, value):
        if key == "checkpoint":
            return os.path.abspath(checkpoint)
        if key in _PATH_FLAGS and value is not None:
            if isinstance(value, list | tuple):
                return [os.path.abspath(os.path.expanduser(v)) for v in value]
            return os.path.abspath(os.path.expanduser(value))
        if key == "shard":
            return shard_text(value)
        return value

    return {k: norm(k, getattr(args, k, None)) for k in RUN_FLAGS}


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


def run(args, spec: InferenceSpec, templates: dict, output_dirs=()) -> dict | None:
    """Inference as the parsed `chartjax-infer` flags ask, for the task `spec`; `templates`:
    the named prompts `--template` may choose; `output_dirs`: the folders any task writes in
    --out (removed by --overwrite). Returns the run's summary (None on processes other than 0:
    process 0 writes and reports).

    Data parallel over every device (chartjax/mesh.py): global batch k is the job's inputs
    [k*G, (k+1)*G), G = --batch_size rounded up to a multiple of the device count; process p
    featurizes the p-th slice of it (training's layout: the global batch is the concatenation
    of the per-process shards in process order). The outputs come back replicated and process
    0 writes every row, in input order, so the files do not depend on the number of devices or
    processes. A skipped input leaves a masked hole, so every process runs the same batches."""
    t0 = time.time()
    import jax

    from chartjax import infer_output
    from chartjax import mesh as mesh_lib
    from chartjax.data import sources
    from chartjax.interop import formats

    mesh_lib.initialize_distributed()
    pid = jax.process_index()
    progress, err = None, None
    if pid == 0:
        try:  # before anything is read, so a bad --out costs nothing
            progress = infer_output.prepare_out(
                args.out, set(output_dirs) | set(spec.output_dirs), args.overwrite, args.resume
            )
        except InputError as e:
            err = e
    _from_process0(err)

    if args.vocab and not os.path.exists(args.vocab):
        raise InputError(f"vocabulary file not found: {args.vocab}")
    if args.font_path and not os.path.isfile(args.font_path):
        raise InputError(f"--font_path not found: {args.font_path}")
    loc = formats.locate(args.checkpoint, args.format)
    dtype = args.dtype
    if dtype == "auto":
        dtype = "bfloat16" if jax.default_backend() in ("gpu", "tpu") else "float32"
    cfg = formats.read_config(loc, dtype=dtype)
    check_family(cfg, spec, loc.path)
    tokenizer = _tokenizer_path(args, loc)
    if spec.output == "labels":
        engine = classifier_engine(args, cfg, tokenizer, formats.read_labels(loc))
    else:
        engine = decoder_engine(
            args, cfg, spec, tokenizer, allow_unused_ids=_allows_unused_ids(loc)
        )
    inputs = infer_inputs.open_inputs(args, spec, templates)
    # This job's inputs: a contiguous block, so the shards' files, concatenated in shard order,
    # are the whole run's.
    job = sources.process_records(len(inputs), *(args.shard or (0, 1)))
    settings = run_settings(args, loc.path)
    start = 0
    if pid == 0 and progress is not None:
        try:
            infer_output.check_resume(
                args.out, progress, settings, len(job), lambda i: inputs[job[i]].id
            )
            start = progress["done"]
        except InputError as e:
            err = e
    start = _from_process0(err, start)
    todo = job[start:]

    mesh = mesh_lib.make_mesh((-1, 1))
    rules = mesh_lib.axis_rules("data_parallel")
    nproc, devices = jax.process_count(), mesh.devices.size
    size = -(-args.batch_size // devices) * devices  # the global batch
    local = size // nproc
    if todo:
        from flax import nnx

        graphdef, state = nnx.split(formats.load(loc, cfg))
        state = _replicated(state, mesh)
        step = _step_fn(engine.forward, mesh)
    t_loaded = time.time()

    from tqdm import tqdm

    writer = None
    if pid == 0:
        writer = infer_output.Writer(args.out, spec.output_dirs, settings, len(job), progress)
    used = infer_output.TakenPaths(args.out)
    counts = {k: writer.state[k] if writer else 0 for k in ("skipped", "truncated", "rows")}
    rows_before = counts["rows"]
    bar = tqdm(
        total=len(job),
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
                    fill[0] = engine.featurize(inputs[i])[0]
                    break
                except BadExample:
                    continue
        return fill[0]

    def slots(k: int) -> list:
        """This process's examples of global batch k (None past the end)."""
        return [
            inputs[todo[i]] if i < len(todo) else None
            for i in range(k * size + pid * local, k * size + (pid + 1) * local)
        ]

    def local_batch(k: int, done: dict):
        """This process's slots of global batch k: their examples, and the features (made by
        `_featurized_slots` in a loader worker) with `_mask` (False on padding and skipped
        inputs) and `_cut` (truncated)."""
        exs = slots(k)
        for _, msg in done.pop("bad"):
            if not args.skip_bad:
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
        functools.partial(_featurized_slots, engine.featurize),
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
            return exs[r] if r < local else inputs[todo[k * size + r]]

        batch_exs = [example(r) for r in keep]
        rows = (
            [
                make_row(ex, pred, spec, args.out, used, extra)
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
        if writer.uncommitted >= args.flush_every:
            writer.commit()

    pending = None
    try:
        with mesh_lib.activate(mesh, rules):
            for k, done in enumerate(featurized):
                try:
                    exs, batch = local_batch(k, done)
                except BadExample:
                    if pending is not None:  # the batches before the bad input are kept
                        finish(*pending)
                    raise
                result = None
                if batch is not None:  # dispatched; the next batch is prepared meanwhile
                    result = step(graphdef, state, pipeline.to_global(batch, mesh, rules))
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
        "examples": counts["rows"],
        "skipped": counts["skipped"],
        "truncated_inputs": counts["truncated"],
        "predictions": os.path.join(args.out, infer_output.PREDICTIONS),
        "devices": devices,
        "processes": nproc,
        "batch_size": size,
        "shard": shard_text(args.shard),
        "inputs": len(job),
        "resumed": start,
        "load_seconds": round(t_loaded - t0, 2),
        "seconds": round(t_end - t0, 2),
        "examples_per_s": round((counts["rows"] - rows_before) / max(t_end - t_loaded, 1e-9), 3),
    }
