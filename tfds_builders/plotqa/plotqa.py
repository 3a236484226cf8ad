"""PlotQA as TFDS: one example per plot with its questions, read from the official release.

`manual_dir` is the folder holding the split folders (docs/design.md §8): `train/`, `val/`,
`test/` (the builder's `train`, `validation`, `test`), each with `annotations.json` (a list, one
entry per plot), `qa_pairs_V1.json` and `qa_pairs_V2.json` (`{"qa_pairs": [...]}`; the
`qa_pairs_v1.json` spelling and an unwrapped list are accepted too: which the download uses is
[unverified]) and the images, as `png/<image_index>.png` or as the download's `png.tar.gz`,
read without extracting it (`png/` wins when both are there). Config `v1` reads the V1 pairs,
`v2` the V2 pairs (a superset). The same layout is written by `chartjax-synth plotqa`.

A record is one plot of `annotations.json`: its PNG, its annotation entry (compact JSON), its
table derived from that entry (plotqa_table) and its questions in file order, each with
`question_string`, `answer` (the JSON text of the release's answer, a number or a string),
`answer_number` (the answer as a float where it is a number, or a string that reads as a
finite one; NaN otherwise), `template`, `type`, `question_id`, `qid` and its position in the QA
file. Question id `<config>/<split>/<question_id>` (design §8); a `question_id` used twice in a
split's QA file stops the build naming both entries.

The build streams, as the FigureQA build does (tfds_builders/figureqa): the QA file (several GB
for train at full size, not ordered by plot) and `annotations.json` are read an item at a time
(json_stream) and spilled into one small file per shard (plots by `image_index % num_shards`,
about PLOTS_PER_SHARD each); `png.tar.gz` is read once, its members in order, each image
appended to its shard's spill file. Each shard is then written from its spill files
(`tfds.core.ShardBasedBuilder`): memory is a shard's worth whatever the split's size. The spill
files (with a tar: a copy of the split's PNG bytes) live in the build's temporary folder and are
removed with it. Under Beam the spilling (the JSON and the tar, read once each) is done by the
process that launches the pipeline, serially; the shards are the workers' tasks.
"""

from __future__ import annotations

import collections
import importlib
import json
import math
import re
import shutil
import struct
import tarfile
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import tensorflow_datasets as tfds
from absl import logging
from etils import epath

from tfds_builders.common import beam_build, images, input_fingerprint, json_stream, record_format
from tfds_builders.common.bad_input import BadInputError
from tfds_builders.plotqa.plotqa_table import plot_table

# split -> the release folder it is read from.
SPLIT_FOLDERS = {"train": "train", "validation": "val", "test": "test"}
# config -> QA file names accepted, in the order they are looked for.
QA_FILES = {
    "v1": ("qa_pairs_V1.json", "qa_pairs_v1.json"),
    "v2": ("qa_pairs_V2.json", "qa_pairs_v2.json"),
}
TAR_NAME = "png.tar.gz"
# Plots per shard: ~128 questions each in v2 (28.9M / 224k), so a shard's spill is ~60k pairs.
PLOTS_PER_SHARD = 500
MAX_SHARDS = 512  # open spill files while the QA file or the tar is read
_MEMBER = re.compile(r"(?:^|/)(\d+)\.png$")
_HEADER = struct.Struct(">QI")  # image spill record: image_index, byte length

_DESCRIPTION = """\
PlotQA (Methani et al., WACV 2020): 224k scientific plots (vertical and horizontal bars, lines,
dot-lines) from real data, with 28.9M template questions (v2; v1 holds 8.2M of them) whose
answers are often numbers outside any fixed vocabulary. One example per plot: its image,
annotation and derived table once, its questions as a sequence.
"""
_CITATION = """\
@inproceedings{methani2020plotqa,
  title={PlotQA: Reasoning over Scientific Plots},
  author={Methani, Nitesh and Ganguly, Pritha and Khapra, Mitesh M. and Kumar, Pratyush},
  booktitle={The IEEE Winter Conference on Applications of Computer Vision (WACV)},
  year={2020}
}
"""


