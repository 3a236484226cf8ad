"""ChartCheck's encoder-classifier rows (chartjax/tasks/chartcheck/classifier.py): the inputs of
the authors' scripts (DeBERTa: claim + str(f.readlines()) of DePlot's table, optionally
+ ". " + caption; TAPAS: the claim as query over the table), TRUE -> 0 / FALSE -> 1, and the
recipes chartcheck_deplot_{deberta,tapas}_class end to end on the builder's dummy data with tiny
HF checkpoints (2 training steps with gradient accumulation, then test_one): a valid
metrics.json with accuracy and the chart-type / reasoning-type breakdowns, prediction rows
whose labels the flan_explain_pred recipe reads as LABELS."""

from __future__ import annotations

import json

import gin
import numpy as np
import pytest

from chartjax import config as config_lib
from chartjax.metrics import prediction_files, report
from chartjax.tasks import chartcheck as cc
from chartjax.tasks.chartcheck import classifier as ccc

EXAMPLE = {
    "id": "test:3",
    "caption": "Market share",
    "claim": "A has the largest share.",
    "label": 0,
    "explanation": "A is 50%.",
    "chart_type": "pie_chart",
    "reasoning_types": ["Compare"],
}
TABLE = "TITLE | Market share <0x0A> A | 50% <0x0A> B | 20%"
SPLIT_SIZES = {"train": 5, "validation": 3, "test_one": 4, "test_two": 3}
RECIPES = {"deberta": "chartcheck_deplot_deberta_class", "tapas": "chartcheck_deplot_tapas_class"}


def test_inputs_and_labels_as_the_authors():
    expand = ccc.make_expand(
        "deberta",
        table_for=lambda i: TABLE,
        table_format="official",
        with_caption=False,
        label_ids=ccc.LABEL_IDS,
    )
    (rec,) = expand(EXAMPLE)
    assert rec["prompt"] == "A has the largest share." and rec["target"] == "FALSE"
    assert rec["meta"]["pair"] == "['TITLE | Market share \\n', ' A | 50% \\n', ' B | 20%']"
    assert rec["meta"]["label_id"] == 1 and rec["meta"]["chart_type"] == "pie_chart"
    with_caption = ccc.make_expand(
        "deberta",
        table_for=lambda i: TABLE,
        table_format="official",
        with_caption=True,
        label_ids=ccc.LABEL_IDS,
    )
    assert with_caption(dict(EXAMPLE, label=1))[0]["meta"]["pair"].endswith("']. Market share")
    tapas = ccc.make_expand(
        "tapas",
        table_for=lambda i: TABLE,
        table_format="official",
        with_caption=False,
        label_ids=ccc.LABEL_IDS,
    )
    (rec,) = tapas(dict(EXAMPLE, label=1))
    assert (
        rec["meta"]["table"] == TABLE and rec["meta"]["label_id"] == 0 and "pair" not in rec["meta"]
    )


def test_evaluate_reads_logits_as_labels():
    evaluate = ccc.make_evaluate(ccc.LABEL_IDS)
    metas = [
        {"label": lab, "chart_type": ct, "reasoning_types": ["Compare"]}
        for lab, ct in [("TRUE", "bar"), ("FALSE", "bar"), ("TRUE", "pie"), ("FALSE", "pie")]
    ]
    host = {
        "id": np.asarray([f"test:{i}".encode() for i in range(4)]),
        "prompt": np.asarray([b"c"] * 4),
        "meta": np.asarray([json.dumps(m).encode() for m in metas]),
    }
    # Class 0 (TRUE), 1 (FALSE), 2 (NEI: wrong whatever the label), 1.
    logits = np.asarray([[2, 0, 0], [0, 2, 0], [0, 0, 2], [0, 2, 1]], np.float32)
    scores, rows = evaluate(logits, host, "test_one")
    assert [r["prediction"] for r in rows] == ["TRUE", "FALSE", "NEI", "FALSE"]
    assert [r["label"] for r in rows] == ["TRUE", "FALSE", None, "FALSE"]
    assert scores.metrics["accuracy"] == 0.75 and scores.metrics["num_unparseable"] == 1
    assert scores.breakdowns["chart_type"]["pie"]["accuracy"] == 0.5
    assert rows[3]["scores"] == [0.0, 2.0, 1.0]
    # The explanation recipe reads these rows' labels (lower case, as in training).
    assert [cc.predicted_label(r) for r in rows] == ["true", "false", "true", "false"]


