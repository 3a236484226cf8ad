"""tools/bench_step.py must import neither TensorFlow nor gin (it runs on the lent GPU machine,
which has neither): checked in a fresh interpreter, with the config and synthetic batch built."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CODE = """
import sys
from tools import bench_step
import chartjax.models.decoding, chartjax.models.flops, chartjax.models.losses  # noqa
import chartjax.models.pix2struct, chartjax.models.t5, optax  # noqa
a = bench_step._args(["--model", "pix2struct", "--hidden", "32", "--heads", "4", "--patches",
                      "10", "--batch", "2"])
cfg = bench_step._config(a)
b = bench_step._batch(a, cfg)
assert b["encoder_input_tokens"].shape == (2, 10, 2 + 768), b["encoder_input_tokens"].shape
assert b["encoder_input_tokens"][0, :, 0].min() >= 1  # every patch valid (row id > 0)
assert cfg.head_dim == 8 and cfg.dtype == "bfloat16"
bad = [m for m in ("tensorflow", "gin") if m in sys.modules]
assert not bad, bad
print("ok")
"""


def test_bench_step_imports_no_tensorflow_or_gin():
    res = subprocess.run(
        [sys.executable, "-c", CODE],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        timeout=300,
    )
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-2000:]
