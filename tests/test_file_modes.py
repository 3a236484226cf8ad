"""Results a teammate can read (issue 44 item 5): metrics.json, predictions.jsonl, report.html
(atomic writes through mkstemp), report figures and a converted model.safetensors (written 0600
by safetensors) get the mode the umask gives a new file: 0644 under umask 022, 0640 under 027."""

from __future__ import annotations

import os
import stat

import pytest

from chartjax.metrics import prediction_files, report
from chartjax.models import t5 as t5_lib
from chartjax.models import tiny
from tests.metrics.test_report import _valid


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_results_follow_the_umask(tmp_path, mask, mode):
    from chartjax import report_figures
    from chartjax.interop import hf

    old = os.umask(mask)
    try:
        report.write_metrics(tmp_path / "metrics.json", _valid())
        prediction_files.write_jsonl(
            tmp_path / "predictions.jsonl", [{"id": "a", "prediction": "b"}]
        )
        report.atomic_write_text(tmp_path / "report.html", "<html></html>")
        report_figures._write(str(tmp_path / "figures" / "a.png"), b"\x89PNG")
        hf.save(t5_lib.build(tiny.tiny_t5(vocab_size=32), 0), str(tmp_path / "export"))
    finally:
        os.umask(old)
    written = ["metrics.json", "predictions.jsonl", "report.html", "figures/a.png"]
    written += ["export/model.safetensors", "export/config.json"]
    got = {name: stat.S_IMODE(os.stat(tmp_path / name).st_mode) for name in written}
    assert got == dict.fromkeys(written, mode)
