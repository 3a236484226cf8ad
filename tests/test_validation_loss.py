"""train.best_metric = "loss": every evaluation also computes the teacher-forced loss per target
token over the split (padding rows count nothing), writes it to metrics.json, and <workdir>/best
keeps the step where it was lowest (the MatCha fine-tuning recipes select as their authors)."""

import json
import logging

import gin
import jax
import numpy as np
import optax
import pytest

from chartjax import checkpoint as ckpt_lib
from chartjax import config as config_lib
from chartjax import mesh as mesh_lib
from chartjax import state as state_lib
from chartjax import train as train_lib
from chartjax.data import loader
from chartjax.models import losses
from chartjax.tasks import catalog

BINDINGS = [
    "T5Config.dtype = 'float32'",
    "T5Config.num_encoder_layers = 1",  # tracing and compiling are most of a tiny run's time
    "T5Config.num_decoder_layers = 1",
    "train.num_train_steps = 6",
    "train.log_every = 2",
    "train.checkpoint_every = 2",
    "train.eval_every = 2",
    "train.best_metric = 'loss'",
    "train.keep_checkpoints = 5",
    "train.progress = False",
    "train.eval_batch_size = 8",
    "synthetic_seq2seq_task.num_eval = 10",  # 8 + 2 real rows and 6 padding rows
]


@pytest.mark.slow
def test_validation_loss_is_logged_and_chooses_the_lowest_step(tmp_path):
    workdir = tmp_path / "run"
    gin.clear_config()
    config_lib.parse_gin(["tasks/t5_synthetic_smoke.gin"], BINDINGS)
    try:
        train_lib.train(str(workdir))
        model_fn = gin.query_parameter("train.model_fn").scoped_configurable_fn
        task = catalog.get_task("synthetic_seq2seq")
        # The same numbers from the restored weights, over the 10 examples unpadded.
        spec, _ = state_lib.create(
            model_fn, optax.identity(), _mesh(), mesh_lib.axis_rules("data_parallel"), 0
        )
        examples = list(task.source.eval_examples("validation", process_index=0, process_count=1))
        batch = loader.batch_of(task.features(False), examples)
        losses_by_step = {}
        for step in (2, 4, 6):
            metrics = json.loads(
                (workdir / "eval" / "validation" / f"step_{step}" / "metrics.json").read_text()
            )["metrics"]
            losses_by_step[step] = metrics["loss"]
            state = ckpt_lib.restore_for_prediction(str(workdir / "checkpoints" / str(step)), spec)
            model = spec.model_def.merge(state["params"], state["model_state"])
            mean, aux = losses.seq2seq_loss(model, batch, deterministic=True)
            np.testing.assert_allclose(metrics["loss"], float(mean), rtol=1e-5)
            assert float(aux["num_tokens"]) > 10
    finally:
        gin.clear_config()
    assert len(set(losses_by_step.values())) == 3
    best = min(losses_by_step, key=losses_by_step.get)
    assert sorted(int(p.name) for p in (workdir / "best").iterdir() if p.name.isdigit()) == [best]


def _mesh():
    return mesh_lib.make_mesh((1, 1), devices=jax.devices()[:1])


@pytest.mark.slow
def test_a_best_metric_the_split_does_not_give_is_said_not_silent(tmp_path):
    gin.clear_config()
    config_lib.parse_gin(
        ["tasks/t5_synthetic_smoke.gin"],
        BINDINGS[:3]
        + [
            "train.num_train_steps = 2",
            "train.eval_every = 2",
            "train.checkpoint_every = 2",
            "train.best_metric = 'bleu'",
            "train.progress = False",
            "synthetic_seq2seq_task.num_eval = 8",
        ],
    )
    said = []

    class Keep(logging.Handler):  # the chartjax logger does not propagate to pytest's
        def emit(self, record):
            if "train.best_metric" in record.getMessage():
                said.append(record.getMessage())

    handler = Keep(logging.WARNING)
    logging.getLogger("chartjax").addHandler(handler)
    try:
        train_lib.train(str(tmp_path / "run"))
    finally:
        logging.getLogger("chartjax").removeHandler(handler)
        gin.clear_config()
    assert said and "validation gave no such metric (it gave " in said[0], said
    assert "no best checkpoint is kept" in said[0]


def test_validation_loss_of_a_task_without_targets_is_refused_before_the_model(tmp_path):
    from chartjax.config_checks import ConfigError

    gin.clear_config()
    config_lib.parse_gin(["tasks/synthetic_rn.gin"], ["train.best_metric = 'loss'"])
    try:
        with pytest.raises(ConfigError, match="synthetic is not a text-to-text task"):
            train_lib.train(str(tmp_path / "run"))
    finally:
        gin.clear_config()
    assert not (tmp_path / "run").exists()
