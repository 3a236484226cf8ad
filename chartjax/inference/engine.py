"""The inference engine: a checkpoint that predicts, behind `chartjax-infer` (chartjax/inference/
job.py), `chartjax.load` (chartjax/api.py) and, through the same decoding step
(`seq2seq.make_predict`, chartjax/models/decoding.py), `chartjax-eval`.

    engine = Engine.from_checkpoint("runs/my_run", settings=Settings(max_decode_len=512))
    results = engine.predict(examples)  # [(prediction, extra row fields)] per example

The task (an InferenceSpec, chartjax/tasks/catalog.py) decides the modality and prompt, any extra
outputs, and whether the model writes text or labels. Examples are featurized with the training
pipeline's own functions (chartjax/tasks/core/seq2seq.py: header rendering, Pix2Struct patches,
SentencePiece or BART's BPE; chartjax/tasks/core/text_classification.py: the DeBERTa / TAPAS
tokenizers), so a model sees what it was trained on, and batched with a `_mask` on padding rows so
its step compiles once. A batch is split over every device of a data-parallel mesh
(chartjax/mesh.py, `pipeline.to_global`, as evaluation does).

Four kinds of model: decoders (Pix2Struct, T5, BART) write text, KV-cached greedy or beam
search; PaliGemma (1, 2, ChartGemma) writes text from an image and a prompt, greedy, beam search
or sampling (chartjax/inference/paligemma_features.py); encoder classifiers (DeBERTa, TAPAS)
write the `id2label` name of their argmax as `prediction` and their logits as `scores`; yes/no
models of a task's own features (the Relation Network family, featurized by their task,
`InferenceSpec.features`) write "yes" or "no", their logits and the probability of yes. The
model's family and size come from the checkpoint (config.json, T5X shapes or the run's gin); its
tokenizer from `vocab`, else from the checkpoint's own files; its settings from `Settings`, else
the checkpoint's own (chartjax/inference/settings.py).
"""

from __future__ import annotations

import dataclasses
import functools
import os

import numpy as np

from chartjax.inference.features import (
    Featurizer,
    classifier_featurizer,
    decoder_featurizer,
    yes_no_featurizer,
)
from chartjax.inference.inputs import Example, InputError
from chartjax.inference.settings import Settings, checkpoint_settings, resolve
from chartjax.tasks.core.task import InferenceSpec

# ------------------------------------------------------------------------ model -------------


def model_kind(cfg) -> str:
    """ "image" (Pix2Struct family), "paligemma" (PaliGemma 1 / 2), "text" (T5, BART), "labels"
    (DeBERTa, TAPAS) or "yes_no" (the Relation Network family: RN, CNN+LSTM, text-only)."""
    from chartjax.models.model_configs import Pix2StructConfig
    from chartjax.models.paligemma import PaliGemmaConfig
    from chartjax.models.relation_network import RNConfig
    from chartjax.tasks.core import text_classification

    if isinstance(cfg, Pix2StructConfig):
        return "image"
    if isinstance(cfg, PaliGemmaConfig):
        return "paligemma"
    if isinstance(cfg, RNConfig):
        return "yes_no"
    if text_classification.family_of(cfg) is not None:
        return "labels"
    return "text"


_KIND_NAMES = {
    "image": "a Pix2Struct-family image model",
    "paligemma": "a PaliGemma (image + prompt -> text) model",
    "text": "a T5 (text-to-text) model",
    "labels": "an encoder classifier (DeBERTa / TAPAS)",
    "yes_no": "a yes/no model of the Relation Network family",
}


def check_family(cfg, spec: InferenceSpec, where: str, run_task: str | None = None) -> None:
    kind = model_kind(cfg)
    if kind == "text" and type(cfg).__name__ == "BartConfig":
        name = "a BART (text-to-text) model"
    else:
        name = _KIND_NAMES[kind]
    want = spec.output if spec.output in ("labels", "yes_no") else spec.modality
    if kind == want or (kind == "paligemma" and want == "image"):
        return
    runs = {
        "image": "use an image task",
        "paligemma": "use an image task",
        "text": "a T5 or BART runs with a text task (--task text)",
        "labels": "a classifier runs with --task classify",
        "yes_no": f"it answers with --task {run_task or 'of its train run'}",
    }[kind]
    needs = {
        "image": "a Pix2Struct-family image model",
        "text": "a T5 / Flan-T5 or BART checkpoint",
        "labels": "a DeBERTa or TAPAS classifier",
        "yes_no": "a yes/no model trained on that task",
    }[want]
    raise InputError(f"{where} holds {name}; --task {spec.name} needs {needs} ({runs})")


