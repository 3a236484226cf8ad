"""A damaged array_record file of a build (a disk error, a copy cut short) is named, with its
split, the record and the remedy, instead of Riegeli's bare "Corrupted Riegeli/records file"
(issue 44 item 12). On the FigureQA dummy release, built here and damaged in its chunks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tensorflow_datasets as tfds

from chartjax.data import tfds_records
from tfds_builders.figureqa import figureqa

DUMMY = Path(__file__).resolve().parents[3] / "tfds_builders" / "figureqa" / "dummy_data"


def test_a_damaged_record_names_the_file_split_record_and_remedy(tmp_path):
    builder = figureqa.Builder(data_dir=str(tmp_path / "tfds"))
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=DUMMY))
    built = Path(builder.data_dir)
    assert tfds_records.data_source(str(built), "train1")[0]  # whole, it reads
    (path,) = built.glob("figureqa-train1.array_record-*")
    data = bytearray(path.read_bytes())
    used = [i for i, b in enumerate(data) if b]
    for i in range(used[0] + 500, used[-1] - 500):  # the chunks, not the header or the footer
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    source = tfds_records.data_source(str(built), "train1")
    with pytest.raises(tfds_records.DamagedBuild) as e:
        source[0]
    message = str(e.value)
    assert message.startswith(f"{path}: split train1 of the build, record 0 cannot be read (")
    assert "Corrupted Riegeli" in message
    assert message.endswith("rebuild it with `tfds build tfds_builders/figureqa ... --overwrite`")
    shutil.rmtree(tmp_path / "tfds")
