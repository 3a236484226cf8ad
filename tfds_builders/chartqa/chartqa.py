"""ChartQA as TFDS: one example per chart with its questions, read from the official release.

`manual_dir` is the `ChartQA Dataset/` folder as unpacked (docs/design.md §8): `train/`, `val/`
and `test/`, each with `png/<imgname>`, `tables/<stem>.csv` (the chart's data table),
`<folder>_human.json` (ChartQA-H, human-written questions), `<folder>_augmented.json` (ChartQA-M,
machine-generated) and, in the full version only (the zip of the HF dataset
`ahmed-masry/ChartQA`), `annotations/<stem>.json`. The first public version (GitHub) has no
`annotations/`: the annotation is then `""`. A QA file is a list of
`{"imgname", "query", "label"}` with string labels. The same layout is written by
`chartjax-synth chartqa` and is the layout for one's own charts (docs/your-own-charts.md).

A record is one chart: its PNG, its table CSV and its annotation once, and its questions (human
and augmented alike) as a sequence, each with its `source`. Question id:
`<split>/<source>/<index in that JSON file>`, the split as the build names it (`val/` ->
`validation/human/3`). chartjax/data/tfds_records.py expands a chart into its questions for every
reader. Only charts that some question names become records; a split folder without question
files (charts and tables only, for DePlot-style chart-to-table training) gives every image of
`png/` with its table, each with an empty question sequence.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator, Mapping
from typing import Any

import tensorflow_datasets as tfds
from etils import epath

from tfds_builders.common import input_fingerprint, json_stream, record_format
from tfds_builders.common.bad_input import BadInputError, SkipBadMixin
from tfds_builders.common.images import read_rgb_png

# split -> the release folder it is read from (the folder name also prefixes its QA files).
SPLIT_FOLDERS = {"train": "train", "validation": "val", "test": "test"}
# Question sources, in the order a chart's questions are listed: `<folder>_<source>.json`.
SOURCES = ("human", "augmented")
QA_KEYS = ("imgname", "query", "label")

_DESCRIPTION = """\
ChartQA (Masry et al., Findings of ACL 2022): questions about real-world charts (Statista, Pew,
OECD, Our World in Data) with short answers; human-written (ChartQA-H) and machine-generated
(ChartQA-M, "augmented") questions. One example per chart: its image, data table and (full
version only) annotation once, its questions as a sequence.
"""
_CITATION = """\
@inproceedings{masry-etal-2022-chartqa,
  title={{C}hart{QA}: A Benchmark for Question Answering about Charts with Visual and Logical
         Reasoning},
  author={Masry, Ahmed and Long, Do Xuan and Tan, Jia Qing and Joty, Shafiq and Hoque, Enamul},
  booktitle={Findings of the Association for Computational Linguistics: ACL 2022},
  year={2022}
}
"""


class Builder(
    input_fingerprint.InputFingerprintMixin,
    SkipBadMixin,
    record_format.ArrayRecordDefault,
    tfds.core.GeneratorBasedBuilder,
):
    """ChartQA from the official release layout (or the chartjax generator's, or one's own)."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {
        "1.0.0": (
            "One example per chart: the image, table and annotation once, the human and "
            "augmented questions as a sequence; array_record files."
        ),
    }
    MANUAL_DOWNLOAD_INSTRUCTIONS = """\
    Download ChartQA (github.com/vis-nlp/ChartQA, or the zip of the HF dataset
    ahmed-masry/ChartQA, which adds annotations/) and unpack it; pass its `ChartQA Dataset/`
    folder as --manual_dir. It holds train/, val/ and test/, each with png/, tables/,
    <folder>_human.json, <folder>_augmented.json and maybe annotations/. Or generate a look-alike
    corpus with `chartjax-synth chartqa --out DIR`, or lay out your own charts the same way
    (docs/your-own-charts.md).
    Set CHARTJAX_SKIP_BAD=1 to skip (and count) questions whose image or table is missing or bad.
    """

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            description=_DESCRIPTION,
            features=tfds.features.FeaturesDict(
                {
                    "id": tfds.features.Text(doc="The chart's imgname, e.g. two_col_1.png."),
                    "image": tfds.features.Image(shape=(None, None, 3), encoding_format="png"),
                    "table": tfds.features.Text(doc="tables/<stem>.csv as written."),
                    "annotation": tfds.features.Text(
                        doc="annotations/<stem>.json as compact JSON; '' when absent."
                    ),
                    "questions": tfds.features.Sequence(
                        {
                            "id": tfds.features.Text(doc="<split>/<source>/<index in the file>"),
                            "query": tfds.features.Text(),
                            "label": tfds.features.Text(),
                            "source": tfds.features.Text(doc="human or augmented"),
                        }
                    ),
                }
            ),
            supervised_keys=None,
            homepage="https://github.com/vis-nlp/ChartQA",
            citation=_CITATION,
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        # epath, not os: manual_dir may be a bucket (and TFDS's test case mocks os).
        root = epath.Path(dl_manager.manual_dir)
        generators = {}
        for split, folder in SPLIT_FOLDERS.items():
            if (root / folder).is_dir():
                generators[split] = self._generate_examples(split, root / folder)
        if not generators:
            found = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
            raise BadInputError(
                root,
                "no ChartQA split folder (train/, val/ or test/); pass the `ChartQA Dataset/` "
                f"folder itself as --manual_dir (found {found})",
            )
        return generators

    def _generate_examples(self, split: str, split_dir: epath.Path):
        if not qa_files(split_dir):
            yield from self._table_only_examples(split, split_dir)
            return
        by_chart: dict[str, list[Question]] = {}
        files = []
        for path, source in qa_files(split_dir):
            files.append(path)
            for question in read_questions(path, source):
                if isinstance(question, BadInputError):
                    self.skip_ledger.handle(split, question)
                    continue
                by_chart.setdefault(question.imgname, []).append(question)
        num_questions = 0
        for imgname, questions in by_chart.items():
            try:
                example = chart_example(split, split_dir, imgname, questions)
            except BadInputError as e:
                for _ in questions:  # every question of the chart goes with it
                    self.skip_ledger.handle(split, e)
                continue
            num_questions += len(questions)
            yield imgname, example
        self.skip_ledger.end_split(split, num_questions)
        if not by_chart:  # TFDS would fail with "No examples were yielded", naming no file
            raise BadInputError(", ".join(map(str, files)), f"no questions for split {split}")

    def _table_only_examples(self, split: str, split_dir: epath.Path):
        """Every image of `png/` with its table and no questions (a split without QA files)."""
        png_dir = split_dir / "png"
        names = (
            sorted(p.name for p in png_dir.iterdir() if not p.name.startswith("."))
            if png_dir.is_dir()
            else []
        )
        if not names:
            found = [f"{split_dir.name}_{source}.json" for source in SOURCES]
            raise BadInputError(
                split_dir,
                f"no question file ({' or '.join(found)}) and no chart in png/: a split holds "
                "questions, or charts with their tables",
            )
        num_charts = 0
        for imgname in names:
            try:
                example = chart_example(split, split_dir, imgname, [])
            except BadInputError as e:
                self.skip_ledger.handle(split, e)
                continue
            num_charts += 1
            yield imgname, example
        self.skip_ledger.end_split(split, num_charts)


