"""ChartCheck's table-based classifiers (Akhtar et al., arXiv 2311.07453, Table 3: rows
DePlot-DeBERTa-class and DePlot-TAPAS-class): an encoder classifier reads the claim with the
table DePlot extracted from the chart, and predicts TRUE or FALSE.

Inputs are those of the authors' scripts (`mubasharaak/ChartCheck`):
  deberta  `table_based_classification.py`: `tokenizer(claim, table, truncation=True,
           max_length=1024)`, the table being `str(f.readlines())` of DePlot's table file
           (chartcheck `table_format="official"`, e.g. "['TITLE | \\n', ' a | 1']"), cut
           longest-first. `with_caption=True` gives `table + ". " + caption` as the second text:
           the paper says the caption is part of the input, and every version of the script
           that reads the official splits does so (f3c9343, 2023-06-06, line 63, to its last,
           ebcb007; 3 epochs); its versions of 2023-05-10/11 (4ad4d52: 15 epochs; de6707f: 3)
           feed the claim and the table only and train on a random split of another file. The
           function's default is without (TAPAS has no second text); the DePlot-DeBERTa recipe
           binds True.
  tapas    `table_based_classification_tapas.py`: `TapasTokenizer(table=DataFrame, queries=
           [claim], padding="max_length", truncation=True)` (rows dropped to fit the tokenizer's
           512 tokens); the DataFrame is DePlot's table file read as they read it (title line
           dropped, then header and rows split on " | ", short rows padded with "";
           chartjax/data/classifier_inputs.py `table_frame`).
Labels: TRUE -> 0, FALSE -> 1 (their LABEL_DICT), `label_ids` to change it. DeBERTa keeps the
3-way head of its NLI checkpoint, so its third class ("NEI" in the authors' outputs) is a wrong
prediction for either gold label, as in their micro-F1 (= accuracy).

`tables_file` is the predictions.jsonl of `chartjax-infer --task deplot --tfds chartcheck:<split>`
over the splits the run reads (ids as the builder's), as for the DePlot -> Flan-T5 rows.

Scoring as the other ChartCheck rows: accuracy / macro-F1 over TRUE/FALSE, `num_unparseable`
(third-class predictions), breakdowns by chart type and reasoning type. Prediction rows carry
`prediction` (TRUE / FALSE / NEI), `label` (TRUE / FALSE / None, what the
flan_explain_pred recipe reads as LABELS), `gold_label` and `scores` (the logits).
"""

from __future__ import annotations

import json
import logging

import gin
import numpy as np

from chartjax.data import sources
from chartjax.data.sources import as_python
from chartjax.metrics import chartcheck as cc_metrics
from chartjax.metrics import prediction_files
from chartjax.tasks import chartcheck
from chartjax.tasks.core import text_classification
from chartjax.tasks.core.task import Evaluation, Task

FAMILIES = ("deberta", "tapas")
LABEL_IDS = {"TRUE": 0, "FALSE": 1}
OTHER = "NEI"  # a class index that is neither TRUE's nor FALSE's
INPUT_CHARS = 300


def make_expand(family: str, *, table_for, table_format: str, with_caption: bool, label_ids):
    """expand(example) -> [record]: prompt = the claim; meta holds the second text (DeBERTa) or
    the table (TAPAS), the label and its class index, and the breakdown fields."""

    def expand(ex: dict) -> list[dict]:
        eid = ex["id"]
        label = "TRUE" if int(ex["label"]) == chartcheck.SUPPORTS else "FALSE"
        raw = table_for(eid)
        meta = {
            "label": label,
            "label_id": int(label_ids[label]),
            "chart_type": ex["chart_type"],
            "reasoning_types": list(ex["reasoning_types"]),
        }
        if family == "deberta":
            pair = chartcheck.format_table(raw, table_format)
            meta["pair"] = f"{pair}. {ex['caption']}" if with_caption else pair
        else:
            meta["table"] = raw
        return [{"id": eid, "prompt": ex["claim"], "target": label, "meta": meta}]

    return expand


