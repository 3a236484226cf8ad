"""train.profile_steps writes a profiler trace TensorBoard and Perfetto read; bad windows are
refused before anything is built."""

import glob
import gzip
import json

import gin
import pytest

from chartjax import config as config_lib
from chartjax import train as train_lib
from chartjax.config_checks import ConfigError

BINDINGS = [
    "T5Config.dtype = 'float32'",
    "train.num_train_steps = 4",
    "train.log_every = 1",
    "train.checkpoint_every = 4",
    "train.final_eval = False",
    "train.progress = False",
]


def _run(workdir, extra):
    gin.clear_config()
    config_lib.parse_gin(["tasks/t5_synthetic_smoke.gin"], BINDINGS + extra)
    try:
        return train_lib.train(str(workdir))
    finally:
        gin.clear_config()


def test_profile_steps_write_an_xplane_and_a_perfetto_trace(tmp_path):
    out = _run(tmp_path / "run", ["train.profile_steps = (2, 3)"])
    assert out["step"] == 4
    runs = glob.glob(str(tmp_path / "run/profile/plugins/profile/*"))
    assert len(runs) == 1, runs
    assert glob.glob(f"{runs[0]}/*.xplane.pb")
    with gzip.open(glob.glob(f"{runs[0]}/perfetto_trace.json.gz")[0]) as f:
        trace = json.load(f)
    # The traced window holds the jitted train step's execution.
    names = {e.get("name", "") for e in trace["traceEvents"]}
    assert any("train_step" in n for n in names), sorted(names)[:20]


@pytest.mark.parametrize("window", ["(3, 2)", "(0, 2)", "(1,)", "'2'"])
def test_a_bad_window_is_one_config_error(tmp_path, window):
    with pytest.raises(ConfigError, match=r"train\.profile_steps = .*first, last"):
        _run(tmp_path / "bad", [f"train.profile_steps = {window}"])
    assert not (tmp_path / "bad").exists()