@pytest.fixture(scope="module")
def data_dir(tfds_dir):
    return tfds_dir("chartcheck")


@pytest.fixture(scope="module")
def tables_file(tmp_path_factory, data_dir):
    from chartjax.data import sources

    bdir = sources.tfds_builder_dir("chartcheck", data_dir)
    ids = [i for s in SPLIT_SIZES for i in sources.TfdsSource("", directory=bdir).ids(s)]
    rows = [
        {"id": i, "prediction": f"TITLE | chart {n} <0x0A> Year | Value <0x0A> 2019 | {n}"}
        for n, i in enumerate(ids)
    ]
    path = str(tmp_path_factory.mktemp("cc_classifier") / "tables.jsonl")
    prediction_files.write_jsonl(path, rows)
    return path


TINY = [
    "hf_model_config.dtype = 'float32'",
    "ClassifierFeatures.max_len = 64",
    "train.global_batch_size = 8",
    "train.eval_batch_size = 8",
    "evaluate.eval_batch_size = 8",
    "train.progress = False",
    "train.num_train_steps = 2",
    "train.eval_every = 0",
    "train.checkpoint_every = 2",
    "train.log_every = 1",
    "train.best_metric = None",
    "chartcheck_classifier_task.shuffle_buffer = 8",
    "chartcheck_classifier_task.eval_splits = ('test_one',)",
]


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(RECIPES))
def test_recipe_end_to_end(family, tmp_path, data_dir, tables_file, tiny_hf_checkpoints):
    from chartjax.train import train

    recipe = RECIPES[family]
    bindings = TINY + [
        f"INIT_PATH = '{tiny_hf_checkpoints[family]}'",
        f"DATA_DIR = '{data_dir}'",
        f"TABLES = '{tables_file}'",
    ]
    gin.clear_config()
    config_lib.parse_gin([f"tasks/{recipe}.gin"], bindings)
    try:
        assert gin.query_parameter("ClassifierFeatures.family") == family
        accumulate = gin.query_parameter("make_optimizer.accumulate_steps")
        out = train(str(tmp_path))
    finally:
        gin.clear_config()
    assert accumulate == {"deberta": 2, "tapas": 4}[family]
    assert out["step"] == 2 and out["stop_reason"] == "done"
    mdir = tmp_path / "eval" / "test_one" / "step_2"
    obj = json.loads((mdir / "metrics.json").read_text())
    rows = prediction_files.read_jsonl(mdir / "predictions.jsonl")
    report.validate_metrics(obj)
    assert (obj["task"], obj["split"], obj["num_examples"]) == ("chartcheck", "test_one", 4)
    assert len(rows) == 4 and {r["gold_label"] for r in rows} <= {"TRUE", "FALSE"}
    right = sum(r["label"] == r["gold_label"] for r in rows)
    assert obj["metrics"]["accuracy"] == pytest.approx(right / 4)
    assert {"chart_type", "reasoning_type", "confusion"} <= set(obj["breakdowns"])
    assert sum(g["n"] for g in obj["breakdowns"]["chart_type"].values()) == 4
    n_labels = 3 if family == "deberta" else 2
    assert all(len(r["scores"]) == n_labels for r in rows)
    assert all(r["input"] for r in rows)
    # The explanation row takes these predictions as LABELS.
    labels = {r["id"]: cc.predicted_label(r) for r in rows}
    assert set(labels.values()) <= {"true", "false"}
    if family == "deberta":  # chartjax-infer reads the run (model, labels, tokenizer from it)
        _infer_the_run(tmp_path, tiny_hf_checkpoints[family])


def _infer_the_run(workdir, hf_dir):
    from chartjax.interop import hf
    from chartjax.tools import infer as infer_cli

    src = workdir / "claims.jsonl"
    src.write_text(json.dumps({"id": "x", "claim": "A is 50%.", "table": "TITLE | t"}) + "\n")
    infer_cli.main(
        [
            *("--task", "classify", "--checkpoint", str(workdir), "--inputs", str(src)),
            *("--template", "{claim}", "--pair_template", "{table}", "--max_input_len", "64"),
            *("--dtype", "float32", "--out", str(workdir / "infer")),
        ]
    )
    (row,) = prediction_files.read_jsonl(workdir / "infer" / "predictions.jsonl")
    assert row["prediction"] in hf.read_labels(hf_dir) and len(row["scores"]) == 3
