"""The FigureQA "CNN+LSTM on VGG-16 features" recipe (figureqa_cnn_lstm_vgg16) trains 2 steps on
the builder's dummy data with a reduced-width VGG-16 notop .h5 in the real file's layout and
writes a valid metrics.json; the recipe itself holds the paper's sizes and asks for the weights."""

import json

import gin
import pytest

from chartjax import config as config_lib
from chartjax import train as train_lib
from chartjax.metrics import report
from tests.interop.vgg16_files import TINY_WIDTHS, random_weights, write_keras_h5

RECIPE = "tasks/figureqa_cnn_lstm_vgg16.gin"
TINY = [
    f"VGG16Config.widths = {TINY_WIDTHS}",
    "VGG16Config.input_hw = (32, 32)",  # the task's 16 px images, resized by the model
    "VGG16Config.head_channels = (4, 4, 4, 4)",
    "VGG16Config.fc_dim = 8",
    "VGG16Config.embed_dim = 8",
    "VGG16Config.lstm_dim = 8",
    "VGG16Config.f_dim = 16",
    "figureqa_task.image_size = 16",
    "figureqa_task.shuffle_buffer = 16",
    "figureqa_task.eval_splits = ('validation1',)",
    "train.progress = False",
    "train.global_batch_size = 8",
    "train.eval_batch_size = 8",
    "train.log_every = 1",
    "train.eval_every = 0",
    "train.num_train_steps = 2",
    "train.checkpoint_every = 2",
    # When runs/figureqa_adam.gin selects on validation2 (absent from the dummy data).
    "BatchEmaSelection.split = 'validation1'",
    "BatchEmaSelection.final_split = 'validation1'",
    "BatchEmaSelection.start = 1",
    "BatchEmaSelection.batch_size = 8",
]


@pytest.mark.slow
def test_two_steps_then_metrics_json(tmp_path, tfds_dir):
    weights = tmp_path / "vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5"
    write_keras_h5(weights, random_weights())
    gin.clear_config()
    config_lib.parse_gin(
        [RECIPE],
        TINY
        + [f"figureqa_task.data_dir = '{tfds_dir('figureqa')}'", f"VGG16_WEIGHTS = '{weights}'"],
    )
    try:
        out = train_lib.train(str(tmp_path / "run"))
    finally:
        gin.clear_config()
    assert out["step"] == 2 and out["stop_reason"] == "done"
    obj = json.loads((tmp_path / "run/eval/validation1/step_2/metrics.json").read_text())
    report.validate_metrics(obj)
    assert obj["task"] == "figureqa" and obj["num_examples"] == 2 and obj["step"] == 2
    assert 0.0 <= obj["metrics"]["accuracy"] <= 1.0
    rows = (tmp_path / "run/train_metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["step"] for r in rows] == [1, 2]


def test_recipe_holds_the_paper_setup():
    gin.clear_config()
    config_lib.parse_gin([RECIPE], ["VGG16_WEIGHTS = '/w.h5'"])
    try:
        q = gin.query_parameter
        assert q("train.global_batch_size") == 64  # [paper]
        assert q("make_optimizer.lr") == 2.5e-4 and q("make_optimizer.name") == "adam"
        assert q("VGG16Config.input_hw") == (320, 480)  # pool5 10 x 15
        assert q("VGG16Config.head_channels") == (128, 128, 64, 64)
        assert q("VGG16Config.fc_dim") == 512 and q("VGG16Config.f_dim") == 512
        assert q("VGG16Config.lstm_dim") == 256 and q("VGG16Config.embed_dim") == 32
        assert q("figureqa_task.train_pad") == 0
        # The task already gives the model 320 x 480 (no resize inside the model).
        assert (q("figureqa_task.image_height"), q("figureqa_task.image_size")) == (320, 480)
    finally:
        gin.clear_config()
    # Without the weights file the model is refused by name.
    config_lib.parse_gin([RECIPE], [])
    try:
        with pytest.raises(ValueError, match=r"weights_path is required .*VGG16_WEIGHTS="):
            gin.query_parameter("train.model_fn").scoped_configurable_fn(rngs=None)
    finally:
        gin.clear_config()
