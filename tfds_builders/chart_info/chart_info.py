"""ICDAR 2019 CHART-Infographics / CHART-Info 2020-2022 as TFDS, one example per chart.

`manual_dir` is the release root of one layout (docs/design.md §8; formats: docs/corpora.md §3):
  * `synthetic_2019`: `png/<index>.png` + `json_gt/<index>.json` (the 2019 Adobe synthetic set,
    also what `chartjax-synth chart_info` writes); sub-folders below png/ and json_gt/ (the
    `reorganize_synthetic.py` layout) are searched too. Example id: the annotation file's stem.
  * `pmc_2020`: `annotations_JSON/<class>/<stem>.json` + `images/<class>/<stem>.jpg` (UB-PMC).
    Example id: `<class>/<stem>`.
Only the `train` split is built: the test-set layouts are [unverified]. Tasks a file does not
annotate are marked absent (`has_task<N>`), never filled in (annotations.py).

Per-chart work lives in the pure function `chart_example`. When the build is given Beam options
(`tfds build ... --beam_pipeline_options=...`), `_generate_examples` returns a Beam transform
mapping it over the (id, json, image) triples; otherwise it stays a plain generator. Both give
the same examples and the same skip counts (see `beam_examples`). Beam builds run with
`common.beam_build`'s guards (Beam 2.77's local runner can drop data between stages).
"""

from __future__ import annotations

import importlib
import json
import os

import numpy as np
import tensorflow_datasets as tfds
from absl import logging
from etils import epath

from tfds_builders.common import beam_build, config_choice, input_fingerprint, record_format
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


class Builder(
    config_choice.RequireConfigMixin,
    input_fingerprint.InputFingerprintMixin,
    SkipBadMixin,
    record_format.ArrayRecordDefault,
    tfds.core.GeneratorBasedBuilder,
):
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

    def _download_and_prepare(self, dl_manager, download_config=None):
        # tfds 4.9.10 hands the Beam runner/options only to its split writer: note here whether
        # the build has any, so that `_generate_examples` can choose Beam. Beam builds get a
        # lossless local data plane, and their written counts are checked against the workers'.
        self._use_beam = beam_build.prepare_beam_build(download_config)
        self._beam_counts = None
        super()._download_and_prepare(dl_manager, download_config=download_config)
        if self._use_beam:
            beam_build.check_no_examples_lost(self.name, self.info.splits, self._beam_counts)

    def _generate_examples(self, split: str, root: str, items):
        if getattr(self, "_use_beam", False):
            messages_path = epath.Path(self.data_dir) / _SKIP_MESSAGES_GLOB.replace("*", split)
            return beam_examples(split, root, items, self.skip_ledger.skip_bad, messages_path)
        return self._iter_examples(split, root, items)

    def _process_pipeline_result(self, pipeline_result) -> None:
        """Moves what the Beam workers skipped into the ledger, as the generator path keeps it."""
        beam = tfds.core.lazy_imports.apache_beam
        query = pipeline_result.metrics().query(
            beam.metrics.MetricsFilter().with_namespace(_BEAM_NAMESPACE)
        )
        for result in query["counters"]:
            kind, split = result.key.metric.name.split(":", 1)
            if kind == "skipped":
                self.skip_ledger.counts[split] += result.committed
        self._beam_counts = beam_build.example_counts(pipeline_result, _BEAM_NAMESPACE)
        examples = self._beam_counts or {}
        for path in sorted(epath.Path(self.data_dir).glob(_SKIP_MESSAGES_GLOB)):
            room = _MAX_SKIP_MESSAGES - len(self.skip_ledger.messages)
            self.skip_ledger.messages.extend(json.loads(path.read_text())[: max(room, 0)])
            path.unlink()  # not part of the dataset
        for split in sorted(set(examples) | set(self.skip_ledger.counts)):
            self.skip_ledger.end_split(split, examples.get(split, 0))

    def _iter_examples(self, split: str, root: str, items):
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


# ---------------------------------------------------------------------------------------------
# Apache Beam
# ---------------------------------------------------------------------------------------------

_MODULE = "tfds_builders.chart_info.chart_info"
_BEAM_NAMESPACE = "chart_info"
_SKIPPED = "skipped"
# Skip messages kept in the report, as SkipLedger keeps them (the counts are always complete).
_MAX_SKIP_MESSAGES = 50
# Written by the pipeline into the temporary build folder; read and removed after it has run.
_SKIP_MESSAGES_GLOB = "beam_skipped_*.json"


def beam_examples(split: str, root: str, items, skip_bad: bool, messages_path: str | os.PathLike):
    """A Beam transform () -> (id, example) over the (id, json, image) triples of one split.

    Bad charts raise (the error names the file), or with `skip_bad` are counted in Beam
    counters (`skipped:<split>`, beside `examples:<split>`) and their messages, the first
    `_MAX_SKIP_MESSAGES` in sorted order, written to `messages_path` for
    `Builder._process_pipeline_result`: the workers cannot reach the builder's SkipLedger, and
    Beam's string-set metric is not merged across bundles by the DirectRunner (Beam 2.77).
    A split whose every chart is bad fails in tfds's Beam writer ("The total number of
    generated examples is 0"), before the ledger sees the counts; the workers log each skip.
    """
    beam = tfds.core.lazy_imports.apache_beam
    # `tfds build <folder>` imports this file as `chart_info.chart_info` (its parent folder put
    # on sys.path), a name that separate Beam worker processes cannot import. The functions
    # handed to Beam are therefore taken from the installed module, which workers can import.
    mod = importlib.import_module(_MODULE)

    @beam.ptransform_fn
    def charts(pipeline):
        results = (
            pipeline
            | "Create" >> beam.Create(list(items))
            | "Reshuffle" >> beam.Reshuffle()
            | "Examples"
            >> beam.FlatMap(mod.beam_chart, split, root, skip_bad).with_outputs(
                _SKIPPED, main="examples"
            )
        )
        if skip_bad:
            _ = (
                results[_SKIPPED]
                | "FirstMessages" >> beam.combiners.Top.Smallest(_MAX_SKIP_MESSAGES)
                | "WriteMessages" >> beam.Map(mod.write_json, messages_path)
            )
        return results.examples

    return charts()


def beam_chart(item, split: str, root: str, skip_bad: bool):
    """`chart_example` in a Beam worker; see `beam_examples` for bad charts."""
    beam = tfds.core.lazy_imports.apache_beam
    example_id, json_path, image_path = item
    try:
        example = chart_example(example_id, json_path, image_path, root)
    except BadInputError as e:
        if not skip_bad:
            raise
        logging.warning("chart_info: skipping bad example in split %s: %s", split, e)
        beam.metrics.Metrics.counter(_BEAM_NAMESPACE, f"skipped:{split}").inc()
        yield beam.pvalue.TaggedOutput(_SKIPPED, f"{split}: {e}")
        return
    beam.metrics.Metrics.counter(_BEAM_NAMESPACE, f"examples:{split}").inc()
    yield example_id, example


def write_json(value, path: str | os.PathLike) -> None:
    # Beam 2.78+ checks side arguments against this hint when the pipeline is built: the builder
    # passes an epath path, callers of `beam_examples` may pass pathlib's, so the hint names both.
    epath.Path(path).write_text(json.dumps(value, ensure_ascii=False))
