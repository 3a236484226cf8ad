"""FigureQA as TFDS: one example per figure, read from the official release layout.

`manual_dir` is the folder the user unpacked (docs/design.md §8): it holds the split folders
(`train1/`, `validation1/`, ...), each with `png/<image_index>.png`, `qa_pairs.json` and, except
in the `no_annot_*` test splits, `annotations.json` (formats: docs/corpora.md §4). The same layout
is written by `chartjax-synth figureqa`.

An example is one figure: its PNG and its annotation once, and its questions as a `Sequence`
(question, template id, answer, colours, and the question's position in `qa_pairs.json`), the
layout of TFDS's own `clevr`. One example per question stored the PNG and the annotation with
each of a figure's ~13 questions (17.6x the release's PNG bytes). Question ids stay
`<image_index>/<question_index>` (docs/design.md §8); chartjax/data/tfds_records.py expands a figure
into its questions for every reader.

The build streams: the split's JSON is read an item at a time (ijson) and spilled into one small
file per shard (figures by `image_index % num_shards`, about FIGURES_PER_SHARD each), then each
shard is written from its own spill file (`tfds.core.ShardBasedBuilder`). Memory is a shard's
worth whatever the split's size, in a plain build and in a Beam build alike; under Beam each
shard is one worker's task and no example crosses a stage (TFDS's generator-based Beam writer
groups every serialized example by shard first, which the local runner holds in memory: 3 GB
+ 6.4x the output in the 1.0.0 build, issue 24). The spill files live in the build's temporary
folder and are removed with it.
"""

from __future__ import annotations

import collections
import importlib
import io
import json
import math
import shutil
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow_datasets as tfds
from etils import epath
from PIL import Image

from chartjax.data.images import to_rgb
from tfds_builders.common import beam_build, images, input_fingerprint, json_stream, record_format

# Release split folders, in release order; a build makes the ones present in manual_dir.
SPLIT_NAMES = (
    "train1",
    "validation1",
    "validation2",
    "no_annot_test1",
    "no_annot_test2",
    "sample_train1",
)
FIGURE_TYPES = ("vbar_categorical", "hbar_categorical", "pie", "line", "dot_line")
UNKNOWN_FIGURE_TYPE = "unknown"
NO_ANSWER = -1
NUM_QUESTION_TEMPLATES = 15
# Figures per shard: a shard's spill file, its examples (~32 KB each) and its writer's buffer are
# what one build process (or Beam worker) holds at once.
FIGURES_PER_SHARD = 1000
MAX_SHARDS = 512  # open spill files while a split's JSON is read
# Keys every qa pair must carry; `answer` is added for splits that are not `no_annot_*`.
QA_KEYS = (
    "image_index",
    "question_id",
    "question_string",
    "color1_name",
    "color1_id",
    "color1_rgb",
    "color2_name",
    "color2_id",
    "color2_rgb",
)
# Documented-but-not-real spellings -> the spelling real v1.0.0 files use (docs/corpora.md §4.5).
_ANNOTATION_KEY_ALIASES = {
    "general_plot_data": "general_figure_info",
    "x_grid_lines": "x_gridlines",
    "y_grid_lines": "y_gridlines",
}

_DESCRIPTION = """\
FigureQA (Kahou et al., 2017): synthetic scientific-style figures (vertical and horizontal bar,
pie, line, dot-line) with yes/no questions from 15 templates. One example per figure, its
questions as a sequence.
"""
_CITATION = """\
@article{kahou2017figureqa,
  title={FigureQA: An Annotated Figure Dataset for Visual Reasoning},
  author={Kahou, Samira Ebrahimi and Michalski, Vincent and Atkinson, Adam and
          K{\\'a}d{\\'a}r, {\\'A}kos and Trischler, Adam and Bengio, Yoshua},
  journal={arXiv preprint arXiv:1710.07300},
  year={2017}
}
"""


