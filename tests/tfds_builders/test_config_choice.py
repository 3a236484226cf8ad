"""`tfds build` of CHART-Info without `--config` (issue 44 item 15): tfds built every config
from the one --manual_dir, `synthetic_2019` and then a 200-line traceback on `pmc_2020`; now one
line naming the configs, status 2, nothing built. Run from outside the repository through the
installed builders' folder, as docs/builds.md says to."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tfds_builders
from tfds_builders.common import config_choice

BUILDERS = Path(os.path.dirname(tfds_builders.__file__))  # docs/builds.md's way to find them


@pytest.mark.slow
def test_tfds_build_without_config_is_one_line_naming_the_configs(tmp_path):
    tfds_cli = Path(sys.executable).parent / "tfds"  # the venv's console script
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    cmd = [
        str(tfds_cli),
        "build",
        str(BUILDERS / "chart_info"),
        f"--manual_dir={BUILDERS / 'chart_info' / 'dummy_data' / 'synthetic_2019'}",
        f"--data_dir={tmp_path / 'tfds'}",
    ]
    proc = subprocess.run(cmd, cwd=outside, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "tfds build: error: chart_info has configs synthetic_2019, pmc_2020, one per release "
        "layout, and --manual_dir holds one: pick it with --config=synthetic_2019 or "
        "--config=pmc_2020"
    )
    assert not (tmp_path / "tfds" / "chart_info").exists()


def test_outside_tfds_build_nothing_is_refused(tmp_path):
    from tfds_builders.chart_info.chart_info import Builder

    assert not config_choice.building_every_config()
    assert Builder(config="pmc_2020", data_dir=str(tmp_path)).builder_config.name == "pmc_2020"
