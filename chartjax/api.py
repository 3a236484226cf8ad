"""`chartjax.load`: a checkpoint as a Python object that predicts, for notebooks.

    import chartjax
    model = chartjax.load("runs/deplot")       # a run workdir, or a T5X / HF / chartjax checkpoint
    tables = model.predict(["a.png", "b.png"])  # DePlot: one pandas DataFrame per chart
    answer = chartjax.load("matcha_chartqa", task="chartqa").predict({"image": img, "question": q})

A model predicts as `chartjax-infer` does, through the same public engine
(chartjax/inference/engine.py): the checkpoint located, loaded and featurized there, with the
task's prompts (chartjax/tasks/catalog.py) and the checkpoint's own settings (its run's
config.gin, an HF export's preprocessor_config.json) unless others are given. So `predict_rows`
gives the rows of predictions.jsonl (without its files), and `predict` each row's value after the
task's post-processing: DePlot's table as a pandas DataFrame (its title in `.attrs["title"]`;
without pandas the `{"title", "header", "rows"}` of the row), a classifier's `{"label",
"scores"}`, else the text.

Inputs: an image (a file path, PNG/JPEG bytes, a PIL image or a uint8 array) or a text, or a dict
of fields (`"image"` plus those the prompt template names, e.g. `{"image": ..., "question": ...}`
for ChartQA; an optional `"id"`); a list of them gives a list of outputs.
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Sequence

import numpy as np

from chartjax.inference.settings import DEFAULTS, Settings


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
      T5 / BART, for an image model the task of the run that trained it (DePlot, ChartCheck;
      FigureQA's baselines answer "yes" / "no"), for a PaliGemma without one `chartqa` (the
      question is the prompt), else it must be given (deplot, chartqa, chartcheck, caption,
      summary).
    vocab: the tokenizer (a SentencePiece model or a directory of tokenizer files); default: the
      checkpoint's own, or the one its run's config.gin names.
    dtype: "float32", "bfloat16", or "auto" (bfloat16 on GPU/TPU, float32 on CPU).
    Errors (a missing file, a task the model cannot run) are ValueError / OSError naming it.
    """
    from chartjax.inference.engine import Engine

    engine = Engine.from_checkpoint(
        path, task=task, format=format, vocab=vocab, settings=Settings(dtype=dtype)
    )
    engine.place()  # loaded now: a damaged checkpoint fails here, not at the first predict
    return Model(engine)


class Model:
    """A loaded checkpoint with its task (see the module docstring); build it with `load`."""

    def __init__(self, engine):
        self.engine = engine
        self._engines = {(): engine}

    @property
    def task(self) -> str:
        return self.engine.spec.name

    @property
    def spec(self):
        return self.engine.spec

    @property
    def config(self):
        return self.engine.config

    @property
    def settings(self) -> dict:
        """The featurization and decoding settings `predict` uses by default."""
        return dict(self.engine.settings.values)

    def __repr__(self) -> str:
        return (
            f"chartjax.Model(task={self.task!r}, family={type(self.config).__name__}, "
            f"path={self.engine.loc.path!r})"
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
        max_input_len, and PaliGemma's sampling (temperature > 0, top_k, top_p, seed), as
        chartjax-infer's flags (default: the checkpoint's own)."""
        from chartjax.inference import inputs as inputs_lib
        from chartjax.tasks import catalog

        known = sorted(set(DEFAULTS) - {"dtype"})
        unknown = set(settings) - set(known)
        if unknown:
            raise TypeError(f"unknown predict settings {sorted(unknown)}; known: {known}")
        templates = catalog.templates()
        if header is None:
            if template is None and self.spec.default_template is None:
                template = "{text}"  # a text input is the prompt itself
            template = inputs_lib.resolve_template(self.spec, template, templates)
        extra = inputs_lib.Extra(
            pair_template=templates.get(pair_template, pair_template),
            table_field=table_field,
        )
        batch = inputs if _is_batch(inputs) else [inputs]
        examples = [_example(x, i, self.spec, header, template, extra) for i, x in enumerate(batch)]
        results = self._engine(settings).predict(examples, batch_size)
        return [_row(self.spec, ex, *result) for ex, result in zip(examples, results)]

    def _engine(self, settings: dict):
        """The engine with these settings over the checkpoint's own (one per settings, the
        loaded model shared); an override of the checkpoint's own value warns once."""
        key = tuple(sorted(settings.items()))
        if key not in self._engines:
            engine = self.engine.with_settings(Settings.of(settings))
            for note in engine.settings.notes:
                warnings.warn(note.removeprefix("--"), stacklevel=3)
            self._engines[key] = engine
        return self._engines[key]


def _is_batch(inputs) -> bool:
    return isinstance(inputs, Sequence) and not isinstance(inputs, str | bytes)


def _image_bytes(image, where: str) -> bytes:
    """A PIL image or a uint8 array as PNG bytes (lossless: the model sees its pixels); its
    type and size checked first, naming the input (a huge array took 39 s to encode before
    PIL's decompression-bomb check refused it)."""
    from PIL import Image

    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8:
            raise ValueError(
                f"{where}: an image array must be uint8 (H, W[, C]), not {image.dtype}"
            )
        if image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] not in (1, 3, 4)):
            raise ValueError(
                f"{where}: an image array is (H, W) or (H, W, 1|3|4), not {image.shape}"
            )
        if image.size == 0:
            raise ValueError(f"{where}: an empty image array {image.shape}")
        _check_pixels(image.shape[1], image.shape[0], where)
        image = Image.fromarray(image[..., 0] if image.ndim == 3 and image.shape[2] == 1 else image)
    elif isinstance(image, Image.Image):
        _check_pixels(*image.size, where)
    else:
        raise ValueError(
            f"{where}: an image is a file path, PNG/JPEG bytes, a PIL image or a uint8 array, "
            f"not {type(image).__name__}"
        )
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _check_pixels(width: int, height: int, where: str) -> None:
    from PIL import Image

    limit = Image.MAX_IMAGE_PIXELS
    if limit and width * height > limit:
        raise ValueError(
            f"{where}: a {width}x{height} image ({width * height:,} pixels) is over PIL's "
            f"{limit:,}-pixel limit (its decompression-bomb guard); downscale it first"
        )


def _example(x, i: int, spec, header, template: str, extra):
    """Input `x` (the i-th) as chartjax-infer's Example, its prompt as `--images` / `--inputs`
    rows would give it."""
    from chartjax.inference import inputs as infer_inputs

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
        kwargs["image_bytes"] = _image_bytes(image, where)
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
    """chartjax-infer's row (chartjax/inference/engine.py make_row), with DePlot's parsed `table` but no
    files."""
    from chartjax.data import tables
    from chartjax.tasks.core import seq2seq

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
