"""The contract between a benchmark and the generic loops (docs/design.md §3).

A benchmark enters chartjax only through its task module, which builds three things:

* `Task`: what `train` and `evaluate` need. Where examples come from (`source`,
  chartjax/data/sources.py), how one example becomes model features (`features`, a Python
  function run in loader worker processes), the loss and prediction traced inside jit, and
  `evaluate` turning predictions into prediction rows and scores. The batching, padding, sharding and prefetching around it are
  chartjax/data/pipeline.py's, the same for every task.
* `InferenceSpec`: what `chartjax-infer --task NAME` needs to turn user inputs (images, JSONL
  rows, a TFDS split) into model inputs: the modality, the named prompts, the reference field,
  any extra output the task writes next to predictions.jsonl, and whether the model writes text
  or labels.
* `FileScorer`: what `chartjax-score --task NAME` needs to score prediction files (no model, no
  vocabulary, no jax or TensorFlow): the reference rows of a TFDS example and the metric suite.

The task modules register them in chartjax/tasks/catalog.py, the one place that names them all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

import numpy as np

from chartjax.metrics.scores import Scores

Batch = dict[str, Any]


class Source(Protocol):
    """Where a task's examples come from (chartjax/data/sources.py has the implementations).

    train_examples: this process's share of the infinite, shuffled training stream as an
      iterator of raw example dicts, starting at example `start_step * local_batch_size`, so a
      resumed run sees exactly the batches an uninterrupted one would.
    eval_examples: this process's share of a split, once, as an iterable of example dicts.
    """

    def train_examples(
        self,
        *,
        seed: int,
        start_step: int,
        local_batch_size: int,
        process_index: int,
        process_count: int,
    ): ...

    def eval_examples(self, split: str, *, process_index: int, process_count: int): ...


class Evaluation(NamedTuple):
    """A task's reading of its predictions on one split."""

    scores: Scores  # metrics, breakdowns, unavailable metrics, library signatures
    rows: list[dict]  # predictions.jsonl: {"id", "prediction", "target"?, "input"?, ...}


@dataclasses.dataclass(frozen=True)
class SequenceLengths:
    """The token lengths a seq2seq task feeds its model (analytic FLOPs, models/flops.py)."""

    encoder: int
    decoder: int


@dataclasses.dataclass(frozen=True)
class Task:
    """The benchmark-specific half of a training or evaluation run.

    features(keep_host) -> a function from one example of `source` to a dict of model features
      (NumPy arrays; strings for host fields); with keep_host (evaluation) it also keeps the
      host-side fields `evaluate` reads. It runs in loader worker processes
      (chartjax/data/loader.py), so it must survive cloudpickle and read no process state.
    batch_features(keep_host) -> None, or a function applied to each stacked batch after
      `features`, in the training process (FigureQA gathers its figures' cached images there).
    loss(model, batch, train) -> (scalar loss, dict of scalar aux metrics); traced inside jit.
    predict(model, batch) -> per-example predictions; traced inside jit.
    evaluate(predictions, host, split) -> Evaluation, on the host; `host` holds the columns of
      the eval batches that are not model inputs, plus `host_inputs` (padding rows removed).
    model_inputs: the batch keys the model consumes (everything else stays on the host).
    host_inputs: model inputs that `evaluate` also reads (large ones such as images are not
      kept).
    lengths: the sequence lengths of seq2seq tasks (None for the FigureQA baselines); with
      packing, the rows' lengths.
    pack(examples) -> None, or a function from the stream of featurized training examples to
      packed rows (chartjax/data/packing.py); training batches are then rows, in the input
      thread. Evaluation and inference never pack.
    report_view: how report.html shows the task's rows (`html_report.RowView`:
      chartjax/tasks/core/report_views.py), None for the plain view.
    """

    name: str
    source: Source
    features: Callable[[bool], Callable]
    loss: Callable[..., tuple[Any, dict]]
    predict: Callable[..., Any]
    evaluate: Callable[[np.ndarray, Mapping[str, np.ndarray], str], Evaluation]
    model_inputs: tuple[str, ...]
    eval_splits: tuple[str, ...] = ()
    host_inputs: tuple[str, ...] = ()
    lengths: SequenceLengths | None = None
    batch_features: Callable[[bool], Callable] | None = None
    pack: Callable | None = None
    report_view: Any = None