class Builder(
    input_fingerprint.InputFingerprintMixin,
    record_format.ArrayRecordDefault,
    tfds.core.ShardBasedBuilder,
):
    """FigureQA from the official release layout (or the chartjax generator's output)."""

    VERSION = tfds.core.Version("2.0.0")
    RELEASE_NOTES = {
        "1.0.0": "Initial release: one example per question.",
        "2.0.0": (
            "One example per figure: the image and the annotation once, the questions as a "
            "sequence (ids, splits and values unchanged); array_record files; the split JSON "
            "streamed and the build written shard by shard in bounded memory."
        ),
    }
    MANUAL_DOWNLOAD_INSTRUCTIONS = """\
    Download the FigureQA tarballs (Microsoft Research Open Data License; redistribution is not
    allowed) and unpack them into one folder, or generate a look-alike corpus with
    `chartjax-synth figureqa --out DIR`. Pass that folder as --manual_dir; it must hold one or
    more split folders: train1/, validation1/, validation2/, no_annot_test1/, no_annot_test2/,
    sample_train1/ (each with png/, qa_pairs.json and, except no_annot_*, annotations.json).
    """

    def _info(self) -> tfds.core.DatasetInfo:
        rgb = tfds.features.Tensor(shape=(3,), dtype=np.int32)
        question = {
            "id": tfds.features.Text(doc="<image_index>/<question_index>"),
            "question_index": tfds.features.Scalar(
                dtype=np.int32, doc="Position of the pair in the split's qa_pairs.json."
            ),
            "question": tfds.features.Text(),
            "question_id": tfds.features.Scalar(dtype=np.int32, doc="Question template, 0-14."),
            "answer": tfds.features.Scalar(
                dtype=np.int32, doc="1 yes, 0 no, -1 where the split has no answers."
            ),
            "color1_name": tfds.features.Text(),
            "color1_id": np.int32,
            "color1_rgb": rgb,
            "color2_name": tfds.features.Text(doc="'--None--' for one-colour questions."),
            "color2_id": np.int32,
            "color2_rgb": rgb,
        }
        return self.dataset_info_from_configs(
            description=_DESCRIPTION,
            features=tfds.features.FeaturesDict(
                {
                    "id": tfds.features.Text(doc="<image_index>"),
                    "image": tfds.features.Image(shape=(None, None, 3), encoding_format="png"),
                    "image_index": np.int32,
                    "figure_type": tfds.features.Text(
                        doc=f"One of {', '.join(FIGURE_TYPES)}, or 'unknown' without annotations."
                    ),
                    "annotation": tfds.features.Text(
                        doc=(
                            "The image's annotations.json entry as compact JSON (source data and "
                            "bounding boxes), normalized to one shape: figure_info.bbox holds the "
                            "box itself, gridlines are x_gridlines/y_gridlines. '' when absent."
                        )
                    ),
                    "questions": tfds.features.Sequence(question),
                }
            ),
            supervised_keys=None,
            homepage="https://github.com/Maluuba/FigureQA",
            citation=_CITATION,
        )

    def _download_and_prepare(self, dl_manager, download_config=None):
        # tfds 4.9.10 runs shards on Beam only when given a runner: `tfds build
        # --beam_pipeline_options=...` gives options alone, so the runner they name is taken.
        download_config = beam_build.with_runner(download_config)
        self._use_beam = beam_build.prepare_beam_build(download_config)
        self._spill_root = epath.Path(self.data_dir) / "_spill"
        try:
            super()._download_and_prepare(dl_manager, download_config=download_config)
        finally:
            if self._spill_root.exists():
                shutil.rmtree(self._spill_root, ignore_errors=True)
        beam_build.check_shards(self.name, self.info.splits, self.info.file_format)

    def _shard_iterators_per_split(self, dl_manager):
        root = epath.Path(dl_manager.manual_dir)
        present = [name for name in SPLIT_NAMES if (root / name).is_dir()]
        if not present:
            found = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
            raise FileNotFoundError(
                f"No FigureQA split folder in manual_dir {root}: expected one or more of "
                f"{', '.join(SPLIT_NAMES)}; found {found}."
            )
        # The shard functions are taken from the installed module: `tfds build <folder>`
        # imports this file as `figureqa.figureqa`, which Beam's worker processes cannot import.
        mod = importlib.import_module(_MODULE)
        return {name: mod.plan_shards(root / name, self._spill_root / name) for name in present}


_MODULE = "tfds_builders.figureqa.figureqa"


# ---------------------------------------------------------------------------------------------
# Shards: the split's JSON spilled per shard (streamed), then one shard's figures at a time.
# ---------------------------------------------------------------------------------------------


def plan_shards(
    split_dir: epath.Path, spill_dir: epath.Path, figures_per_shard: int = FIGURES_PER_SHARD
) -> list[ShardExamples]:
    """Streams a split's JSON into per-shard spill files; one `ShardExamples` per shard.

    Every qa pair and annotation entry is checked here, as it is read, so errors in the JSON
    stop the build before any shard is written.
    """
    split = split_dir.name
    png_dir = split_dir / "png"
    num_png = (
        sum(1 for p in png_dir.iterdir() if p.name.endswith(".png")) if png_dir.is_dir() else 0
    )
    num_shards = max(1, min(MAX_SHARDS, math.ceil(num_png / figures_per_shard)))
    spill_dir.mkdir(parents=True, exist_ok=True)
    ann_path = split_dir / "annotations.json"
    has_annotations = ann_path.exists()
    shards = [ShardExamples(split_dir, spill_dir, s, has_annotations) for s in range(num_shards)]
    files = [s.qa_path.open("w") for s in shards]
    try:
        for pos, row in enumerate(qa_rows(split_dir / "qa_pairs.json", split)):
            files[row["image_index"] % num_shards].write(json.dumps([pos, row]) + "\n")
    finally:
        for f in files:
            f.close()
    if has_annotations:
        files = [s.annotation_path.open("w") for s in shards]
        try:
            seen: set[int] = set()
            for entry in annotation_entries(ann_path):
                if entry["image_index"] in seen:
                    raise ValueError(
                        f"{ann_path}: entry {len(seen)}: duplicate image_index "
                        f"{entry['image_index']}"
                    )
                seen.add(entry["image_index"])
                files[entry["image_index"] % num_shards].write(json.dumps(entry) + "\n")
        finally:
            for f in files:
                f.close()
    return shards