class Builder(
    input_fingerprint.InputFingerprintMixin,
    record_format.ArrayRecordDefault,
    tfds.core.ShardBasedBuilder,
):
    """PlotQA from the official release layout (or the chartjax generator's output)."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {
        "1.0.0": (
            "One example per plot: image, annotation and derived table once, the v1 or v2 "
            "questions as a sequence; array_record files; streamed, written shard by shard."
        ),
    }
    BUILDER_CONFIGS = [
        tfds.core.BuilderConfig(name="v1", description="The qa_pairs_V1.json questions."),
        tfds.core.BuilderConfig(name="v2", description="The qa_pairs_V2.json questions."),
    ]
    MANUAL_DOWNLOAD_INSTRUCTIONS = """\
    Download PlotQA (github.com/NiteshMethani/PlotQA: per split the images png.tar.gz,
    annotations.json and the QA pairs qa_pairs_V1.json / qa_pairs_V2.json) into one folder
    with train/, val/ and test/; png.tar.gz may stay packed. Or generate a look-alike corpus
    with `chartjax-synth plotqa --out DIR`. Pass that folder as --manual_dir.
    """

    def _info(self) -> tfds.core.DatasetInfo:
        text = tfds.features.Text
        question = {
            "id": text(doc="<config>/<split>/<question_id>"),
            "question_index": tfds.features.Scalar(
                dtype=np.int64, doc="Position of the pair in the split's QA file."
            ),
            "question_string": text(),
            "answer": text(doc='The release\'s answer as JSON text: 12.5, 2010, "Yes".'),
            "answer_number": tfds.features.Scalar(
                dtype=np.float64, doc="The answer as a number where it is one; NaN otherwise."
            ),
            "template": text(doc="data_retrieval, min_max, arithmetic, ... ('' if absent)"),
            "type": text(doc="The pair's `type` field as written ('' if absent)."),
            "question_id": text(doc="The release's question_id, as text."),
            "qid": text(doc="The release's qid, as text ('' if absent)."),
        }
        return self.dataset_info_from_configs(
            description=_DESCRIPTION,
            features=tfds.features.FeaturesDict(
                {
                    "id": text(doc="<image_index>"),
                    "image_index": np.int64,
                    "image": tfds.features.Image(shape=(None, None, 3), encoding_format="png"),
                    "plot_type": text(doc="The annotation's `type` ('' if absent)."),
                    "annotation": text(doc="The annotations.json entry as compact JSON."),
                    "table": text(doc="CSV text derived from the annotation (plotqa_table)."),
                    "questions": tfds.features.Sequence(question),
                }
            ),
            supervised_keys=None,
            homepage="https://github.com/NiteshMethani/PlotQA",
            citation=_CITATION,
        )

    def _download_and_prepare(self, dl_manager, download_config=None):
        # As FigureQA's: `tfds build --beam_pipeline_options=...` gives options alone.
        download_config = beam_build.with_runner(download_config)
        beam_build.prepare_beam_build(download_config)
        self._spill_root = epath.Path(self.data_dir) / "_spill"
        try:
            super()._download_and_prepare(dl_manager, download_config=download_config)
        finally:
            if self._spill_root.exists():
                shutil.rmtree(self._spill_root, ignore_errors=True)
        beam_build.check_shards(self.name, self.info.splits, self.info.file_format)

    def _shard_iterators_per_split(self, dl_manager):
        root = epath.Path(dl_manager.manual_dir)
        present = {s: f for s, f in SPLIT_FOLDERS.items() if (root / f).is_dir()}
        if not present:
            found = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
            raise BadInputError(
                root,
                f"no PlotQA split folder (train/, val/ or test/); pass the folder holding them "
                f"as --manual_dir (found {found})",
            )
        # Taken from the installed module: `tfds build <folder>` imports this file under
        # another name, which Beam's worker processes cannot import (as FigureQA's).
        mod = importlib.import_module(_MODULE)
        config = self.builder_config.name
        return {
            split: mod.plan_shards(root / folder, self._spill_root / split, config, split)
            for split, folder in present.items()
        }


_MODULE = "tfds_builders.plotqa.plotqa"


# ---------------------------------------------------------------------------------------------
# Reading the release: entries checked as they stream by, problems named by file and entry.
# ---------------------------------------------------------------------------------------------


def qa_file(split_dir: epath.Path, config: str) -> epath.Path:
    for name in QA_FILES[config]:
        if (split_dir / name).is_file():
            return split_dir / name
    names = " or ".join(QA_FILES[config])
    raise BadInputError(split_dir, f"no {names} for config {config}")


def _top_level_prefix(path: epath.Path) -> str:
    """ijson prefix of the pairs: "qa_pairs.item" for `{"qa_pairs": [...]}`, "item" for a list."""
    with path.open("rb") as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf").lstrip()
    return "item" if head.startswith(b"[") else "qa_pairs.item"


def qa_entries(path: epath.Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """`(position, checked pair)` of a QA file, streamed."""
    prefix = _top_level_prefix(path)
    shape = '{"qa_pairs": [...]} or a list of question-answer objects'
    for pos, entry in enumerate(json_stream.array_items(path, prefix, shape)):
        problem = qa_problem(entry)
        if problem:
            raise BadInputError(path, f"entry {pos}: {problem}")
        yield pos, entry


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_id(value: Any) -> bool:
    return (_is_int(value) and value >= 0) or (isinstance(value, str) and value != "")


def qa_problem(entry: Any) -> str | None:
    """What is wrong with a QA pair, or None. Required: image_index, question_string, answer,
    question_id; template, type and qid are kept when present."""
    if not isinstance(entry, dict):
        return f"expected an object, got {type(entry).__name__}"
    for key in ("image_index", "question_string", "answer", "question_id"):
        if key not in entry:
            return f"missing key '{key}'"
    if not (_is_int(entry["image_index"]) and entry["image_index"] >= 0):
        return f"key 'image_index' must be an integer >= 0, got {entry['image_index']!r}"
    if not isinstance(entry["question_string"], str):
        return f"key 'question_string' must be a string, got {entry['question_string']!r}"
    answer = entry["answer"]
    if isinstance(answer, bool) or not isinstance(answer, int | float | str):
        return f"key 'answer' must be a number or a string, got {answer!r}"
    if not _is_id(entry["question_id"]):
        return (
            f"key 'question_id' must be an integer >= 0 or a string, got {entry['question_id']!r}"
        )
    for key in ("template", "type"):
        if key in entry and not isinstance(entry[key], str):
            return f"key '{key}' must be a string, got {entry[key]!r}"
    if "qid" in entry and not (_is_int(entry["qid"]) or isinstance(entry["qid"], str)):
        return f"key 'qid' must be an integer or a string, got {entry['qid']!r}"
    return None


def annotation_entries(path: epath.Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """`(position, entry)` of `annotations.json` (a list, one object per plot), streamed."""
    items = json_stream.array_items(path, "item", "a list of per-plot objects")
    for pos, entry in enumerate(items):
        if not isinstance(entry, dict):
            raise BadInputError(
                path, f"entry {pos}: expected an object, got {type(entry).__name__}"
            )
        value = entry.get("image_index")
        if not (_is_int(value) and value >= 0):
            what = "missing key 'image_index'" if value is None else f"image_index {value!r}"
            raise BadInputError(path, f"entry {pos}: {what} (an integer >= 0 is needed)")
        yield pos, entry


def id_text(value: Any) -> str:
    return str(value)


def answer_number(answer: Any) -> float:
    """The answer as a float where it is a number (or a string reading as a finite number)."""
    if isinstance(answer, bool):
        return math.nan
    if isinstance(answer, int | float):
        return float(answer)
    try:
        value = float(answer.strip().replace(",", ""))
    except (ValueError, AttributeError):
        return math.nan
    return value if math.isfinite(value) else math.nan


# ---------------------------------------------------------------------------------------------
# Planning: the split streamed into per-shard spill files.
# ---------------------------------------------------------------------------------------------


def plan_shards(
    split_dir: epath.Path,
    spill_dir: epath.Path,
    config: str,
    split: str,
    plots_per_shard: int = PLOTS_PER_SHARD,
) -> list[ShardExamples]:
    """Streams a split's annotations, QA pairs and (if packed) images into per-shard spill
    files; one `ShardExamples` per shard. Every entry is checked here, so bad input stops the
    build before any shard is written."""
    split_dir, spill_dir = epath.Path(split_dir), epath.Path(spill_dir)
    spill_dir.mkdir(parents=True, exist_ok=True)
    ann_path = split_dir / "annotations.json"
    qa_path = qa_file(split_dir, config)  # before the long reads: a missing file is named now
    if not ann_path.is_file():
        raise BadInputError(ann_path, "file not found (one entry per plot is needed)")
    # 1. annotations.json -> one spill file, counting the plots (which sets the shard count).
    plots: dict[int, int] = {}  # image_index -> entry position (~157k ints for train)
    all_ann = spill_dir / "annotations-all.jsonl"
    with all_ann.open("w") as f:
        for pos, entry in annotation_entries(ann_path):
            index = entry["image_index"]
            if index in plots:
                raise BadInputError(
                    ann_path,
                    f"entries {plots[index]} and {pos}: duplicate image_index {index}",
                )
            plots[index] = pos
            f.write(json.dumps([index, pos, entry], ensure_ascii=False) + "\n")
    if not plots:
        raise BadInputError(ann_path, f"no plots for split {split}")
    num_shards = max(1, min(MAX_SHARDS, math.ceil(len(plots) / plots_per_shard)))
    png_dir = split_dir / "png"
    tar_path = None if png_dir.is_dir() else split_dir / TAR_NAME
    if tar_path is not None and not tar_path.is_file():
        raise BadInputError(split_dir, f"no png/ folder and no {TAR_NAME}")
    shards = [
        ShardExamples(split_dir, spill_dir, s, config, split, qa_path, tar_path)
        for s in range(num_shards)
    ]
    with _open_all([s.annotation_path for s in shards]) as files, all_ann.open() as f:
        for line in f:
            files[int(line[1 : line.index(",")]) % num_shards].write(line)
    all_ann.unlink()
    # 2. The QA pairs -> per-shard files, their ids -> partitions checked for duplicates.
    num_parts = min(num_shards, 128)
    part_paths = [spill_dir / f"question-ids-{p:03d}.jsonl" for p in range(num_parts)]
    with _open_all([s.qa_path for s in shards]) as files, _open_all(part_paths) as parts:
        for pos, entry in qa_entries(qa_path):
            index = entry["image_index"]
            if index not in plots:
                raise BadInputError(
                    qa_path, f"entry {pos}: image_index {index} has no entry in {ann_path}"
                )
            key = id_text(entry["question_id"])
            parts[zlib.crc32(key.encode()) % num_parts].write(json.dumps([key, pos]) + "\n")
            files[index % num_shards].write(json.dumps([pos, entry], ensure_ascii=False) + "\n")
    for path in part_paths:
        check_unique_ids(path, qa_path)
        path.unlink()
    # 3. The tar, read once in member order -> per-shard image files.
    if tar_path is not None:
        spill_tar(tar_path, shards, plots, ann_path)
    return shards


class _open_all:
    """Opens files for writing and closes them all (a context manager)."""

    def __init__(self, paths, mode: str = "w"):
        self.paths, self.mode, self.files = list(paths), mode, []

    def __enter__(self):
        for path in self.paths:
            self.files.append(path.open(self.mode))
        return self.files

    def __exit__(self, *exc):
        for f in self.files:
            f.close()


def check_unique_ids(part_path: epath.Path, qa_path: epath.Path) -> None:
    """Refuses a question_id used twice, naming both entries (one id partition at a time)."""
    seen: dict[str, int] = {}
    with part_path.open() as f:
        for line in f:
            key, pos = json.loads(line)
            if key in seen:
                first, second = sorted((seen[key], pos))
                raise BadInputError(
                    qa_path, f"entries {first} and {second}: duplicate question_id {key}"
                )
            seen[key] = pos


def spill_tar(
    tar_path: epath.Path, shards: list[ShardExamples], plots: Mapping[int, int], ann_path
) -> None:
    """Reads `png.tar.gz` once, member by member, appending each plot's image to its shard's
    image spill file. Members that are not `<image_index>.png` are passed over; images of no
    annotated plot are counted and dropped."""
    found: dict[int, str] = {}
    dropped = 0
    num_shards = len(shards)
    try:
        with (
            _open_all([s.image_path for s in shards], "wb") as files,
            tar_path.open("rb") as raw,
            tarfile.open(fileobj=raw, mode="r|*") as tar,
        ):
            for member in tar:
                match = _MEMBER.search(member.name)
                if not member.isfile() or not match:
                    continue
                index = int(match.group(1))
                if index not in plots:
                    dropped += 1
                    continue
                if index in found:
                    raise BadInputError(
                        tar_path,
                        f"members {found[index]!r} and {member.name!r} are both image {index}",
                    )
                found[index] = member.name
                data = tar.extractfile(member).read()
                name = member.name.encode()
                out = files[index % num_shards]
                out.write(_HEADER.pack(index, len(name)) + name)
                out.write(_HEADER.pack(index, len(data)) + data)
    except (tarfile.TarError, EOFError, OSError) as e:
        raise BadInputError(tar_path, f"cannot read the tar: {e}") from e
    if dropped:
        logging.warning("plotqa: %s: %d images of no annotated plot skipped", tar_path, dropped)
    missing = [i for i in plots if i not in found]
    if missing:
        first = min(missing, key=plots.__getitem__)
        raise BadInputError(
            tar_path,
            f"no member {first}.png for image_index {first} ({ann_path} entry {plots[first]})"
            + (f"; {len(missing) - 1} more plots have no image" if len(missing) > 1 else ""),
        )


class ShardExamples:
    """One shard's `(key, example)` pairs, from its spill files (a picklable Beam task)."""

    def __init__(self, split_dir, spill_dir, index: int, config, split, qa_path, tar_path):
        self.split_dir, self.index = epath.Path(split_dir), index
        self.config, self.split = config, split
        self.qa_path = epath.Path(spill_dir) / f"qa-{index:05d}.jsonl"
        self.annotation_path = epath.Path(spill_dir) / f"annotations-{index:05d}.jsonl"
        self.image_path = epath.Path(spill_dir) / f"images-{index:05d}.bin"
        self.qa_file, self.tar_path = str(qa_path), tar_path and str(tar_path)

    def _questions(self) -> dict[int, list[tuple[int, dict]]]:
        by_plot: dict[int, list[tuple[int, dict]]] = collections.defaultdict(list)
        with self.qa_path.open() as f:
            for line in f:
                pos, entry = json.loads(line)
                by_plot[entry["image_index"]].append((pos, entry))
        return by_plot

    def _image_offsets(self) -> dict[int, tuple[str, int, int]]:
        """image_index -> (member name, offset, length) in the shard's image spill file."""
        out = {}
        with self.image_path.open("rb") as f:
            while header := f.read(_HEADER.size):
                index, size = _HEADER.unpack(header)
                name = f.read(size).decode()
                _, data_size = _HEADER.unpack(f.read(_HEADER.size))
                out[index] = (name, f.tell(), data_size)
                f.seek(data_size, 1)
        return out

    def __call__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        questions = self._questions()
        with self.annotation_path.open() as f:
            plots = sorted((json.loads(line) for line in f), key=lambda p: p[0])
        offsets = self._image_offsets() if self.tar_path else {}
        images_file = self.image_path.open("rb") if self.tar_path else None
        try:
            for index, pos, entry in plots:
                ref = f"{self.split_dir / 'annotations.json'} entry {pos}"
                if images_file is None:
                    image = images.read_rgb_png(self.split_dir / "png" / f"{index}.png", ref)
                else:
                    name, offset, size = offsets[index]
                    images_file.seek(offset)
                    image = images.rgb_png_bytes(
                        images_file.read(size), f"{self.tar_path} member {name}", ref
                    )
                yield (
                    str(index),
                    plot_example(
                        self.config, self.split, index, entry, image, questions.get(index, [])
                    ),
                )
        finally:
            if images_file is not None:
                images_file.close()


