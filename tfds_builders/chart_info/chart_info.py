"""ICDAR 2019 CHART-Infographics / CHART-Info 2020-2022 as TFDS, one example per chart.

`manual_dir` is the release root of one layout (DESIGN.md §8; formats: corpora.md §3):
  * `synthetic_2019`: `png/<index>.png` + `json_gt/<index>.json` (the 2019 Adobe synthetic set,
    also what `chartjax-synth chart_info` writes); sub-folders below png/ and json_gt/ (the
    `reorganize_synthetic.py` layout) are searched too. Example id: the annotation file's stem.
  * `pmc_2020`: `annotations_JSON/<class>/<stem>.json` + `images/<class>/<stem>.jpg` (UB-PMC).
    Example id: `<class>/<stem>`.
Only the `train` split is built: the test-set layouts are [unverified]. Tasks a file does not
annotate are marked absent (`has_task<N>`), never filled in (annotations.py).

Per-chart work lives in the pure function `chart_example` so that `_generate_examples` can be
moved onto Apache Beam (list the (id, json, image) triples, then map `chart_example`).
"""

from __future__ import annotations

import json
import os

import numpy as np
import tensorflow_datasets as tfds
from absl import logging

from tfds_builders.common.bad_input import BadInputError, SkipBadMixin
from tfds_builders.common.images import read_rgb_png

from . import annotations

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg")
_DESCRIPTION = """\
CHART-Infographics (ICDAR 2019) and CHART-Info (ICPR 2020/2022) chart-mining annotations: chart
type (task 1), text blocks (2), text roles (3), axes and ticks (4), legend (5), data series and
visual elements (6). Boxes are [x0, y0, width, height] in pixels (top-left origin).
"""
_CITATION = """\
@inproceedings{davila2019icdar,
  title={ICDAR 2019 Competition on Harvesting Raw Tables from Infographics (CHART-Infographics)},
  author={Davila, Kenny and Kota, Bhargava Urala and Setlur, Srirangaraj and Govindaraju, Venu
          and Tensmeyer, Christopher and Shekhar, Sumit and Chaudhry, Ritwick},
  booktitle={ICDAR},
  year={2019}
}
"""


def _seq(fields: dict) -> tfds.features.Sequence:
    return tfds.features.Sequence(fields)


def _vec(n: int) -> tfds.features.Tensor:
    return tfds.features.Tensor(shape=(n,), dtype=np.float32)


def features() -> tfds.features.FeaturesDict:
    text, i32, f32 = tfds.features.Text(), np.int32, np.float32
    return tfds.features.FeaturesDict(
        {
            "id": text,
            "image": tfds.features.Image(shape=(None, None, 3), encoding_format="png"),
            "image_file": text,
            **{f"has_task{k}": np.bool_ for k in range(1, annotations.NUM_TASKS + 1)},
            "chart_type": text,
            "chart_type_raw": text,
            "text_blocks": _seq({"id": i32, "text": text, "polygon": _vec(8), "bbox": _vec(4)}),
            "text_roles": _seq({"id": i32, "role": text}),
            "has_plot_bb": np.bool_,
            "plot_bb": _vec(4),
            "axis_ticks": _seq({"axis": text, "id": i32, "tick_pt": _vec(2)}),
            "axis_tick_types": _seq({"axis": text, "type": text}),
            "legend_pairs": _seq({"id": i32, "bb": _vec(4)}),
            "data_series_json": text,
            "visual_elements_json": text,
            "series_names": tfds.features.Sequence(text),
            "data_points": _seq({"series": i32, "x": text, "y": f32, "y_text": text}),
            "box_stats": _seq(
                {"series": i32, "x": text, **{s: f32 for s in annotations.BOX_STATS}}
            ),
            "bars": tfds.features.Sequence(_vec(4)),
            "lines": _seq({"line": i32, "x": f32, "y": f32}),
            "scatter_points": _seq({"series": i32, "x": f32, "y": f32}),
            "boxplots": _seq({"box": i32, "stat": text, "x": f32, "y": f32, "bb": _vec(4)}),
        }
    )