class ShardExamples:
    """One shard's `(key, example)` pairs, from its spill files (a picklable Beam task)."""

    def __init__(self, split_dir, spill_dir, index: int, has_annotations: bool):
        self.split_dir, self.index = epath.Path(split_dir), index
        self.has_annotations = has_annotations
        self.qa_path = epath.Path(spill_dir) / f"qa-{index:05d}.jsonl"
        self.annotation_path = epath.Path(spill_dir) / f"annotations-{index:05d}.jsonl"

    def groups(self) -> list[tuple[int, list[tuple[int, dict]], dict | None]]:
        """`(image_index, [(question_index, qa_row), ...], annotation or None)` per figure."""
        by_image: dict[int, list[tuple[int, dict]]] = collections.defaultdict(list)
        with self.qa_path.open() as f:
            for line in f:
                pos, row = json.loads(line)
                by_image[row["image_index"]].append((pos, row))
        annotations = None
        if self.has_annotations:
            with self.annotation_path.open() as f:
                annotations = {e["image_index"]: e for e in map(json.loads, f)}
        out = []
        for image_index in sorted(by_image):
            qa = by_image[image_index]
            annotation = None
            if annotations is not None:
                if image_index not in annotations:
                    raise ValueError(
                        f"{self.split_dir / 'annotations.json'}: no entry for image_index "
                        f"{image_index} (used by qa pair {qa[0][0]} in qa_pairs.json)"
                    )
                annotation = annotations[image_index]
            out.append((image_index, qa, annotation))
        return out

    def __call__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        for group in self.groups():
            yield figure_example(self.split_dir, *group)


def split_image_groups(split_dir: epath.Path, spill_dir: epath.Path):
    """Every figure group of a split, in image order (small splits: tests and tools)."""
    groups = [g for shard in plan_shards(split_dir, spill_dir) for g in shard.groups()]
    return sorted(groups, key=lambda g: g[0])


def figure_example(
    split_dir: epath.Path,
    image_index: int,
    qa: Sequence[tuple[int, Mapping[str, Any]]],
    annotation: Mapping[str, Any] | None,
) -> tuple[str, dict[str, Any]]:
    """One figure's example: its PNG (flattened to RGB), annotation and questions."""
    image_path = split_dir / "png" / f"{image_index}.png"
    image = read_rgb_png(image_path, referenced_by=f"qa pair {qa[0][0]}")
    if annotation is None:
        figure_type, annotation_json = UNKNOWN_FIGURE_TYPE, ""
    else:
        figure_type = annotation["type"]
        annotation_json = json.dumps(annotation, separators=(",", ":"), sort_keys=True)
    questions = [
        {
            "id": f"{image_index}/{question_index}",
            "question_index": question_index,
            "question": row["question_string"],
            "question_id": row["question_id"],
            "answer": row.get("answer", NO_ANSWER),
            "color1_name": row["color1_name"],
            "color1_id": row["color1_id"],
            "color1_rgb": np.asarray(row["color1_rgb"], dtype=np.int32),
            "color2_name": row["color2_name"],
            "color2_id": row["color2_id"],
            "color2_rgb": np.asarray(row["color2_rgb"], dtype=np.int32),
        }
        for question_index, row in qa
    ]
    key = str(image_index)
    return key, {
        "id": key,
        "image": image,
        "image_index": image_index,
        "figure_type": figure_type,
        "annotation": annotation_json,
        "questions": questions,
    }


def qa_rows(path: epath.Path, split: str) -> Iterator[dict[str, Any]]:
    """The rows of `qa_pairs.json`, streamed and checked; problems name the split, position
    and key."""
    # The test splits were released without answers (docs/corpora.md §4.4); elsewhere they are
    # required.
    required = QA_KEYS if split.startswith("no_annot") else (*QA_KEYS, "answer")
    items = json_stream.array_items(path, "qa_pairs.item", "an object with a 'qa_pairs' list")
    for pos, row in enumerate(items):
        check_qa_row(row, f"{path}: split {split}, qa pair {pos}", required)
        yield row