def _forward(forward: tuple, model, batch):
    """A decoder's token ids `[B, max_decode_len]` (the evaluation's own prediction: greedy, or
    the best beam), a classifier's fp32 logits `[B, num_labels]`, or those of a model that
    reads a task's own features (`logits`: the batch but `_mask` and `_cut`)."""
    if forward[0] == "logits":
        from chartjax.tasks.core import classification

        return classification.logits(model, {k: v for k, v in batch.items() if k[0] != "_"})
    if forward[0] == "decode":
        from chartjax.tasks.core import seq2seq

        _, max_decode_len, beam_size, alpha = forward
        predict = seq2seq.make_predict(
            seq2seq.Decoding(max_decode_len=max_decode_len, beam_size=beam_size, alpha=alpha)
        )
        return predict(model, {"encoder_input_tokens": batch["encoder_input_tokens"]})
    from chartjax.data import classifier_inputs
    from chartjax.tasks.core import text_classification

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


# ------------------------------------------------------------------------ outputs -----------


def make_row(
    ex: Example,
    prediction,
    spec: InferenceSpec,
    out_dir: str,
    used: set[str],
    extra: dict | None = None,
) -> dict:
    from chartjax.tasks.core import seq2seq

    row = {"id": ex.id, "prediction": prediction, "input": ex.prompt[: seq2seq.INPUT_CHARS]}
    row.update(extra or {})
    if ex.target is not None:
        row["target"] = ex.target
    if spec.write_outputs is not None:
        spec.write_outputs(row, out_dir, used)
    return row


# ------------------------------------------------------------------------ the engine --------


def allows_unused_ids(loc) -> bool:
    """Whether the train run that wrote checkpoint `loc` bound
    `vocabulary_check.allow_unused_ids = True` (its saved config.gin): its vocabulary then
    passes here as it did in training."""
    from chartjax import recipe
    from chartjax.interop import formats

    saved = formats.run_config_file(loc)
    return bool(saved and recipe.saved_binding(saved, "vocabulary_check", "allow_unused_ids"))


def default_task(cfg, run: dict, where: str) -> str:
    """`classify` for DeBERTa / TAPAS, `text` for T5 / BART, for an image or yes/no model the
    task its train run implies (catalog.inference_of_run); else the caller must name one. A
    PaliGemma without a train run (an HF folder) answers questions (catalog.QUESTION_ANSWERING,
    whose prompt is the question itself)."""
    from chartjax.tasks import catalog

    kind = model_kind(cfg)
    if kind not in ("image", "yes_no", "paligemma"):
        return "classify" if kind == "labels" else "text"
    task = catalog.inference_of_run(run)
    if task is None and kind == "paligemma":
        return catalog.QUESTION_ANSWERING
    if task is None:
        image_tasks = sorted(n for n, s in catalog.INFERENCE.items() if s.modality == "image")
        raise InputError(
            f"{where} holds an image model whose task is not recorded: give task= (one of "
            f"{', '.join(image_tasks)}; chartjax-infer --task)"
        )
    return task


