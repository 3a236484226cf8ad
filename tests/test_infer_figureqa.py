"""A FigureQA Relation Network run (the demo's recipe, tiny) answers questions through
`chartjax.load` and `chartjax-infer --task figureqa` (issue 44 item 22: refused before as
`@relation_network.build, not a chartjax model`): the same rows from both, the answers
chartjax-eval gave for the same questions, from the features its eval pipeline makes."""

from __future__ import annotations

import json
from pathlib import Path

import gin
import numpy as np
import pytest
import tensorflow_datasets as tfds

import chartjax
from chartjax import config as config_lib
from chartjax import train as train_lib
from chartjax.data import pipeline
from chartjax.inference.engine import Engine
from chartjax.inference.inputs import Example, InputError
from chartjax.metrics import prediction_files
from chartjax.tasks import figureqa
from chartjax.tools import infer as infer_cli
from tests.tasks.test_figureqa import TINY
from tfds_builders.figureqa import figureqa as builder_mod

# Its fixtures build and compile models (or train a run) for every test: the whole file is slow.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
DUMMY = ROOT / "tfds_builders" / "figureqa" / "dummy_data"
SPLITS = ("validation1", "train1")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    d = str(tmp_path_factory.mktemp("tfds"))
    builder_mod.Builder(data_dir=d).download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(DUMMY))
    )
    return d


@pytest.fixture(scope="module")
def run(tmp_path_factory, data_dir) -> Path:
    """`make demo`'s recipe at the FigureQA tests' tiny size, 2 steps, evaluated on both
    dummy splits with labels (7 questions about 3 figures)."""
    workdir = tmp_path_factory.mktemp("rn_run")
    gin.clear_config()
    try:
        config_lib.parse_gin(
            ["tasks/figureqa_demo_rn.gin"],
            TINY
            + [
                f"figureqa_task.data_dir = '{data_dir}'",
                f"figureqa_task.eval_splits = {SPLITS!r}",
                "train.num_train_steps = 2",
                "train.checkpoint_every = 2",
                "train.selection = None",
                "train.max_train_time_s = None",
                "loader_workers.count = 0",
            ],
        )
        train_lib.train(str(workdir))
    finally:
        gin.clear_config()
    return workdir


def _questions(split: str) -> list[dict]:
    """chartjax-infer's JSONL rows of a dummy split: `question_string`, FigureQA's own name."""
    with open(DUMMY / split / "qa_pairs.json") as f:
        pairs = json.load(f)["qa_pairs"]
    # the builder's question ids: <image_index>/<position in qa_pairs.json>
    return [
        {
            "id": f"{q['image_index']}/{i}",
            "image": str(DUMMY / split / "png" / f"{q['image_index']}.png"),
            "question_string": q["question_string"],
        }
        for i, q in enumerate(pairs)
    ]


def _eval_rows(run: Path, split: str) -> dict[str, dict]:
    (path,) = (run / "eval").glob(f"{split}*/step_2/predictions.jsonl")
    return {r["id"]: r for r in prediction_files.read_jsonl(path)}


def test_load_and_infer_answer_as_chartjax_eval(run, tmp_path, capsys):
    model = chartjax.load(str(run))
    assert model.task == "figureqa"  # the run's task, not to be named
    for split in SPLITS:
        rows = _questions(split)
        expected = _eval_rows(run, split)
        assert sorted(expected) == sorted(r["id"] for r in rows)
        got = model.predict_rows(rows)
        assert model.predict(rows) == [r["prediction"] for r in got]
        assert [r["prediction"] for r in got] == [
            expected[r["id"]]["prediction_text"] for r in rows
        ]
        assert [r["input"] for r in got] == [expected[r["id"]]["input"] for r in rows]
        for r in got:
            no, yes = r["scores"]
            assert r["yes_probability"] == pytest.approx(1 / (1 + np.exp(no - yes)))

        inputs = tmp_path / f"{split}.jsonl"
        inputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
        out = tmp_path / f"out_{split}"
        infer_cli.main(
            ["--task", "figureqa", "--checkpoint", str(run), "--inputs", str(inputs)]
            + ["--out", str(out)]
        )
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert summary["examples"] == len(rows) and summary["format"] == "chartjax"
        assert prediction_files.read_jsonl(out / "predictions.jsonl") == got


def test_features_are_the_eval_pipelines(run, data_dir):
    """The engine's inputs are the arrays chartjax-eval fed the model for the same questions
    (the figure cache's image, the task's tokens), with the run's bindings (16 px, antialias)."""
    engine = Engine.from_checkpoint(str(run))
    task = figureqa.make_task(data_dir=data_dir, image_size=16, antialias=True)
    for split in SPLITS:
        (batch,) = pipeline.eval_batches(task, split, 8, 0, 1)
        for row in _questions(split):
            ex = Example(row["id"], row["question_string"], row["image"], row["image"])
            feats, cut = engine.featurize(ex)
            k = [bytes(i).decode() for i in batch["id"]].index(row["id"])
            assert not cut and set(feats) == {"image", "question_tokens", "question_length"}
            for name, value in feats.items():
                np.testing.assert_array_equal(value, np.asarray(batch[name])[k], err_msg=name)


def test_another_task_is_refused_naming_figureqa(run):
    with pytest.raises(InputError, match="holds a yes/no model.*answers with --task figureqa"):
        Engine.from_checkpoint(str(run), task="chartqa")


def test_a_yes_no_run_of_another_task_is_refused():
    """An RN trained on another task (the synthetic smoke task) made its inputs otherwise."""
    from chartjax.inference.features import yes_no_featurizer
    from chartjax.tasks import catalog

    with pytest.raises(InputError, match="trained on task 'synthetic'.*train.task = 'figureqa'"):
        yes_no_featurizer(catalog.inference("figureqa"), {"task": "synthetic"}, "runs/x")