def check_qa_row(row: Any, where: str, required: Sequence[str]) -> None:
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected an object, got {type(row).__name__}")
    for key in required:
        if key not in row:
            raise ValueError(f"{where}: missing key '{key}'")
    _check_int(row, "image_index", where, lo=0)
    _check_int(row, "question_id", where, lo=0, hi=NUM_QUESTION_TEMPLATES - 1)
    if "answer" in row:
        _check_int(row, "answer", where, lo=0, hi=1)
    _check_int(row, "color1_id", where, lo=-1)
    _check_int(row, "color2_id", where, lo=-1)
    for key in ("question_string", "color1_name", "color2_name"):
        if not isinstance(row[key], str):
            raise ValueError(f"{where}: key '{key}' must be a string, got {row[key]!r}")
    for key in ("color1_rgb", "color2_rgb"):
        value = row[key]
        if not (
            isinstance(value, list)
            and len(value) == 3
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            raise ValueError(f"{where}: key '{key}' must be 3 integers, got {value!r}")


def _check_int(row: Mapping[str, Any], key: str, where: str, lo: int, hi: int | None = None):
    value = row[key]
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < lo
        or (hi is not None and value > hi)
    ):
        bounds = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise ValueError(f"{where}: key '{key}' must be an integer {bounds}, got {value!r}")


def annotation_entries(path: epath.Path) -> Iterator[dict[str, Any]]:
    """The entries of `annotations.json` (a list, one per image), streamed, checked and
    normalized."""
    for pos, entry in enumerate(
        json_stream.array_items(path, "item", "a list of per-image objects")
    ):
        where = f"{path}: entry {pos}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected an object, got {type(entry).__name__}")
        for key in ("type", "image_index", "models"):
            if key not in entry:
                raise ValueError(f"{where}: missing key '{key}'")
        _check_int(entry, "image_index", where, lo=0)
        if entry["type"] not in FIGURE_TYPES:
            raise ValueError(
                f"{where}: unknown figure type {entry['type']!r}; expected one of {FIGURE_TYPES}"
            )
        yield normalize_annotation(entry, where)


def normalize_annotation(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Maps both published annotation shapes onto one (docs/corpora.md §4.5).

    Real v1.0.0 files double-nest `figure_info` (`{"bbox": {"bbox": {x, y, w, h}}}`) and spell
    `x_gridlines`; the format docs show a single `bbox` and `x_grid_lines`. What v1.0.1's
    `fix_annotations.py` changed is [unverified], so both are accepted. Output: single-nested
    `figure_info.bbox`, `general_figure_info`, `x_gridlines`/`y_gridlines`.
    """
    entry = _rename_keys(entry, where)
    info = entry.get("general_figure_info")
    if isinstance(info, dict):
        info = _rename_keys(info, f"{where} general_figure_info")
        figure_info = info.get("figure_info")
        if isinstance(figure_info, dict) and isinstance(figure_info.get("bbox"), dict):
            bbox = figure_info["bbox"]
            if set(bbox) == {"bbox"} and isinstance(bbox["bbox"], dict):
                info["figure_info"] = {**figure_info, "bbox": bbox["bbox"]}
        entry["general_figure_info"] = info
    return entry


def _rename_keys(obj: Mapping[str, Any], where: str) -> dict[str, Any]:
    out = dict(obj)
    for old, new in _ANNOTATION_KEY_ALIASES.items():
        if old in out:
            if new in out:
                raise ValueError(f"{where}: both '{old}' and '{new}' present")
            out[new] = out.pop(old)
    return out


def read_rgb_png(path: epath.Path, referenced_by: str = "") -> bytes:
    """Decodes an image with PIL, flattens it to RGB on white and returns PNG bytes.

    PIL rather than TF: TF cannot decode every format/mode (docs/design.md §7). Transparent pixels
    are composited onto white, the figures' background, instead of dropping alpha. A PNG that
    already is 8-bit RGB without transparency is returned as read (after a full decode to prove
    it is readable): re-encoding it would cost more than the decode and change nothing.
    """
    ref = f" ({referenced_by})" if referenced_by else ""
    try:
        data = path.read_bytes()
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{path}: image file not found{ref}") from e
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()
            if images.is_plain_rgb8_png(img, data):
                return data
            rgb = to_rgb(img, data)  # 16-bit grey scaled by its bit depth
    except (OSError, ValueError, SyntaxError) as e:  # PIL's errors for unreadable images
        raise ValueError(f"{path}: cannot decode image{ref}: {e}") from e
    buf = io.BytesIO()
    rgb.save(buf, format="PNG")
    return buf.getvalue()
