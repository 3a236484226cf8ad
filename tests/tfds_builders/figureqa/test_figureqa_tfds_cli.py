"""The real `tfds build` command line on the FigureQA builder folder, read back with TFDS.

With no `--file_format` the build is array_record, one record per figure (DESIGN.md §8), read by
random access as chartjax's input pipeline reads it (chartjax/data/tfds_records.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow_datasets as tfds

from chartjax.data import tfds_records

REPO = Path(__file__).resolve().parents[3]
BUILDER_DIR = REPO / "tfds_builders" / "figureqa"


@pytest.mark.slow
def test_tfds_build_cli_defaults_to_array_record(tmp_path):
    tfds_cli = Path(sys.executable).parent / "tfds"  # the venv's console script
    cmd = [
        str(tfds_cli),
        "build",
        "tfds_builders/figureqa",
        f"--manual_dir={BUILDER_DIR / 'dummy_data'}",
        f"--data_dir={tmp_path}",
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]

    data_dir = tmp_path / "figureqa" / "2.0.0"
    assert sorted(p.name for p in data_dir.glob("*.array_record*")) == [
        "figureqa-no_annot_test1.array_record-00000-of-00001",
        "figureqa-train1.array_record-00000-of-00001",
        "figureqa-validation1.array_record-00000-of-00001",
    ]
    assert not list(data_dir.rglob("*spill*")) and not list(data_dir.rglob("*.jsonl"))
    builder = tfds.builder_from_directory(str(data_dir))
    assert builder.info.file_format == tfds.core.FileFormat.ARRAY_RECORD
    figures = {name: s.num_examples for name, s in builder.info.splits.items()}
    assert figures == {"train1": 2, "validation1": 1, "no_annot_test1": 2}
    source = builder.as_data_source(split="train1")
    by_figure = {source[i]["id"].decode(): source[i] for i in range(len(source))}
    assert {k: [q.decode() for q in ex["questions"]["id"]] for k, ex in by_figure.items()} == {
        "0": ["0/0", "0/1", "0/2"],
        "1": ["1/3", "1/4"],
    }
    questions = list(tfds_records.split_examples(str(data_dir), "no_annot_test1", ()))
    assert sorted(ex["id"].decode() for ex in questions) == ["0/0", "1/1", "1/2"]
    assert sorted(int(ex["answer"]) for ex in questions) == [-1, -1, -1]
    assert {ex["figure_type"] for ex in questions} == {b"unknown"}
    assert questions[0]["image"].shape == (8, 12, 3)