def chart_example(example_id: str, json_path: str, image_path: str | None, root: str) -> dict:
    """The example of one annotation file; raises BadInputError naming the bad file."""
    try:
        with open(json_path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise BadInputError(json_path, f"cannot parse JSON: {e}") from e
    try:
        parsed = annotations.parse(doc)
    except annotations.AnnotationError as e:
        raise BadInputError(json_path, str(e)) from e
    if image_path is None:
        raise BadInputError(json_path, "no image with this stem (.png/.jpg/.jpeg)")
    return {
        "id": example_id,
        "image": read_rgb_png(image_path, referenced_by=json_path),
        "image_file": os.path.relpath(image_path, root),
        **parsed,
    }


def _index_by_stem(folder: str, extensions: tuple[str, ...]) -> dict[str, str]:
    """stem -> path for files below `folder` (recursive); a stem found twice is an error."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames):
            stem, ext = os.path.splitext(name)
            if ext.lower() not in extensions:
                continue
            path = os.path.join(dirpath, name)
            if stem in found:
                raise BadInputError(path, f"stem {stem!r} also at {found[stem]}")
            found[stem] = path
    return found


def synthetic_2019_items(root: str) -> list[tuple[str, str, str | None]]:
    json_dir, png_dir = os.path.join(root, "json_gt"), os.path.join(root, "png")
    for folder in (json_dir, png_dir):
        if not os.path.isdir(folder):
            raise BadInputError(folder, "missing: synthetic_2019 needs png/ and json_gt/")
    jsons = _index_by_stem(json_dir, (".json",))
    images = _index_by_stem(png_dir, IMAGE_EXTENSIONS)
    unannotated = len(set(images) - set(jsons))
    if unannotated:
        logging.warning("chart_info: %d images in %s have no annotation", unannotated, png_dir)
    return [(stem, jsons[stem], images.get(stem)) for stem in sorted(jsons)]


def pmc_2020_items(root: str) -> list[tuple[str, str, str | None]]:
    json_root, image_root = os.path.join(root, "annotations_JSON"), os.path.join(root, "images")
    for folder in (json_root, image_root):
        if not os.path.isdir(folder):
            raise BadInputError(folder, "missing: pmc_2020 needs annotations_JSON/ and images/")
    items = []
    for chart_class in sorted(os.listdir(json_root)):
        class_dir = os.path.join(json_root, chart_class)
        if not os.path.isdir(class_dir):
            continue
        images = {}
        image_dir = os.path.join(image_root, chart_class)
        if os.path.isdir(image_dir):
            for name in os.listdir(image_dir):
                stem, ext = os.path.splitext(name)
                if ext.lower() in IMAGE_EXTENSIONS:
                    images[stem] = os.path.join(image_dir, name)
        for name in sorted(os.listdir(class_dir)):
            stem, ext = os.path.splitext(name)
            if ext.lower() == ".json":
                path = os.path.join(class_dir, name)
                items.append((f"{chart_class}/{stem}", path, images.get(stem)))
    return items


class Builder(SkipBadMixin, tfds.core.GeneratorBasedBuilder):
    """CHART-Info from a release root; configs `synthetic_2019` and `pmc_2020`."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release."}
    BUILDER_CONFIGS = [
        tfds.core.BuilderConfig(
            name="synthetic_2019", description="ICDAR 2019 synthetic: png/ + json_gt/."
        ),
        tfds.core.BuilderConfig(
            name="pmc_2020",
            description="UB-PMC (ICPR 2020/2022): annotations_JSON/<class>/ + images/<class>/.",
        ),
    ]
    MANUAL_DOWNLOAD_INSTRUCTIONS = """\
    synthetic_2019: unpack the CHART2019-S images and json_gt archives (adobe-research/
    CHART-Synthetic releases, CC BY-NC-ND 4.0) so that the root holds png/ and json_gt/, or
    generate a look-alike with `chartjax-synth chart_info`. pmc_2020: unpack the ICPR 2022
    UB-PMC train zip so that the root holds annotations_JSON/<class>/ and images/<class>/.
    Pass the root as --manual_dir and pick the layout with --config. To skip (and count) charts
    whose JSON or image is bad, set CHARTJAX_SKIP_BAD=1.
    """

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            description=_DESCRIPTION,
            features=features(),
            homepage="https://chartinfo.github.io/",
            citation=_CITATION,
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        root = os.fspath(dl_manager.manual_dir)
        if self.builder_config.name == "synthetic_2019":
            items = synthetic_2019_items(root)
        else:
            items = pmc_2020_items(root)
        if not items:
            raise BadInputError(root, f"no annotation files for {self.builder_config.name}")
        return {"train": self._generate_examples("train", root, items)}

    def _generate_examples(self, split: str, root: str, items):
        num_examples = 0
        for example_id, json_path, image_path in items:
            try:
                example = chart_example(example_id, json_path, image_path, root)
            except BadInputError as e:
                self.skip_ledger.handle(split, e)
                continue
            num_examples += 1
            yield example_id, example
        self.skip_ledger.end_split(split, num_examples)