@dataclasses.dataclass(frozen=True)
class InferenceSpec:
    """How `chartjax-infer --task NAME` reads user inputs for one kind of model output.

    modality: "image" (Pix2Struct family: the prompt is rendered above the chart) or "text".
    default_template: the prompt when neither --header nor --template is given: a key of
      `templates` or a format string over the input fields; None means --template is required.
    templates: named prompts `--template NAME` may choose.
    target_field: the TFDS feature holding the reference, when the dataset has it.
    target_text(value, label_names): a TFDS reference value -> the reference text.
    write_outputs(row, out_dir, used): adds task-specific outputs to a prediction row (and
      files under out_dir, e.g. DePlot's tables/<id>.csv); `used` holds the relative paths taken.
    field_aliases: other names an input field may have in users' files.
    output_dirs: the folders under --out that write_outputs fills (DePlot's "tables"): with
      --overwrite, chartjax-infer clears them and predictions.jsonl, nothing else.
    output: "text" (a decoder's output text: Pix2Struct, T5, BART), "labels" (an encoder
      classifier's label name and one logit per label: DeBERTa, TAPAS) or "yes_no" (a FigureQA
      baseline's answer, its two logits and the probability of yes).
    features: a task whose models read its own features (no tokenizer file; the FigureQA
      baselines): the bindings of a run's task factory -> `(encoded image, prompt) ->
      (model inputs, truncated?)`, as the task's evaluation makes them.
    derived: prompt fields computed from an example's input fields (ChartQAPro's lmms-eval
      prompt from its question list, answers, type and paragraph), when a prompt names them.
    """

    name: str
    modality: str
    default_template: str | None = ""
    templates: Mapping[str, str] = dataclasses.field(default_factory=dict)
    target_field: str | None = None
    target_text: Callable[[Any, Any], str] | None = None
    write_outputs: Callable[[dict, str, set], None] | None = None
    field_aliases: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    output_dirs: tuple[str, ...] = ()
    output: str = "text"
    features: Callable[[dict], Callable[[bytes, str], tuple[dict, Any]]] | None = None
    derived: DerivedFields | None = None


@dataclasses.dataclass(frozen=True)
class DerivedFields:
    """Prompt fields an InferenceSpec computes from an example's input fields.

    names: the fields it gives (a template may name them like any input field).
    inputs: the input fields (TFDS features, JSONL keys; the spec's aliases apply) it reads;
      those an example lacks are left out of what `make` gets.
    make(fields) -> {name: text}: from `{input: Python value}`.
    """

    names: tuple[str, ...]
    inputs: tuple[str, ...]
    make: Callable[[dict], dict[str, str]]


@dataclasses.dataclass(frozen=True)
class ScoreInputs:
    """What `chartjax-score` read, handed to a FileScorer.

    predictions / references: `{id: row}` (JSONL scorers) or `{id: parsed JSON}` (JSON folders).
    missing: reference ids without a prediction (only with --allow_missing; scored as wrong).
    options: the flags a scorer may use (compat, images, model-based metric paths).
    """

    predictions: Mapping[str, Any]
    references: Mapping[str, Any]
    missing: frozenset
    options: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class FileScorer:
    """How `chartjax-score --task NAME` scores prediction files.

    layout: "jsonl" (predictions.jsonl against references.jsonl / a TFDS split / the
      predictions' own targets) or "json_dir" (folders of official per-image JSON).
    score(inputs) -> Scores; `inputs.missing` ids (no prediction, or with --lenient one that
      is not of the task's type) must count as wrong in every metric.
    reference_row(tfds_example, split) -> a reference row (`target` + breakdown fields); None
      when references cannot come from TFDS.
    compat: the metric flavours `--compat` may choose for this task (the first is the default).
    check_prediction(value) -> None when a prediction (a JSONL row's `prediction`, or one
      parsed `<id>.json`) is of the task's type, else what is wrong with it, e.g. "prediction is
      a float (1.0); expected 0/1, true/false or a yes/no text".
    """

    name: str
    layout: str
    score: Callable[[ScoreInputs], Scores]
    reference_row: Callable[[dict, str], dict] | None = None
    compat: tuple[str, ...] = ("spec",)
    check_prediction: Callable[[Any], str | None] | None = None

    def invalid_predictions(self, predictions: Mapping[str, Any]) -> dict[str, str]:
        """`{id: what is wrong}` for the predictions that cannot be scored as they are: a JSONL
        row without `prediction`, or a value `check_prediction` refuses."""
        out = {}
        for key, value in predictions.items():
            if self.layout == "jsonl":
                if not isinstance(value, Mapping) or "prediction" not in value:
                    out[key] = "no 'prediction' field"
                    continue
                value = value["prediction"]
            why = self.check_prediction(value) if self.check_prediction else None
            if why:
                out[key] = why
        return out


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def describe(value) -> str:
    """A JSON value's type and a short repr, for messages: "a float (1.0)"."""
    kinds = {bool: "a boolean", int: "an integer", float: "a float", str: "a string"}
    kinds.update({list: "an array", dict: "an object"})
    kind = kinds.get(type(value), "null" if value is None else type(value).__name__)
    return kind if value is None else f"{kind} ({_shown(value)})"


def text_prediction(value) -> str | None:
    """check_prediction of the tasks whose model writes text (tables, summaries, verdicts)."""
    return None if isinstance(value, str) else f"prediction is {describe(value)}; expected a string"


def answer_prediction(value) -> str | None:
    """check_prediction of question answering: a text or a number (not a boolean)."""
    if isinstance(value, str) or (isinstance(value, int | float) and not isinstance(value, bool)):
        return None
    return f"prediction is {describe(value)}; expected a string or a number"