class Question:
    """One QA entry: where it is (file, source, index) and what it says."""

    __slots__ = ("path", "source", "index", "imgname", "query", "label")

    def __init__(self, path: epath.Path, source: str, index: int, entry: Mapping[str, str]):
        self.path, self.source, self.index = path, source, index
        self.imgname, self.query, self.label = (entry[k] for k in QA_KEYS)

    def where(self) -> str:
        return f"{self.path} entry {self.index}"


def qa_files(split_dir: epath.Path) -> list[tuple[epath.Path, str]]:
    """`(path, source)` of the split's QA files present (none: a split of charts and tables)."""
    names = [(f"{split_dir.name}_{source}.json", source) for source in SOURCES]
    return [(split_dir / n, s) for n, s in names if (split_dir / n).is_file()]


def read_questions(path: epath.Path, source: str) -> Iterator[Question | BadInputError]:
    """The entries of a QA file, in file order: a `Question`, or a `BadInputError` naming the file
    and the entry index. Malformed JSON raises (ValueError naming the file)."""
    items = json_stream.array_items(path, "item", "a list of {imgname, query, label} objects")
    for index, entry in enumerate(items):
        problem = entry_problem(entry)
        if problem:
            yield BadInputError(path, f"entry {index}: {problem}")
        else:
            yield Question(path, source, index, entry)


def entry_problem(entry: Any) -> str | None:
    """What is wrong with a QA entry, or None."""
    if not isinstance(entry, dict):
        return f"expected an object, got {type(entry).__name__}"
    for key in QA_KEYS:
        if key not in entry:
            return f"missing key '{key}'"
        if not isinstance(entry[key], str):
            return f"key '{key}' must be a string, got {entry[key]!r}"
    name = entry["imgname"]
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        return f"imgname {name!r} is not a file name in png/"
    return None


def chart_example(
    split: str, split_dir: epath.Path, imgname: str, questions: list[Question]
) -> dict[str, Any]:
    """A chart's example: its image (flattened to RGB), table, annotation and questions.

    Raises:
        BadInputError: the image or table is missing or unreadable, or the annotation is not
            JSON; the message names the file and the first question that names the chart (the
            image, for a chart without questions).
    """
    ref = questions[0].where() if questions else str(split_dir / "png" / imgname)
    stem = pathlib.PurePosixPath(imgname).stem
    image = read_rgb_png(split_dir / "png" / imgname, referenced_by=ref)
    table = _read_text(split_dir / "tables" / f"{stem}.csv", "table", ref)
    annotation = ""
    ann_path = split_dir / "annotations" / f"{stem}.json"
    if ann_path.is_file():
        text = _read_text(ann_path, "annotation", ref)
        try:
            annotation = json.dumps(json.loads(text), separators=(",", ":"), sort_keys=True)
        except json.JSONDecodeError as e:
            raise BadInputError(ann_path, f"malformed JSON: {e} (referenced by {ref})") from e
    return {
        "id": imgname,
        "image": image,
        "table": table,
        "annotation": annotation,
        "questions": [
            {
                "id": f"{split}/{q.source}/{q.index}",
                "query": q.query,
                "label": q.label,
                "source": q.source,
            }
            for q in questions
        ],
    }


def _read_text(path: epath.Path, what: str, ref: str) -> str:
    try:  # utf-8-sig: a byte-order mark is not part of the header
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError as e:
        raise BadInputError(path, f"{what} file not found (referenced by {ref})") from e
    except UnicodeDecodeError as e:
        raise BadInputError(path, f"{what} file is not UTF-8: {e} (referenced by {ref})") from e
