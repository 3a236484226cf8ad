"""Fine-tuning starts from official weights: 2 train steps from a tiny T5X checkpoint."""

import json

import gin
import jax
import numpy as np
import pytest

from chartjax import config as config_lib
from chartjax import train as train_lib
from chartjax.data import pipeline
from chartjax.interop import t5x
from chartjax.models import losses, t5, tiny
from chartjax.tasks.smoke import seq2seq_synthetic

# One layer each way, here and in the checkpoints below: tracing and compiling are most of a
# tiny run's time.
ONE = dict(num_encoder_layers=1, num_decoder_layers=1)
BINDINGS = [
    "T5Config.dtype = 'float32'",
    "T5Config.num_encoder_layers = 1",
    "T5Config.num_decoder_layers = 1",
    "train.num_train_steps = 2",
    "train.log_every = 1",
    "train.checkpoint_every = 2",
    "train.final_eval = False",
    "train.progress = False",
]


def _run(workdir, extra):
    gin.clear_config()
    config_lib.parse_gin(["tasks/t5_synthetic_smoke.gin"], BINDINGS + extra)
    try:
        train_lib.train(str(workdir))
    finally:
        gin.clear_config()
    rows = [json.loads(x) for x in (workdir / "train_metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in rows}


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """4 steps from a random init: the Adafactor resume's reference and, at step 1, the loss a
    random init gives."""
    workdir = tmp_path_factory.mktemp("init_checkpoint") / "straight"
    losses_by_step = _run(workdir, ["train.num_train_steps = 4"])
    return workdir, losses_by_step


@pytest.mark.parametrize("layout", ["kvstore"])
@pytest.mark.slow
def test_two_steps_from_tiny_t5x_checkpoint(tmp_path, layout, straight):
    model = t5.build(tiny.tiny_t5(**ONE), 7)
    ckpt = tmp_path / "checkpoint_1000"
    t5x.save(model, str(ckpt), step=1000)
    # The loss the checkpoint's weights give on the run's first global batch.
    task = seq2seq_synthetic.make_task(modality="text")
    batch = jax.tree.map(np.asarray, next(pipeline.train_batches(task, 16, 0, 0, 0, 1)))
    expected, _ = losses.seq2seq_loss(model, batch, deterministic=True)

    fine = _run(tmp_path / "finetune", ["include 'init/t5x.gin'", f"INIT_PATH = '{ckpt}'"])
    _, scratch = straight  # the same run from a random init (step 1: before any update)
    assert sorted(fine) == [1, 2]
    np.testing.assert_allclose(fine[1], float(expected), rtol=1e-5)
    assert abs(scratch[1] - fine[1]) > 1e-3  # a random init would not give that loss


def test_init_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="init checkpoint"):
        _run(tmp_path / "x", ["include 'init/t5x.gin'", f"INIT_PATH = '{tmp_path}/nope'"])


@pytest.mark.slow
def test_zero_shot_evaluation_of_the_init_weights(tmp_path):
    """No training run: `evaluate` scores the T5X weights as they are, at step 0."""
    from chartjax import evaluate as eval_lib

    model = t5.build(tiny.tiny_t5(**ONE), 7)
    ckpt = tmp_path / "checkpoint_1000"
    t5x.save(model, str(ckpt), step=1000)
    task = seq2seq_synthetic.make_task(modality="text")
    batch = next(pipeline.eval_batches(task, "validation", 32, 0, 1))
    logits = model({k: batch[k] for k in task.model_inputs}, deterministic=True)
    expected = task.evaluate(np.argmax(np.asarray(logits), -1), batch, "validation").scores.metrics

    gin.clear_config()
    config_lib.parse_gin(
        ["tasks/t5_synthetic_smoke.gin"],
        [
            *BINDINGS[:3],  # float32, the checkpoint's layers
            "evaluate.eval_batch_size = 32",
            "include 'init/t5x.gin'",
            f"INIT_PATH = '{ckpt}'",
        ],
    )
    try:
        out = eval_lib.evaluate(str(tmp_path / "zero"))["validation"]
    finally:
        gin.clear_config()
    assert out["metrics"] == pytest.approx(expected, abs=1e-6)
    obj = json.loads(
        (tmp_path / "zero" / "eval" / "validation" / "step_0" / "metrics.json").read_text()
    )
    assert obj["step"] == 0 and obj["provenance"]["checkpoint"] == f"t5x:{ckpt}"


@pytest.mark.slow
def test_evaluate_without_checkpoint_or_init_fails(tmp_path):
    from chartjax import evaluate as eval_lib

    gin.clear_config()
    config_lib.parse_gin(["tasks/t5_synthetic_smoke.gin"], ["T5Config.dtype = 'float32'"])
    try:
        with pytest.raises(config_lib.ConfigError, match="no checkpoint .* no pretrained init"):
            eval_lib.evaluate(str(tmp_path / "empty"))
    finally:
        gin.clear_config()


@pytest.mark.slow
def test_adafactor_run_resumes_to_the_same_parameters(tmp_path, straight):
    """2 + 2 steps with a restart equal 4 straight steps under Adafactor (whose optimizer state
    holds optax's EmptyState nodes, which the shardings tree must keep as nodes)."""
    from chartjax import checkpoint as ckpt_lib

    def run(workdir, steps):
        _run(workdir, [f"train.num_train_steps = {steps}"])

    run(tmp_path / "resumed", 2)
    run(tmp_path / "resumed", 4)
    a = ckpt_lib.restore_params_only(str(tmp_path / "resumed" / "checkpoints" / "4"))
    b = ckpt_lib.restore_params_only(str(straight[0] / "checkpoints" / "4"))
    jax.tree.map(np.testing.assert_array_equal, a, b)
