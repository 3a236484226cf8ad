"""Chart-to-Text (Statista, Pew) as TFDS, read from the repository layout of vis-nlp/Chart-to-text.

`manual_dir` is the repository root holding `statista_dataset/` and `pew_dataset/` (docs/design.md
§8; formats and quirks: docs/corpora.md §2). Splits come from
`<corpus>_dataset/dataset/dataset_split/{train,val,test}_index_mapping.csv`.

Example id: `<config>/<File_No without .txt>`, e.g. `statista/two_col-21156`, `pew/two_col-1440`
(Pew keeps the split files' old ids; files are found through `metadata.csv`).
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow_datasets as tfds
from absl import logging

from chartjax.data.table_records import records_from_table
from chartjax.data.tables import linearize
from tfds_builders.common import input_fingerprint, record_format
from tfds_builders.common.bad_input import BadInputError, SkipBadMixin
from tfds_builders.common.images import read_rgb_png

from . import sources

_DESCRIPTION = """\
Chart-to-Text (Kantharaj et al., ACL 2022): charts from Statista and Pew Research with their
titles and human-written summaries. Statista examples carry the underlying data table (as
strings, linearized, and as the content-selection record string); Pew examples carry the OCR
tokens with boxes. `complexity` is simple (two columns) or complex (multiColumn/).
"""
_CITATION = """\
@inproceedings{kantharaj2022charttotext,
  title={Chart-to-Text: A Large-Scale Benchmark for Chart Summarization},
  author={Kantharaj, Shankar and Leong, Rixie Tiffany and Lin, Xiang and Masry, Ahmed and
          Thakkar, Megh and Hoque, Enamul and Joty, Shafiq},
  booktitle={ACL},
  year={2022}
}
"""


def _ocr_feature() -> tfds.features.Sequence:
    # Boxes as written: [x_min, y_min, x_max, y_max] in image pixels.
    return tfds.features.Sequence(
        {"text": tfds.features.Text(), "bbox": tfds.features.Tensor(shape=(4,), dtype=np.float32)}
    )


class Builder(
    input_fingerprint.InputFingerprintMixin,
    SkipBadMixin,
    record_format.ArrayRecordDefault,
    tfds.core.GeneratorBasedBuilder,
):
    """Chart-to-Text from the repository layout; configs `statista` and `pew`."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release."}
    BUILDER_CONFIGS = [
        tfds.core.BuilderConfig(name="statista", description="Statista charts with data tables."),
        tfds.core.BuilderConfig(name="pew", description="Pew Research charts with OCR tokens."),
    ]
    MANUAL_DOWNLOAD_INSTRUCTIONS = """\
    Clone github.com/vis-nlp/Chart-to-text (the data is inside the git repository, ~1.7 GB) and
    pass the repository root as --manual_dir. It must hold statista_dataset/dataset/ and/or
    pew_dataset/dataset/ with their dataset_split/ folders. To skip (and count) charts with
    missing or corrupt files, set CHARTJAX_SKIP_BAD=1.
    """

    def _info(self) -> tfds.core.DatasetInfo:
        common = {
            "id": tfds.features.Text(),
            "image": tfds.features.Image(shape=(None, None, 3), encoding_format="png"),
            "title": tfds.features.Text(),
            "summary": tfds.features.Text(),
            "chart_type": tfds.features.Text(),
            "complexity": tfds.features.ClassLabel(names=[sources.SIMPLE, sources.COMPLEX]),
            "ocr": _ocr_feature(),
        }
        if self.builder_config.name == "statista":
            extra = {
                "table": {
                    "header": tfds.features.Sequence(tfds.features.Text()),
                    "rows": tfds.features.Sequence(tfds.features.Sequence(tfds.features.Text())),
                    "linearized": tfds.features.Text(),
                    "records": tfds.features.Text(),
                }
            }
        else:
            extra = {"ocr_data": tfds.features.Text()}  # data/<id>.txt: " | "-joined OCR text
        return self.dataset_info_from_configs(
            description=_DESCRIPTION,
            features=tfds.features.FeaturesDict({**common, **extra}),
            homepage="https://github.com/vis-nlp/Chart-to-text",
            citation=_CITATION,
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        config = self.builder_config.name
        base = os.path.join(os.fspath(dl_manager.manual_dir), f"{config}_dataset", "dataset")
        split_dir = os.path.join(base, "dataset_split")
        if not os.path.isdir(split_dir):
            raise BadInputError(
                split_dir, "split folder not found (the release calls it dataset_split)"
            )
        if config == "statista":
            self._chart_types = {
                sources.SIMPLE: sources.statista_chart_types(base),
                sources.COMPLEX: sources.statista_chart_types(os.path.join(base, "multiColumn")),
            }
        else:
            self._pew = sources.pew_index(base)
        generators = {}
        for split, file_name in sources.SPLIT_FILES.items():
            path = os.path.join(split_dir, file_name)
            if os.path.isfile(path):
                generators[split] = self._generate_examples(split, base, path)
            else:
                logging.warning("chart_to_text/%s: no %s; split %s not built", config, path, split)
        if not generators:
            raise BadInputError(split_dir, "none of the *_index_mapping.csv split files found")
        return generators

    def _generate_examples(self, split: str, base: str, split_file: str):
        config = self.builder_config.name
        make = self._statista_example if config == "statista" else self._pew_example
        seen: set[str] = set()
        num_examples = 0
        for entry in sources.read_split_file(split_file):
            try:
                if isinstance(entry, BadInputError):
                    raise entry
                if entry.name in seen:
                    raise BadInputError(split_file, f"{entry.name} listed twice ({entry.where})")
                seen.add(entry.name)
                example = make(base, entry)
            except BadInputError as e:
                self.skip_ledger.handle(split, e)
                continue
            key = f"{config}/{entry.name}"
            num_examples += 1
            yield key, {"id": key, **example}
        self.skip_ledger.end_split(split, num_examples)

    def _statista_example(self, base: str, entry: sources.SplitEntry) -> dict:
        kind, number = sources.split_name(entry.name)
        if kind == "two_col":
            folder, complexity = base, sources.SIMPLE
        elif kind == "multi_col":
            folder, complexity = os.path.join(base, "multiColumn"), sources.COMPLEX
        else:
            raise BadInputError(entry.where, f"unknown Statista file kind {kind!r}")
        header, rows = sources.read_table(
            os.path.join(folder, "data", f"{number}.csv"), entry.where
        )
        boxes = sources.read_boxes(os.path.join(folder, "bboxes", f"{number}.json"))
        image = os.path.join(folder, "imgs", f"{number}.png")
        return {
            "image": read_rgb_png(image, referenced_by=entry.where),
            "title": sources.read_text(
                os.path.join(folder, "titles", f"{number}.txt"), "title", entry.where
            ),
            "summary": sources.read_text(
                os.path.join(folder, "captions", f"{number}.txt"), "caption", entry.where
            ),
            "chart_type": self._chart_types[complexity].get(number, sources.UNKNOWN),
            "complexity": complexity,
            "ocr": _ocr_value(boxes),
            "table": {
                "header": header,
                "rows": rows,
                "linearized": linearize(header, rows),
                "records": records_from_table(header, rows),
            },
        }

    def _pew_example(self, base: str, entry: sources.SplitEntry) -> dict:
        chart = self._pew.get(entry.name)
        if chart is None:
            raise BadInputError(
                os.path.join(base, "metadata.csv"),
                f"no metadata row with old_id {entry.name!r} (listed in {entry.where})",
            )
        where = f"{entry.where} via {chart.where}"
        default = sources.COMPLEX if chart.folder != base else sources.SIMPLE
        complexity = (chart.row.get("complexity") or default).strip().lower()
        if complexity not in (sources.SIMPLE, sources.COMPLEX):
            raise BadInputError(chart.where, f"complexity {complexity!r} is not simple/complex")
        chart_id = chart.row["id"].strip()
        boxes = sources.read_boxes(sources.pew_path(chart, "bboxesPath", "bboxes", "json"))
        return {
            "image": read_rgb_png(
                sources.pew_path(chart, "imgPath", "imgs", "png"), referenced_by=where
            ),
            "title": sources.read_text(
                os.path.join(chart.folder, "titles", f"{chart_id}.txt"), "title", where
            ),
            "summary": sources.read_text(
                os.path.join(chart.folder, "captions", f"{chart_id}.txt"), "caption", where
            ),
            "chart_type": (chart.row.get("chartType") or sources.UNKNOWN).strip().lower(),
            "complexity": complexity,
            "ocr": _ocr_value(boxes),
            "ocr_data": sources.read_text(
                sources.pew_path(chart, "dataPath", "data", "txt"), "OCR data", where
            ),
        }


def _ocr_value(boxes: list[tuple[str, list[float]]]) -> dict:
    return {
        "text": [text for text, _ in boxes],
        "bbox": np.asarray([box for _, box in boxes], dtype=np.float32).reshape(-1, 4),
    }
