"""tools/bench/input.py's host-feeding arithmetic: per-core rate and cores per H200."""

import pytest

from chartjax.tools.bench import input as bench_input


def test_feed_rate_cores_per_h200():
    # 0.4 x 989e12 / 3.956e12 = 100 examples/s wanted; 10 examples in 2 CPU s = 5 per core.
    r = bench_input.feed_rate(10, 2.0, 3.956e12)
    assert r["examples_per_cpu_s"] == 5.0
    assert r["h200_examples_per_s_at_40pct_mfu"] == pytest.approx(100.0)
    assert r["cores_per_h200"] == pytest.approx(20.0)
    assert "cores_per_h200" not in bench_input.feed_rate(10, 2.0, None)


def test_pix2struct_base_needs_217_examples_per_s():
    """The issue's figure: Pix2Struct-base at 2048 patches, 128 targets, 40% of 989 TFLOP/s."""
    from chartjax.models import flops
    from chartjax.models.model_configs import Pix2StructConfig
    from chartjax.tools.bench.t5x_load import BASE

    fpe = flops.train_flops_per_example(Pix2StructConfig(**BASE), 2048, 128)["total"]
    need = bench_input.feed_rate(1, 1.0, fpe)["h200_examples_per_s_at_40pct_mfu"]
    assert need == pytest.approx(216.7, abs=0.1)