def plot_example(
    config: str,
    split: str,
    index: int,
    entry: Mapping[str, Any],
    image: bytes,
    questions: list[tuple[int, Mapping[str, Any]]],
) -> dict[str, Any]:
    """One plot's example: image, annotation, derived table, questions in file order."""
    plot_type = entry.get("type")
    return {
        "id": str(index),
        "image_index": index,
        "image": image,
        "plot_type": plot_type if isinstance(plot_type, str) else "",
        "annotation": json.dumps(entry, separators=(",", ":"), sort_keys=True, ensure_ascii=False),
        "table": plot_table(entry),
        "questions": [question(config, split, pos, q) for pos, q in sorted(questions)],
    }


def question(config: str, split: str, pos: int, entry: Mapping[str, Any]) -> dict[str, Any]:
    qid = entry.get("qid", "")
    return {
        "id": f"{config}/{split}/{id_text(entry['question_id'])}",
        "question_index": pos,
        "question_string": entry["question_string"],
        "answer": json.dumps(entry["answer"], ensure_ascii=False),
        "answer_number": answer_number(entry["answer"]),
        "template": entry.get("template", ""),
        "type": entry.get("type", ""),
        "question_id": id_text(entry["question_id"]),
        "qid": id_text(qid),
    }


def split_examples(split_dir, spill_dir, config: str, split: str) -> list[tuple[str, dict]]:
    """Every example of a split, in image order (small splits: tests and tools)."""
    shards = plan_shards(epath.Path(split_dir), epath.Path(spill_dir), config, split)
    return sorted((kv for shard in shards for kv in shard()), key=lambda kv: int(kv[0]))