class Engine:
    """A located checkpoint with its task, tokenizer and settings; the model is loaded and
    placed on every device of a data-parallel mesh when first needed (`place`)."""

    def __init__(
        self, loc, cfg, spec, tokenizer, labels, allow_unused_ids, given, own, where, run=None
    ):
        self.loc, self.config, self.spec = loc, cfg, spec
        self.tokenizer, self.labels, self.allow_unused_ids = tokenizer, labels, allow_unused_ids
        self._own, self._where, self._run = own, where, run or {}
        self.given = given
        self.settings = resolve(given, own, where)
        self._device = {}  # shared with `with_settings` copies: mesh, rules, graphdef, state

    @classmethod
    def from_checkpoint(
        cls,
        path: str,
        *,
        task: str | None = None,
        format: str = "auto",
        vocab: str | None = None,
        settings: Settings = Settings(),
    ) -> Engine:
        """`path`: a T5X, HF or chartjax checkpoint directory, a train run's step folder, or
        its workdir (the latest step; a LoRA run's adapters merged). `task`: an inference task
        name (default: `default_task`). Errors name the file (InputError, OSError)."""
        import jax

        from chartjax.interop import formats
        from chartjax.tasks import catalog

        if vocab is not None:
            vocab = os.path.expanduser(vocab)
            if not os.path.exists(vocab):
                raise InputError(f"vocabulary file not found: {vocab}")
        loc = formats.locate(os.path.expanduser(str(path)), format)
        run = formats.run_inputs(loc)  # the run's config.gin, read once
        own, where = checkpoint_settings(loc, run)
        dtype = resolve(settings, own, where).dtype
        if dtype == "auto":
            dtype = "bfloat16" if jax.default_backend() in ("gpu", "tpu") else "float32"
        cfg = formats.read_config(loc, dtype=dtype)
        spec = catalog.inference(task or default_task(cfg, run, loc.path))
        check_family(cfg, spec, loc.path, run.get("task"))
        tokenizer = vocab or formats.vocabulary(loc)  # its files, or its run's config.gin's
        if tokenizer is None and spec.features is None:  # else the task's own featurization
            raise InputError(
                f"{loc.path} carries no tokenizer files ({', '.join(formats.TOKENIZER_FILES)}): "
                "give vocab= (chartjax-infer --vocab)"
            )
        labels = formats.read_labels(loc)
        engine = cls(
            loc, cfg, spec, tokenizer, labels, allows_unused_ids(loc), settings, own, where, run
        )
        _ = engine.featurizer  # the tokenizer read and checked against the model now
        return engine

    def with_settings(self, settings: Settings) -> Engine:
        """The same loaded model with other featurization / decoding settings."""
        if settings.dtype not in (None, self.given.dtype):
            raise InputError("dtype is chosen when the checkpoint is loaded")
        other = Engine(
            self.loc,
            self.config,
            self.spec,
            self.tokenizer,
            self.labels,
            self.allow_unused_ids,
            dataclasses.replace(settings, dtype=self.given.dtype),
            self._own,
            self._where,
            self._run,
        )
        other._device = self._device
        return other

    @functools.cached_property
    def featurizer(self) -> Featurizer:
        s = self.settings
        if model_kind(self.config) == "paligemma":
            from chartjax.inference import paligemma_features

            return paligemma_features.featurizer(self.config, self.tokenizer, s, self.loc.path)
        if self.spec.output == "yes_no":
            return yes_no_featurizer(self.spec, self._run, self.loc.path)
        if self.spec.output == "labels":
            return classifier_featurizer(self.config, self.tokenizer, self.labels, s.max_input_len)
        return decoder_featurizer(
            self.config, self.spec, self.tokenizer, s, allow_unused_ids=self.allow_unused_ids
        )

    def featurize(self, ex: Example) -> tuple[dict, bool]:
        return self.featurizer.featurize(ex)

    def outputs(self, exs: list[Example], out) -> list[tuple[object, dict]]:
        return self.featurizer.outputs(exs, out)

    def place(self) -> dict:
        """Loads the model once and replicates it over the mesh (every device)."""
        if not self._device:
            from flax import nnx

            from chartjax import mesh as mesh_lib
            from chartjax.interop import formats

            mesh = mesh_lib.make_mesh((-1, 1))
            graphdef, state = nnx.split(formats.load(self.loc, self.config))
            self._device.update(
                mesh=mesh,
                rules=mesh_lib.axis_rules("data_parallel"),
                graphdef=graphdef,
                state=_replicated(state, mesh),
            )
        return self._device

    @property
    def devices(self) -> int:
        return self.place()["mesh"].devices.size

    def step(self, batch: dict):
        """Dispatches one global batch (host arrays with `_mask`, `_cut`); returns (outputs,
        mask, cut), replicated. Compiled once per model structure, batch shape and settings."""
        from chartjax import mesh as mesh_lib
        from chartjax.data import pipeline

        d = self.place()
        if self.featurizer.run is not None:  # a step of its own (PaliGemma's decoding)
            from flax import nnx

            from chartjax.inference.paligemma_features import global_batch

            batch = global_batch(batch)
            with mesh_lib.activate(d["mesh"], d["rules"]):
                out = self.featurizer.run(nnx.merge(d["graphdef"], d["state"]), batch)
            return out, batch["_mask"], batch["_cut"]
        step = _step_fn(self.featurizer.forward, d["mesh"])
        with mesh_lib.activate(d["mesh"], d["rules"]):
            return step(d["graphdef"], d["state"], pipeline.to_global(batch, d["mesh"], d["rules"]))

    def predict(self, examples: list[Example], batch_size: int = 8) -> list[tuple[object, dict]]:
        """(prediction, extra row fields) per example, `batch_size` at a time; each batch is
        padded to a multiple of the device count, as chartjax-infer pads its last one."""
        size = -(-batch_size // self.devices) * self.devices
        results = []
        for k in range(0, len(examples), size):
            exs = examples[k : k + size]
            feats = [self.featurize(ex) for ex in exs]
            pad = size - len(feats)
            batch = {
                key: np.stack([f[key] for f, _ in feats] + [feats[0][0][key]] * pad)
                for key in feats[0][0]
            }
            batch["_mask"] = np.array([True] * len(feats) + [False] * pad)
            batch["_cut"] = np.array([cut for _, cut in feats] + [False] * pad)
            out, _, _ = self.step(batch)
            results += self.outputs(exs, np.asarray(out)[: len(exs)])
        return results

    def __repr__(self) -> str:
        return (
            f"Engine(task={self.spec.name!r}, family={type(self.config).__name__}, "
            f"path={self.loc.path!r})"
        )