def make_evaluate(label_ids, provenance=None):
    """evaluate(predictions, host, split); `provenance(split)` adds to the scores' libraries
    (the test set a split holds: chartcheck.test_set_provenance)."""
    names = {int(i): lab for lab, i in label_ids.items()}

    def evaluate(predictions, host, split) -> Evaluation:
        logits = np.asarray(predictions, np.float32)
        pred = [names.get(int(i), OTHER) for i in np.argmax(logits, axis=-1)]
        metas = [json.loads(as_python(m)) for m in host["meta"]]
        scores = cc_metrics.chartcheck_scores(
            pred,
            [m["label"] for m in metas],
            parser="flan_t5",  # "TRUE" / "FALSE" read as themselves, OTHER as unparseable
            chart_types=[m["chart_type"] for m in metas],
            reasoning_types=[m["reasoning_types"] for m in metas],
        )
        if provenance is not None:
            scores.libraries.update(provenance(split))
        rows = []
        for i, p, m, lg, prompt in zip(host["id"], pred, metas, logits, host["prompt"]):
            rows.append(
                {
                    "id": as_python(i),
                    "input": as_python(prompt)[:INPUT_CHARS],
                    "prediction": p,
                    "target": m["label"],
                    "label": p if p in cc_metrics.LABELS else None,
                    "gold_label": m["label"],
                    "scores": [float(x) for x in lg],
                }
            )
        return Evaluation(scores, rows)

    return evaluate


@gin.configurable("chartcheck_classifier_task", module="chartjax.tasks.chartcheck_classifier")
def make_task(
    data_dir: str = "~/tensorflow_datasets",
    *,
    tables_file: str = gin.REQUIRED,
    table_format: str = "official",
    with_caption: bool = False,
    label_ids=None,
    train_split: str = "train",
    eval_splits: tuple[str, ...] = ("validation", "test_one", "test_two"),
    shuffle_buffer: int = 10_000,
    check_files: bool = True,
    features=None,
) -> Task:
    """The ChartCheck classification task (module docstring) for `features.family`'s model.

    `check_files`: `tables_file` must hold every id of the training and eval splits before
    anything runs (a missing id is a KeyError naming the file and the id).
    """
    features = features or text_classification.Features()
    label_ids = dict(label_ids or LABEL_IDS)
    if set(label_ids) != set(cc_metrics.LABELS) or len(set(label_ids.values())) != 2:
        raise ValueError(f"chartcheck_classifier_task: label_ids {label_ids} must map TRUE, FALSE")
    if table_format not in ("official", "text"):
        raise ValueError(f"chartcheck_classifier_task: table_format {table_format!r}")
    if with_caption and features.family != "deberta":
        raise ValueError("chartcheck_classifier_task: with_caption is for the DeBERTa input")
    rows = chartcheck.read_id_rows(tables_file, "tables_file")

    def table_for(eid):
        found = prediction_files.lookup(rows, eid, tables_file, "tables_file")
        return str(found["prediction"])

    source = sources.TfdsSource(
        "chartcheck",
        data_dir,
        train_split=train_split,
        shuffle_buffer=shuffle_buffer,
        expand=make_expand(
            features.family,
            table_for=table_for,
            table_format=table_format,
            with_caption=with_caption,
            label_ids=label_ids,
        ),
        field_keys=chartcheck.FIELD_KEYS,
        image_key=None,
    )
    if check_files:
        chartcheck.check_ids(
            source, sorted({train_split, *eval_splits}), rows, tables_file, "tables_file"
        )
    logging.info(
        "chartcheck_classifier: %s, train %s, eval %s", features.family, train_split, eval_splits
    )
    return Task(
        name="chartcheck",
        source=source,
        features=lambda keep_host: text_classification.features_fn(features, keep_host),
        loss=text_classification.loss,
        predict=text_classification.predict,
        evaluate=make_evaluate(
            label_ids, lambda split: chartcheck.test_set_provenance(source.builder_dir, split)
        ),
        model_inputs=text_classification.MODEL_INPUTS,
        eval_splits=tuple(eval_splits),
    )
