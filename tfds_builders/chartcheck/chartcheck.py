"""ChartCheck as TFDS: one example per chart with its claims, read from the official CSV release.

`manual_dir` holds `train.csv`, `val.csv`, `test.csv`, `test_two.csv` and a flat `images/`
folder (docs/design.md §8; formats and quirks: docs/corpora.md §1). A split without its CSV is read
from the JSON variant (`train.json`, `validation.json`, `test.json`, `test_two.json`) when that is
present. test_two is read from the paper-era file instead when that is there under its own name
(`claim_explanation_verification_pre_tasksets_test_two_V2.json` or `.csv`, ChartCheck 276f08e);
which test set 2 the build holds, the paper's or the 2024 re-annotation, is recorded in its
`metadata.json` under "test_two" (test_sets.py). Optional inputs: chart-type metadata
(`<type>.json`, else chart type `unknown`) and reasoning-type annotations (else `[]`); see
annotations.py.

A record is one chart: its image once, and its claims as a sequence (claims share charts: 6.2
claims per chart overall; the 1.0.0 build stored the image with every claim). Claim id:
`<csv stem>:<index column as written>` (e.g. `test_two:198 qq`); JSON records use the stem of the
CSV they stand for, so ids agree between the two variants. chartjax/data/tfds_records.py expands
a chart into its claims for every reader. A claim's reasoning types are stored as JSON text.
"""

from __future__ import annotations

import collections
import json
import os

import tensorflow_datasets as tfds
from absl import logging

from tfds_builders.common import input_fingerprint, record_format
from tfds_builders.common.bad_input import BadInputError, SkipBadMixin
from tfds_builders.common.images import read_rgb_png

from . import records, test_sets
from .annotations import ChartTypes, ReasoningTypes

# split -> (CSV stem, JSON stem). The CSV stem is the example-id prefix for both variants.
SPLIT_FILES = {
    "train": ("train", "train"),
    "validation": ("val", "validation"),
    "test_one": ("test", "test"),
    "test_two": ("test_two", "test_two"),
}
LABELS = (records.REFUTES, records.SUPPORTS)  # label 1 = TRUE = supports

_DESCRIPTION = """\
ChartCheck (Akhtar et al., 2023): claims about real-world Wikimedia Commons charts, labelled
supports/refutes with a written explanation. One example per chart, its claims as a sequence.
test_one shares charts with train; test_two holds unseen charts.
"""
_CITATION = """\
@article{akhtar2023chartcheck,
  title={ChartCheck: Explainable Fact-Checking over Real-World Chart Images},
  author={Akhtar, Mubashara and Subedi, Nikesh and Gupta, Vivek and Tahmasebi, Sahar and
          Cocarascu, Oana and Simperl, Elena},
  journal={arXiv preprint arXiv:2311.07453},
  year={2023}
}
"""


