"""`chartjax.load`: a checkpoint as a Python object that predicts, for notebooks.

    import chartjax
    model = chartjax.load("runs/deplot")       # a run workdir, or a T5X / HF / chartjax checkpoint
    tables = model.predict(["a.png", "b.png"])  # DePlot: one pandas DataFrame per chart
    answer = chartjax.load("matcha_chartqa", task="chartqa").predict({"image": img, "question": q})

A model predicts as `chartjax-infer` does, through its own parts: the checkpoint is located and
loaded by chartjax/interop/formats.py, examples are featurized and decoded (or classified) by
chartjax/infer.py's engines with the task's prompts (chartjax/tasks/catalog.py), one jitted step
over every local device. So `predict_rows` gives the rows of predictions.jsonl (without its
files), and `predict` each row's value after the task's post-processing: DePlot's table as a
pandas DataFrame (its title in `.attrs["title"]`; without pandas the `{"title", "header", "rows"}`
of the row), a classifier's `{"label", "scores"}`, else the text.

Inputs: an image (a file path, PNG/JPEG bytes, a PIL image or a uint8 array) or a text, or a dict
of fields (`"image"` plus those the prompt template names, e.g. `{"image": ..., "question": ...}`
for ChartQA; an optional `"id"`); a list of them gives a list of outputs.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import types
from collections.abc import Sequence

import numpy as np

# The image task a train run's task implies (its records render this task's prompt).
_RUN_TASKS = {"deplot": "deplot", "chartcheck": "chartcheck"}
# What chartjax-infer's flags default to (chartjax/tools/infer.py), for the engines' settings.
_DEFAULTS = dict(
    max_decode_len=128,
    beam_size=1,
    alpha=0.6,
    header_font_size=36,
    font_path=None,
    max_patches=2048,
    max_input_len=512,
)


def load(
    path: str,
    *,
    task: str | None = None,
    format: str = "auto",
    vocab: str | None = None,
    dtype: str = "auto",
) -> Model:
    """The model at `path`: a T5X, HF or chartjax checkpoint directory, a train run's step
    folder, or its workdir (the latest step); a LoRA run's adapters merged into its weights.

    task: a `chartjax-infer --task` name; default: `classify` for DeBERTa / TAPAS, `text` for
      T5 / BART, for an image model the task of the run that trained it (DePlot, ChartCheck),
      else it must be given (deplot, chartqa, chartcheck, caption, summary).
    vocab: the tokenizer (a SentencePiece model or a directory of tokenizer files); default: the
      checkpoint's own, or the one its run's config.gin names.
    dtype: "float32", "bfloat16", or "auto" (bfloat16 on GPU/TPU, float32 on CPU).
    Errors (a missing file, a task the model cannot run) are ValueError / OSError naming it.
    """
    import jax

    from chartjax import infer
    from chartjax.infer_inputs import InputError
    from chartjax.interop import formats
    from chartjax.tasks import catalog

    loc = formats.locate(os.path.expanduser(str(path)), format)
    if dtype == "auto":
        dtype = "bfloat16" if jax.default_backend() in ("gpu", "tpu") else "float32"
    cfg = formats.read_config(loc, dtype=dtype)
    run = formats.run_inputs(loc)
    spec = catalog.inference(task or _default_task(cfg, run, loc.path))
    infer.check_family(cfg, spec, loc.path)
    vocab = os.path.expanduser(vocab) if vocab is not None else None
    if vocab is not None and not os.path.exists(vocab):
        raise InputError(f"vocabulary file not found: {vocab}")
    vocab = vocab or formats.vocabulary(loc)
    if vocab is None:
        raise InputError(f"{loc.path} carries no tokenizer files: give vocab=")
    defaults = dict(_DEFAULTS)
    if isinstance(run.get("max_patches"), int):  # as the run was trained
        defaults["max_patches"] = run["max_patches"]
    return Model(
        loc=loc,
        config=cfg,
        spec=spec,
        vocab=vocab,
        labels=formats.read_labels(loc),
        allow_unused_ids=infer._allows_unused_ids(loc),  # chartjax-infer's own rule
        defaults=defaults,
        model=formats.load(loc, cfg),
    )


def _default_task(cfg, run: dict, where: str) -> str:
    from chartjax import infer
    from chartjax.infer_inputs import InputError

    kind = infer.model_kind(cfg)
    if kind != "image":
        return "classify" if kind == "labels" else "text"
    task = run.get("task")
    if task in _RUN_TASKS or (task == "chart_info" and run.get("is_vqa")):
        return _RUN_TASKS.get(task, "deplot")  # CHART-Info 6b writes DePlot tables
    raise InputError(
        f"{where} holds an image model whose task is not recorded: give task= (deplot, "
        "chartqa, chartcheck, caption or summary)"
    )


@dataclasses.dataclass(eq=False)
class Model:
    """A loaded checkpoint with its task (see the module docstring); build it with `load`."""

    loc: object
    config: object
    spec: object
    vocab: str
    labels: tuple[str, ...] | None
    allow_unused_ids: bool
    defaults: dict
    model: object
    _engines: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def task(self) -> str:
        return self.spec.name

    def __repr__(self) -> str:
        return (
            f"chartjax.Model(task={self.task!r}, family={type(self.config).__name__}, "
            f"path={self.loc.path!r})"
        )

    def predict(self, inputs, **options):
        """The post-processed prediction of each input (one input: its prediction alone).
        Options as `predict_rows`."""
        rows = self.predict_rows(inputs if _is_batch(inputs) else [inputs], **options)
        outs = [_post_process(self.spec, row) for row in rows]
        return outs if _is_batch(inputs) else outs[0]

    def predict_rows(
        self,
        inputs,
        *,
        header: str | None = None,
        template: str | None = None,
        pair_template: str | None = None,
        table_field: str | None = None,
        batch_size: int = 8,
        **settings,
    ) -> list[dict]:
        """predictions.jsonl's row of each input: `id`, `prediction`, `input` (the prompt,
        shortened), `target` (a dict input's `target` field), and the task's fields (DePlot's
        `table`, a classifier's `scores`).

        header / template / pair_template / table_field: chartjax-infer's prompt flags (a
        literal prompt; a format string over a dict input's fields or a named prompt).
        settings: max_decode_len, beam_size, alpha, max_patches, header_font_size, font_path,
        max_input_len, as chartjax-infer's flags (max_patches defaults to the run's)."""
        from chartjax import infer_inputs
        from chartjax.tasks import catalog

        unknown = set(settings) - set(_DEFAULTS)
        if unknown:
            raise TypeError(
                f"unknown predict settings {sorted(unknown)}; known: {sorted(_DEFAULTS)}"
            )
        templates = catalog.templates()
        if header is None:
            if template is None and self.spec.default_template is None:
                template = "{text}"  # a text input is the prompt itself
            template = infer_inputs.resolve_template(self.spec, template, templates)
        extra = infer_inputs.Extra(
            pair_template=templates.get(pair_template, pair_template),
            table_field=table_field,
        )
        examples = [
            _example(x, i, self.spec, header, template, extra)
            for i, x in enumerate(inputs if _is_batch(inputs) else [inputs])
        ]
        engine = self._engine({**self.defaults, **settings})
        results = []
        for k in range(0, len(examples), batch_size):
            results += self._run(engine, examples[k : k + batch_size], batch_size)
        return [_row(self.spec, ex, *result) for ex, result in zip(examples, results)]

    def _engine(self, settings: dict):
        """chartjax-infer's engine for these settings (its flags), one per settings."""
        from chartjax import infer

        key = tuple(sorted(settings.items()))
        if key not in self._engines:
            args = types.SimpleNamespace(**settings)
            if self.spec.output == "labels":
                engine = infer.classifier_engine(args, self.config, self.vocab, self.labels)
            else:
                engine = infer.decoder_engine(
                    args, self.config, self.spec, self.vocab, allow_unused_ids=self.allow_unused_ids
                )
            self._engines[key] = engine
        return self._engines[key]

    @functools.cached_property
    def _device(self):
        """(mesh, rules, graphdef, replicated state): chartjax-infer's data-parallel layout."""
        from flax import nnx

        from chartjax import infer
        from chartjax import mesh as mesh_lib

        mesh = mesh_lib.make_mesh((-1, 1))
        graphdef, state = nnx.split(self.model)
        state = infer._replicated(state, mesh)  # on every device, as chartjax-infer places it
        return mesh, mesh_lib.axis_rules("data_parallel"), graphdef, state

    def _run(self, engine, examples: list, batch_size: int) -> list:
        """The engine's outputs for `examples` (at most one batch), padded to a whole batch of
        a multiple of the device count, as chartjax-infer pads its last one."""
        from chartjax import infer
        from chartjax import mesh as mesh_lib
        from chartjax.data import pipeline

        mesh, rules, graphdef, state = self._device
        size = -(-batch_size // mesh.devices.size) * mesh.devices.size
        feats = [engine.featurize(ex) for ex in examples]
        pad = size - len(feats)
        batch = {
            key: np.stack([f[key] for f, _ in feats] + [feats[0][0][key]] * pad)
            for key in feats[0][0]
        }
        batch["_mask"] = np.array([True] * len(feats) + [False] * pad)
        batch["_cut"] = np.array([cut for _, cut in feats] + [False] * pad)
        step = infer._step_fn(engine.forward, mesh)  # chartjax-infer's step, compiled once
        with mesh_lib.activate(mesh, rules):
            out, _, _ = step(graphdef, state, pipeline.to_global(batch, mesh, rules))
        return engine.outputs(examples, np.asarray(out)[: len(examples)])


def _is_batch(inputs) -> bool:
    return isinstance(inputs, Sequence) and not isinstance(inputs, str | bytes)


def _image_bytes(image) -> bytes:
    """A PIL image or a uint8 array as PNG bytes (lossless: the model sees its pixels)."""
    from PIL import Image

    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8:
            raise ValueError(f"an image array must be uint8 (H, W[, C]), not {image.dtype}")
        image = Image.fromarray(image)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _example(x, i: int, spec, header, template: str, extra):
    """Input `x` (the i-th) as chartjax-infer's Example, its prompt as `--images` / `--inputs`
    rows would give it."""
    from chartjax import infer_inputs

    where = f"input {i}"
    fields = dict(x) if isinstance(x, dict) else {}
    image = fields.pop("image", None) if isinstance(x, dict) else None
    if not isinstance(x, dict):
        if spec.modality == "image":
            image = x
        else:  # a text is the field `text` of the template (by default the prompt itself)
            fields = {"text": x}
    if spec.modality == "image" and image is None:
        raise infer_inputs.InputError(f"{where}: --task {spec.name} needs an image")
    if header is not None:
        prompt = header
    elif not isinstance(x, dict) and spec.modality == "image":
        if infer_inputs.template_fields(template):
            raise infer_inputs.InputError(
                f"{where}: the prompt template {template!r} needs fields "
                f"{infer_inputs.template_fields(template)}: give a dict with 'image' and them"
            )
        prompt = template
    else:
        prompt = infer_inputs.render_prompt(template, fields, where, spec.field_aliases)
    kwargs = {"image_path": None, "image_bytes": None}
    if isinstance(image, str | os.PathLike):
        kwargs["image_path"] = os.fspath(image)
    elif isinstance(image, bytes):
        kwargs["image_bytes"] = image
    elif image is not None:
        kwargs["image_bytes"] = _image_bytes(image)
    target = fields.get("target")
    return infer_inputs.Example(
        id=str(fields.get("id", i)),
        prompt=prompt,
        source=kwargs["image_path"] or where,
        target=None if target is None else infer_inputs.field_text(target),
        **kwargs,
        **extra.of(fields, where, spec.field_aliases),
    )


def _row(spec, ex, prediction, extra: dict) -> dict:
    """chartjax-infer's row (chartjax/infer.py make_row), with DePlot's parsed `table` but no
    files."""
    from chartjax.data import tables
    from chartjax.tasks import seq2seq

    row = {"id": ex.id, "prediction": prediction, "input": ex.prompt[: seq2seq.INPUT_CHARS]}
    row.update(extra)
    if ex.target is not None:
        row["target"] = ex.target
    if spec.name == "deplot":
        table = tables.parse(prediction)
        row["table"] = {
            "title": table.title,
            "header": list(table.header),
            "rows": [list(r) for r in table.rows],
        }
    return row


def _post_process(spec, row: dict):
    """A row's value: DePlot's table (a DataFrame, its short rows padded with empty cells),
    a classifier's label and scores, else the text."""
    if spec.output == "labels":
        return {"label": row["prediction"], "scores": row["scores"]}
    if "table" not in row:
        return row["prediction"]
    table = row["table"]
    try:
        import pandas as pd
    except ImportError:
        return table
    width = max([len(table["header"]), *map(len, table["rows"])])
    header = table["header"] + [""] * (width - len(table["header"]))
    frame = pd.DataFrame([r + [""] * (width - len(r)) for r in table["rows"]], columns=header)
    frame.attrs["title"] = table["title"]
    return frame
