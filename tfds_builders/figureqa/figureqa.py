"""FigureQA as TFDS: one example per question, read from the official release layout.

`manual_dir` is the folder the user unpacked (DESIGN.md §8): it holds the split folders
(`train1/`, `validation1/`, ...), each with `png/<image_index>.png`, `qa_pairs.json` and, except
in the `no_annot_*` test splits, `annotations.json` (formats: corpora.md §4). The same layout is
written by `chartjax-synth figureqa`.

Per-image work lives in the pure function `image_examples`. When the build is given Beam options
(`tfds build ... --beam_pipeline_options=...`), `_generate_examples` returns a Beam transform
that parses each split's JSON in a worker, reshuffles the per-image groups and maps
`image_examples` over them; otherwise it stays a plain generator. Both give the same examples.
Beam builds run with `common.beam_build`'s guards: Beam 2.77's local FnApiRunner can drop data
between stages, which is switched off, and the written count is checked against the workers'.
"""

from __future__ import annotations

import importlib
import io
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow_datasets as tfds
from etils import epath
from PIL import Image

from tfds_builders.common import beam_build

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
# Documented-but-not-real spellings -> the spelling real v1.0.0 files use (corpora.md §4.5).
_ANNOTATION_KEY_ALIASES = {
    "general_plot_data": "general_figure_info",
    "x_grid_lines": "x_gridlines",
    "y_grid_lines": "y_gridlines",
}

_DESCRIPTION = """\
FigureQA (Kahou et al., 2017): synthetic scientific-style figures (vertical and horizontal bar,
pie, line, dot-line) with yes/no questions from 15 templates. One example per question.
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


class Builder(tfds.core.GeneratorBasedBuilder):
    """FigureQA from the official release layout (or the chartjax generator's output)."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release: one example per question."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = """\
    Download the FigureQA tarballs (Microsoft Research Open Data License; redistribution is not
    allowed) and unpack them into one folder, or generate a look-alike corpus with
    `chartjax-synth figureqa --out DIR`. Pass that folder as --manual_dir; it must hold one or
    more split folders: train1/, validation1/, validation2/, no_annot_test1/, no_annot_test2/,
    sample_train1/ (each with png/, qa_pairs.json and, except no_annot_*, annotations.json).
    """

    def _info(self) -> tfds.core.DatasetInfo:
        rgb = tfds.features.Tensor(shape=(3,), dtype=np.int32)
        return self.dataset_info_from_configs(
            description=_DESCRIPTION,
            features=tfds.features.FeaturesDict(
                {
                    "id": tfds.features.Text(doc="<image_index>/<question_index>"),
                    "image": tfds.features.Image(shape=(None, None, 3), encoding_format="png"),
                    "image_index": np.int32,
                    "question_index": tfds.features.Scalar(
                        dtype=np.int32, doc="Position of the pair in the split's qa_pairs.json."
                    ),
                    "question": tfds.features.Text(),
                    "question_id": tfds.features.Scalar(
                        dtype=np.int32, doc="Question template, 0-14."
                    ),
                    "answer": tfds.features.Scalar(
                        dtype=np.int32, doc="1 yes, 0 no, -1 where the split has no answers."
                    ),
                    "color1_name": tfds.features.Text(),
                    "color1_id": np.int32,
                    "color1_rgb": rgb,
                    "color2_name": tfds.features.Text(doc="'--None--' for one-colour questions."),
                    "color2_id": np.int32,
                    "color2_rgb": rgb,
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
                }
            ),
            supervised_keys=None,
            homepage="https://github.com/Maluuba/FigureQA",
            citation=_CITATION,
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        root = epath.Path(dl_manager.manual_dir)
        present = [name for name in SPLIT_NAMES if (root / name).is_dir()]
        if not present:
            found = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
            raise FileNotFoundError(
                f"No FigureQA split folder in manual_dir {root}: expected one or more of "
                f"{', '.join(SPLIT_NAMES)}; found {found}."
            )
        return {name: self._generate_examples(root / name) for name in present}

    def _download_and_prepare(self, dl_manager, download_config=None):
        # tfds 4.9.10 hands the Beam runner/options only to its split writer: note here whether
        # the build has any, so that `_generate_examples` can choose Beam. Beam builds get a
        # lossless local data plane, and their written counts are checked against the workers'.
        self._use_beam = beam_build.prepare_beam_build(download_config)
        self._beam_counts = None
        super()._download_and_prepare(dl_manager, download_config=download_config)
        if self._use_beam:
            beam_build.check_no_examples_lost(self.name, self.info.splits, self._beam_counts)

    def _process_pipeline_result(self, pipeline_result) -> None:
        self._beam_counts = beam_build.example_counts(pipeline_result, _BEAM_NAMESPACE)

    def _generate_examples(self, split_dir: epath.Path):
        """(id, example) pairs as a generator, or as a Beam transform when the build uses Beam."""
        if getattr(self, "_use_beam", False):
            return beam_examples(split_dir)
        return _iter_examples(split_dir)


def _iter_examples(split_dir: epath.Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Parses the split's JSON once (when first iterated), then works image by image."""
    for group in split_image_groups(split_dir):
        yield from image_examples(split_dir, *group)


