"""A build is not reused once the files it was made from change (issue 26, item 9)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import tensorflow_datasets as tfds

from tfds_builders.common import input_fingerprint
from tfds_builders.figureqa import figureqa

DUMMY = Path(__file__).resolve().parents[3] / "tfds_builders" / "figureqa" / "dummy_data"


def _build(manual_dir: Path, data_dir: Path, mode=None):
    builder = figureqa.Builder(data_dir=os.fspath(data_dir))
    kwargs = {"download_mode": mode} if mode else {}
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            manual_dir=os.fspath(manual_dir),
            compute_stats=tfds.download.ComputeStatsMode.SKIP,
            **kwargs,
        )
    )
    return builder


def test_a_changed_corpus_is_not_reused_silently(tmp_path):
    corpus = tmp_path / "raw"
    shutil.copytree(DUMMY, corpus)
    builder = _build(corpus, tmp_path / "out")
    stamp = json.loads((Path(builder.data_dir) / input_fingerprint.FINGERPRINT_NAME).read_text())
    assert stamp["files"] == 11 and set(stamp["parts"]) >= {"train1", "validation1"}
    info = Path(builder.data_dir) / "dataset_info.json"
    built_at = info.stat().st_mtime_ns
    _build(corpus, tmp_path / "out")  # unchanged inputs: reused as TFDS does
    assert info.stat().st_mtime_ns == built_at

    qa = corpus / "validation1" / "qa_pairs.json"
    doc = json.loads(qa.read_text())
    doc["qa_pairs"][0]["answer"] = 1 - doc["qa_pairs"][0]["answer"]  # a corrected answer
    qa.write_text(json.dumps(doc))
    with pytest.raises(input_fingerprint.InputsChangedError) as err:
        _build(corpus, tmp_path / "out")
    message = str(err.value)
    assert "changed: validation1" in message and "--overwrite" in message
    assert info.stat().st_mtime_ns == built_at  # the old build is left as it was

    rebuilt = _build(corpus, tmp_path / "out", tfds.download.GenerateMode.REUSE_CACHE_IF_EXISTS)
    assert info.stat().st_mtime_ns != built_at
    _build(corpus, tmp_path / "out")  # the new fingerprint matches: reused again
    assert rebuilt.info.splits["validation1"].num_examples == 1


def test_fingerprint_names_where_files_changed(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.png").write_bytes(b"12")
    (tmp_path / "b.json").write_text("[]")
    before = input_fingerprint.fingerprint(tmp_path)
    assert (before["files"], before["bytes"]) == (2, 4)
    (tmp_path / "a" / "y.png").write_bytes(b"3")  # a file added in one folder only
    after = input_fingerprint.fingerprint(tmp_path)
    assert input_fingerprint.changed_parts(before, after) == ["a"]
    assert after["digest"] != before["digest"]