class Builder(
    input_fingerprint.InputFingerprintMixin,
    SkipBadMixin,
    record_format.ArrayRecordDefault,
    tfds.core.GeneratorBasedBuilder,
):
    """ChartCheck from the official CSV (or JSON) release and the downloaded images."""

    VERSION = tfds.core.Version("2.1.0")
    RELEASE_NOTES = {
        "1.0.0": "Initial release: one example per claim.",
        "2.0.0": (
            "One example per chart: the image once, the claims as a sequence (claim ids, "
            "splits and values unchanged; reasoning types as JSON text); array_record files."
        ),
        "2.1.0": (
            "test_two's version (the paper's or the 2024 re-annotation) in metadata.json; "
            "the paper-era test_two file is read under its own name."
        ),
    }
    MANUAL_DOWNLOAD_INSTRUCTIONS = """\
    Copy train.csv, val.csv, test.csv and test_two.csv from
    github.com/mubasharaak/chartfc_dataset_wikicommons (data/dataset/) into one folder, and
    download every chart_img URL into its images/ subfolder (flat; any of the raw,
    once-unquoted or twice-unquoted basenames). Optionally add the <chart type>.json metadata
    files next to the CSVs, and the reasoning-type annotations
    (claim_explanation_test_{one,two}_ID_reasoning.json). For the paper's test set 2, put
    claim_explanation_verification_pre_tasksets_test_two_V2.json of
    github.com/mubasharaak/ChartCheck at commit 276f08e there (it is read instead of
    test_two.csv).
    Pass the folder as --manual_dir.
    Set CHARTJAX_SKIP_BAD=1 to skip (and count) claims whose image is missing or corrupt.
    """

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            description=_DESCRIPTION,
            features=tfds.features.FeaturesDict(
                {
                    "id": tfds.features.Text(doc="The chart's chart_img URL."),
                    "image": tfds.features.Image(shape=(None, None, 3), encoding_format="png"),
                    "image_url": tfds.features.Text(),
                    "image_file": tfds.features.Text(),
                    "chart_type": tfds.features.Text(),
                    "claims": tfds.features.Sequence(
                        {
                            "id": tfds.features.Text(doc="<csv stem>:<index column>"),
                            "caption": tfds.features.Text(),
                            "claim": tfds.features.Text(),
                            "label": tfds.features.ClassLabel(names=LABELS),
                            "label_raw": tfds.features.Text(),
                            "explanation": tfds.features.Text(),
                            "reasoning_types": tfds.features.Text(doc="A JSON list of names."),
                        }
                    ),
                }
            ),
            supervised_keys=None,
            metadata=tfds.core.MetadataDict(),
            homepage="https://github.com/mubasharaak/ChartCheck",
            citation=_CITATION,
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        root = os.fspath(dl_manager.manual_dir)
        images = os.path.join(root, "images")
        if not os.path.isdir(images):
            raise BadInputError(images, "the flat images/ folder is missing from manual_dir")
        self._images = records.ImageFolder(images)
        self._chart_types = ChartTypes(root)
        self._reasoning = ReasoningTypes(root)
        logging.info(
            "chartcheck: chart-type files %s; reasoning files %s",
            self._chart_types.files or "none (chart_type = unknown)",
            self._reasoning.files or "none (reasoning_types = [])",
        )
        generators = {}
        for split, (csv_stem, json_stem) in SPLIT_FILES.items():
            path = _split_file(root, split, csv_stem, json_stem)
            if path is not None:
                generators[split] = self._generate_examples(split, csv_stem, path)
        if not generators:
            raise BadInputError(
                root, "none of train/val/test/test_two .csv (or the .json variant) found"
            )
        return generators

    def _generate_examples(self, split: str, csv_stem: str, path: str):
        read = records.read_csv if path.endswith(".csv") else records.read_json
        by_image: dict[str, list[records.ClaimRecord]] = collections.defaultdict(list)
        seen: set[str] = set()
        for item in read(path):
            if isinstance(item, BadInputError):
                self.skip_ledger.handle(split, item)
                continue
            if item.index in seen:
                bad = BadInputError(path, f"duplicate index {item.index!r}", row=item.row)
                self.skip_ledger.handle(split, bad)
                continue
            seen.add(item.index)
            by_image[item.chart_img].append(item)
        if split == "test_two":  # before any claim is skipped for its image: the file as given
            found = test_sets.identify([r for rs in by_image.values() for r in rs], path)
            self.info.metadata["test_two"] = found
            logging.info(
                "chartcheck: test_two is %s (%s)", found["version"], found["recognized_by"]
            )
        # Claims share images (train: 7,607 claims, 1,532 images): decode each image once.
        num_claims = 0
        for chart_img, claims in by_image.items():
            try:
                image, image_file = self._load_image(chart_img, claims[0])
            except BadInputError as e:
                for _ in claims:
                    self.skip_ledger.handle(split, e)
                continue
            num_claims += len(claims)
            yield (
                chart_img,
                {
                    "id": chart_img,
                    "image": image,
                    "image_url": chart_img,
                    "image_file": image_file,
                    "chart_type": self._chart_types.lookup(chart_img),
                    "claims": [
                        {
                            "id": f"{csv_stem}:{rec.index}",
                            "caption": rec.caption,
                            "claim": rec.claim,
                            "label": rec.label,
                            "label_raw": rec.label_raw,
                            "explanation": rec.explanation,
                            "reasoning_types": json.dumps(
                                self._reasoning.lookup(split, chart_img, rec.claim)
                            ),
                        }
                        for rec in claims
                    ],
                },
            )
        self.skip_ledger.end_split(split, num_claims)
        if not by_image:  # TFDS would fail with "No examples were yielded", naming no file
            raise BadInputError(path, f"no claims for split {split} (a header and no rows?)")

    def _load_image(self, chart_img: str, rec: records.ClaimRecord) -> tuple[bytes, str]:
        referenced_by = f"{os.path.basename(rec.source)} row {rec.row}"
        path = self._images.find(chart_img)
        if path is None:
            names = records.image_name_candidates(chart_img) or [chart_img]
            raise BadInputError(
                os.path.join(self._images.folder, names[0]),
                f"image file not found (tried {', '.join(names)}; referenced by {referenced_by})",
            )
        return read_rgb_png(path, referenced_by=referenced_by), os.path.basename(path)


def _split_file(root: str, split: str, csv_stem: str, json_stem: str) -> str | None:
    """The file a split is read from: its CSV, else the JSON variant. For test_two, the
    paper-era file under its own name comes first: it is only there if someone put it there to
    reproduce the paper (the release file beside it is named in a warning; build into another
    --data_dir without it to compare the two)."""
    csv_path = os.path.join(root, f"{csv_stem}.csv")
    json_path = os.path.join(root, f"{json_stem}.json")
    release = csv_path if os.path.isfile(csv_path) else None
    if release is None and os.path.isfile(json_path):
        logging.info("chartcheck: %s has no CSV; reading %s", split, json_path)
        release = json_path
    if split != "test_two":
        return release
    paper = [os.path.join(root, n) for n in test_sets.PAPER_FILES]
    paper = [p for p in paper if os.path.isfile(p)]
    if paper and release:
        logging.warning(
            "chartcheck: test_two is read from %s (the paper's test set 2), not %s",
            os.path.basename(paper[0]),
            os.path.basename(release),
        )
    return paper[0] if paper else release
