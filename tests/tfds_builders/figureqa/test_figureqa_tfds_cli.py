"""The real `tfds build` command line on the FigureQA builder folder, read back with TFDS.

Builds in array_record, the format the input pipeline reads (DESIGN.md §4); the default
(tfrecord) is covered in-process by tfds_builders/figureqa/figureqa_test.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tensorflow_datasets as tfds

REPO = Path(__file__).resolve().parents[3]
BUILDER_DIR = REPO / "tfds_builders" / "figureqa"


def test_tfds_build_cli_array_record(tmp_path):
    tfds_cli = Path(sys.executable).parent / "tfds"  # the venv's console script
    cmd = [
        str(tfds_cli),
        "build",
        "tfds_builders/figureqa",
        f"--manual_dir={BUILDER_DIR / 'dummy_data'}",
        f"--data_dir={tmp_path}",
        "--file_format=array_record",
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]

    data_dir = tmp_path / "figureqa" / "1.0.0"
    assert sorted(p.name for p in data_dir.glob("*.array_record*")) == [
        "figureqa-no_annot_test1.array_record-00000-of-00001",
        "figureqa-train1.array_record-00000-of-00001",
        "figureqa-validation1.array_record-00000-of-00001",
    ]
    builder = tfds.builder_from_directory(str(data_dir))
    assert builder.info.file_format == tfds.core.FileFormat.ARRAY_RECORD
    assert {name: s.num_examples for name, s in builder.info.splits.items()} == {
        "train1": 5,
        "validation1": 2,
        "no_annot_test1": 3,
    }
    # tfds 4.9.10 reads array_record only by random access: `as_dataset` raises
    # NotImplementedError for this format, so the tf.data path needs tfrecord or a data source.
    source = builder.as_data_source(split="train1")
    assert len(source) == 5
    assert sorted(source[i]["id"].decode() for i in range(5)) == [
        "0/0",
        "0/1",
        "0/2",
        "1/3",
        "1/4",
    ]
    test_source = builder.as_data_source(split="no_annot_test1")
    test = [test_source[i] for i in range(len(test_source))]
    assert sorted(int(ex["answer"]) for ex in test) == [-1, -1, -1]
    assert {ex["figure_type"] for ex in test} == {b"unknown"}
    assert test[0]["image"].shape == (8, 12, 3)
