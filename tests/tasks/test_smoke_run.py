"""gin_configs/runs/smoke.gin after a recipe makes it a small CPU run: for every training
recipe the schedule accepts the smoke step count (a 20-step run of a recipe used to stop at
`total_steps=20 must exceed warmup_steps=1000`) and the model is tiny; and recipes of three
families (Pix2Struct, T5, the FigureQA RN) train and evaluate through `chartjax-train` on the
builders' dummy data, with only the bindings the recipe leaves to the user (data, vocabulary,
and the model's vocab_size for this tiny vocabulary)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import gin
import pytest

from chartjax import config as config_lib
from chartjax.metrics import prediction_files
from chartjax.tools import train as train_cli
from tests.gin_configs.test_tasks import recipe_kind

SMOKE = "runs/smoke.gin"
TASKS = os.path.join(config_lib.GIN_DIR, "tasks")
TRAINABLE = sorted(
    f[: -len(".gin")]
    for f in os.listdir(TASKS)
    if f.endswith(".gin") and recipe_kind(Path(TASKS) / f) == "train"
)


@pytest.fixture(autouse=True)
def _clean_gin():
    gin.clear_config()
    yield
    gin.clear_config()


@pytest.mark.parametrize("recipe", TRAINABLE)
def test_every_training_recipe_gets_a_short_schedule_and_a_tiny_model(recipe):
    from chartjax import optim

    config_lib.parse_gin([f"tasks/{recipe}.gin", SMOKE])
    assert gin.query_parameter("train.num_train_steps") == 20
    optim.make_optimizer()  # a cosine/linear schedule refuses total_steps <= warmup_steps
    assert (
        gin.query_parameter("schedule.warmup_steps")
        < 20
        <= gin.query_parameter("schedule.total_steps")
    )
    cfg = config_lib._model_config("train")
    width = getattr(cfg, "emb_dim", None) or getattr(cfg, "d_model", None)
    assert width is None or width <= 32, (recipe, cfg)
    assert gin.query_parameter("train.init_format") == "random"


def _vocab_binding(recipe: str) -> str:
    text = open(os.path.join(TASKS, f"{recipe}.gin"), encoding="utf-8").read()
    family = "Pix2StructConfig" if "models/pix2struct.gin" in text else "T5Config"
    return f"{family}.vocab_size = 400"  # the tiny test vocabulary's size (conftest.py)


def _smoke(tmp_path, capsys, recipe, bindings):
    workdir = tmp_path / recipe
    args = [f"--gin_file=tasks/{recipe}.gin", f"--gin_file={SMOKE}", f"--workdir={workdir}"]
    status = train_cli.main(args + [f"--gin_bindings={b}" for b in bindings])
    assert status == 0, capsys.readouterr().err
    assert (workdir / "checkpoints" / "20").is_dir()
    rows = [json.loads(line) for line in (workdir / "train_metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "loss" in r][-1] == 20
    return workdir


@pytest.mark.slow
@pytest.mark.parametrize(
    "recipe", ["chartcheck_matcha_finetune_class", "chartcheck_deplot_flant5_finetune_class"]
)
def test_smoke_run_of_seq2seq_recipes(recipe, tmp_path, capsys, vocab_file, tfds_dir):
    data_dir = tfds_dir("chartcheck")
    tables = tmp_path / "tables.jsonl"
    from chartjax.data import sources

    bdir = sources.tfds_builder_dir("chartcheck", data_dir)
    ids = [
        i
        for s in ("train", "validation")
        for i in sources.TfdsSource("chartcheck", directory=bdir).ids(s)
    ]
    prediction_files.write_jsonl(
        tables, [{"id": i, "prediction": "TITLE | t <0x0A> a | 1"} for i in ids]
    )
    bindings = [
        f"VOCAB = '{vocab_file}'",
        f"DATA_DIR = '{data_dir}'",
        f"TABLES = '{tables}'",
        _vocab_binding(recipe),
    ]
    workdir = _smoke(tmp_path, capsys, recipe, bindings)
    (split_dir,) = (workdir / "eval").iterdir()
    assert split_dir.name == "validation__1"  # validation[:1], shell-safe
    obj = json.loads((split_dir / "step_20" / "metrics.json").read_text())
    assert obj["num_examples"] == 1  # the first chart's claims: one in the dummy data
    # The saved config is loadable as a checkpoint's model config (issue 27 item 2).
    from chartjax.interop import formats

    cfg = formats.read_config(formats.locate(str(workdir)))
    assert cfg.vocab_size == 400 and cfg.num_encoder_layers == 1


@pytest.mark.slow
def test_smoke_run_of_the_relation_network(tmp_path, capsys, tfds_dir):
    data_dir = tfds_dir("figureqa")
    workdir = _smoke(tmp_path, capsys, "figureqa_rn", [f"figureqa_task.data_dir = '{data_dir}'"])
    obj = json.loads((workdir / "eval" / "validation1__1" / "step_20" / "metrics.json").read_text())
    assert obj["num_examples"] == 2  # the questions of the dummy validation1's first figure
