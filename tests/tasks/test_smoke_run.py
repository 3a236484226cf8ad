"""gin_configs/runs/smoke.gin after a recipe makes it a small CPU run: for every training
recipe the schedule accepts the smoke step count (a 20-step run of a recipe used to stop at
`total_steps=20 must exceed warmup_steps=1000`) and the model is tiny; and one recipe (the
FigureQA RN) trains and evaluates through `chartjax-train` on the builder's dummy data with
only the binding the recipe leaves to the user (its data). The Pix2Struct and T5 ChartCheck
recipes this file also ran end to end are run once, by tests/tasks/test_chartcheck.py (one run
per model family x task kind); their saved config read back as a model config:
tests/interop/test_chartjax_ckpt.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import gin
import pytest

from chartjax import config as config_lib
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
    if cfg is None and gin.query_parameter("train.model_fn").selector.endswith("build_model"):
        # _model_config says None for any error: the model config itself must build here, only
        # an HF-config recipe (its architecture read from the checkpoint) may lack one.
        try:
            gin.query_parameter("build_model.config").scoped_configurable_fn()
        except FileNotFoundError:
            pass
    width = getattr(cfg, "emb_dim", None) or getattr(cfg, "d_model", None)
    assert width is None or width <= 32, (recipe, cfg)
    assert gin.query_parameter("train.init_format") == "random"


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
def test_smoke_run_of_the_relation_network(tmp_path, capsys, tfds_dir):
    data_dir = tfds_dir("figureqa")
    workdir = _smoke(tmp_path, capsys, "figureqa_rn", [f"figureqa_task.data_dir = '{data_dir}'"])
    obj = json.loads((workdir / "eval" / "validation1__1" / "step_20" / "metrics.json").read_text())
    assert obj["num_examples"] == 2  # the questions of the dummy validation1's first figure