# ---------------------------------------------------------------------------------------------
# Apache Beam
# ---------------------------------------------------------------------------------------------

_MODULE = "tfds_builders.figureqa.figureqa"
_BEAM_NAMESPACE = "figureqa"


def beam_examples(split_dir: epath.Path):
    """A Beam transform () -> (id, example) for one split, the same pairs as `_iter_examples`.

    The split's JSON is parsed in a worker (not pickled into the pipeline graph); the per-image
    groups are reshuffled so that several workers share the image decoding.
    """
    beam = tfds.core.lazy_imports.apache_beam
    # `tfds build <folder>` imports this file as `figureqa.figureqa` (its parent folder put on
    # sys.path), a name that separate Beam worker processes cannot import. The functions handed
    # to Beam are therefore taken from the installed module, which workers can import.
    mod = importlib.import_module(_MODULE)
    split = split_dir.name
    return (
        f"Create_{split}" >> beam.Create([split_dir])
        | f"GroupByImage_{split}" >> beam.FlatMap(mod.split_image_groups)
        | f"Reshuffle_{split}" >> beam.Reshuffle()
        | f"Examples_{split}" >> beam.FlatMap(mod.beam_image_examples, split_dir)
    )


def beam_image_examples(group, split_dir: epath.Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """`image_examples` in a Beam worker, counted (`examples:<split>`) for the loss check."""
    beam = tfds.core.lazy_imports.apache_beam
    counter = beam.metrics.Metrics.counter(_BEAM_NAMESPACE, f"examples:{split_dir.name}")
    for key_example in image_examples(split_dir, *group):
        counter.inc()
        yield key_example


# ---------------------------------------------------------------------------------------------
# Reading a split: pure functions of paths and parsed JSON (picklable for Beam).
# ---------------------------------------------------------------------------------------------


def split_image_groups(
    split_dir: epath.Path,
) -> list[tuple[int, list[tuple[int, dict[str, Any]]], dict[str, Any] | None]]:
    """Parses a split's JSON files and groups the questions by image.

    Returns:
        One `(image_index, [(question_index, qa_row), ...], annotation or None)` per image, in
        order of first appearance in qa_pairs.json.
    """
    split = split_dir.name
    rows = read_qa_pairs(split_dir / "qa_pairs.json", split)
    ann_path = split_dir / "annotations.json"
    annotations = read_annotations(ann_path) if ann_path.exists() else None
    groups: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for question_index, row in enumerate(rows):
        groups.setdefault(row["image_index"], []).append((question_index, row))
    out = []
    for image_index, qa in groups.items():
        annotation = None
        if annotations is not None:
            if image_index not in annotations:
                raise ValueError(
                    f"{ann_path}: no entry for image_index {image_index} "
                    f"(used by qa pair {qa[0][0]} in qa_pairs.json)"
                )
            annotation = annotations[image_index]
        out.append((image_index, qa, annotation))
    return out


def image_examples(
    split_dir: epath.Path,
    image_index: int,
    qa: Sequence[tuple[int, Mapping[str, Any]]],
    annotation: Mapping[str, Any] | None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """All examples of one image; its PNG is read (and flattened to RGB) once for all questions."""
    image_path = split_dir / "png" / f"{image_index}.png"
    image = read_rgb_png(image_path, referenced_by=f"qa pair {qa[0][0]}")
    if annotation is None:
        figure_type, annotation_json = UNKNOWN_FIGURE_TYPE, ""
    else:
        figure_type = annotation["type"]
        annotation_json = json.dumps(annotation, separators=(",", ":"), sort_keys=True)
    for question_index, row in qa:
        key = f"{image_index}/{question_index}"
        yield (
            key,
            {
                "id": key,
                "image": image,
                "image_index": image_index,
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
                "figure_type": figure_type,
                "annotation": annotation_json,
            },
        )


def read_json(path: epath.Path) -> Any:
    """Loads a JSON file; errors name the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{path}: file not found") from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: malformed JSON: {e}") from e


def read_qa_pairs(path: epath.Path, split: str) -> list[dict[str, Any]]:
    """Reads and validates `qa_pairs.json`; every problem names the split, position and key."""
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("qa_pairs"), list):
        raise ValueError(f"{path}: expected an object with a 'qa_pairs' list")
    # The test splits were released without answers (corpora.md §4.4); elsewhere they are required.
    required = QA_KEYS if split.startswith("no_annot") else (*QA_KEYS, "answer")
    rows = data["qa_pairs"]
    for pos, row in enumerate(rows):
        where = f"{path}: split {split}, qa pair {pos}"
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
    return rows


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


def read_annotations(path: epath.Path) -> dict[int, dict[str, Any]]:
    """Reads `annotations.json` (a list, one entry per image) keyed by image_index, normalized."""
    data = read_json(path)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of per-image objects")
    out: dict[int, dict[str, Any]] = {}
    for pos, entry in enumerate(data):
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
        if entry["image_index"] in out:
            raise ValueError(f"{where}: duplicate image_index {entry['image_index']}")
        out[entry["image_index"]] = normalize_annotation(entry, where)
    return out


def normalize_annotation(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Maps both published annotation shapes onto one (corpora.md §4.5).

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

    PIL rather than TF: TF cannot decode every format/mode (DESIGN.md §7). Transparent pixels
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
            if _is_plain_rgb8_png(img, data):
                return data
            rgb = _flatten_to_rgb(img)
    except (OSError, ValueError, SyntaxError) as e:  # PIL's errors for unreadable images
        raise ValueError(f"{path}: cannot decode image{ref}: {e}") from e
    buf = io.BytesIO()
    rgb.save(buf, format="PNG")
    return buf.getvalue()


def _is_plain_rgb8_png(img: Image.Image, data: bytes) -> bool:
    # IHDR is the first chunk: byte 24 is the bit depth, byte 25 the colour type (2 = RGB).
    # Checked because PIL also reports 16-bit RGB PNGs as mode "RGB".
    return (
        img.format == "PNG"
        and img.mode == "RGB"
        and "transparency" not in img.info
        and data[24:26] == bytes([8, 2])
    )


def _flatten_to_rgb(img: Image.Image) -> Image.Image:
    if img.mode in ("RGBA", "LA", "PA") or "transparency" in img.info:
        rgba = img.convert("RGBA")
        if rgba.getchannel("A").getextrema() == (255, 255):  # opaque: nothing to composite
            return rgba.convert("RGB")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return img.convert("RGB")
