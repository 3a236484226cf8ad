"""Chart-to-Text's image-captioning row end to end on the dummy data with tiny widths: each
corpus's Barlow Twins recipe trains 2 steps and writes its metrics.json, then its Show, Attend
and Tell recipe starts its encoder from that run (init/barlow_twins_encoder.gin), trains 2 steps
and writes a valid Chart-to-Text metrics.json. With the encoder frozen (Pew) the captioning
run's encoder is exactly the Barlow Twins checkpoint's; fine-tuned (Statista) it moved."""

import json

import gin
import jax
import numpy as np
import pytest

from chartjax import checkpoint
from chartjax import config as config_lib
from chartjax.metrics import prediction_files, report
from chartjax.tasks.chart_to_text import caption as ctc
from tests.tasks.tiny_recipes import RUN_TINY

RESNET_TINY = ["ResNetConfig.depths = (1, 1)", "ResNetConfig.width = 4"]
BT_TINY = [
    "BarlowTwinsConfig.projector = (16, 16)",
    "chart_to_text_barlow_twins_task.image_size = 32",
    "chart_to_text_barlow_twins_task.shuffle_buffer = 8",
]
SAT_TINY = [
    "VOCAB_SIZE = 60",
    "MAX_TARGET_LEN = 16",
    "ShowAttendTellConfig.embed_dim = 8",
    "ShowAttendTellConfig.attention_dim = 8",
    "ShowAttendTellConfig.lstm_dim = 16",
    "chart_to_text_caption_task.image_size = 32",
    "chart_to_text_caption_task.shuffle_buffer = 8",
]


@pytest.fixture(scope="module")
def data_dir(tfds_dir):
    tfds_dir("chart_to_text", "statista")
    return tfds_dir("chart_to_text", "pew")


def _train(recipe, workdir, bindings):
    from chartjax.train import train

    gin.clear_config()
    config_lib.parse_gin([f"tasks/{recipe}.gin"], RESNET_TINY + RUN_TINY + bindings)
    try:
        return train(str(workdir))
    finally:
        gin.clear_config()


def _encoder(step_dir):
    return checkpoint.restore_params_only(str(step_dir))["encoder"]


@pytest.mark.slow
@pytest.mark.parametrize("config", ["statista", "pew"])
def test_barlow_twins_then_captioning(config, tmp_path, data_dir):
    bt_dir, sat_dir = tmp_path / "bt", tmp_path / "sat"
    out = _train(
        f"chart_to_text_{config}_barlow_twins", bt_dir, BT_TINY + [f"DATA_DIR = '{data_dir}'"]
    )
    assert out["step"] == 2 and np.isfinite(out["train"]["loss"])
    mdir = bt_dir / "eval" / "validation" / "step_2"
    obj = json.loads((mdir / "metrics.json").read_text())
    report.validate_metrics(obj)
    assert obj["task"] == "chart_to_text_barlow_twins" and obj["num_examples"] == 1
    m = obj["metrics"]
    # One validation chart: its standardised embeddings are 0, so C = 0 and the loss is D = 16.
    assert m["barlow_twins_loss"] == pytest.approx(16.0)
    assert m["on_diagonal_loss"] == pytest.approx(1.0) and m["off_diagonal_loss"] == 0.0
    (row,) = prediction_files.read_jsonl(mdir / "predictions.jsonl")
    assert row["id"].startswith(f"{config}/") and -1.0 <= row["prediction"] <= 1.0

    frozen = config == "pew"
    init = bt_dir / "checkpoints" / "2"
    out = _train(
        f"chart_to_text_{config}_image_caption",
        sat_dir,
        SAT_TINY
        + [
            f"DATA_DIR = '{data_dir}'",
            f"INIT_PATH = '{init}'",
            f"ShowAttendTellConfig.freeze_encoder = {frozen}",
        ],
    )
    assert out["step"] == 2 and out["stop_reason"] == "done"
    mdir = sat_dir / "eval" / "test" / "step_2"
    obj = json.loads((mdir / "metrics.json").read_text())
    report.validate_metrics(obj)
    rows = prediction_files.read_jsonl(mdir / "predictions.jsonl")
    assert (obj["task"], obj["split"], obj["num_examples"]) == ("chart_to_text", "test", 1)
    for name in ("bleu", "rouge_l", "meteor", "content_selection"):
        assert 0 <= obj["metrics"][name] <= 1
    assert set(obj["unavailable"]) == {"bleurt", "perplexity"}
    assert rows[0]["id"].startswith(f"{config}/") and isinstance(rows[0]["prediction"], str)

    pretrained, tuned = _encoder(init), _encoder(sat_dir / "checkpoints" / "2")
    same = jax.tree.map(lambda a, b: bool(np.array_equal(a, b)), pretrained, tuned)
    assert all(jax.tree.leaves(same)) == frozen


def test_word_vocabulary():
    vocab = ctc.build_vocab(["a b b c", "c b"], size=5)  # b: 3, c: 2, a: 1 -> keeps b, c
    assert vocab.words == ["<pad>", "</s>", "<unk>", "b", "c"]
    ids = vocab.encode_batch(["b a c"], max_len=5)
    np.testing.assert_array_equal(ids, [[3, 2, 4, 1, 0]])
    assert vocab.decode_batch(ids) == ["b <unk> c"]
    assert vocab.decode_batch(np.asarray([[3, 0, 4, 1, 3]])) == ["b c"]  # stops at EOS
