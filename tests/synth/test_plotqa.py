"""The PlotQA-style generator: its corpus read back as a consumer of the release would.

Every answer is recomputed here from the plot's `annotations.json` entry (through the table the
builder derives, with the test's own arithmetic), every plot has its image, question ids are
unique, and the PlotQA builder builds the corpus (one split's images packed as png.tar.gz).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import tarfile
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
import tensorflow_datasets as tfds

from chartjax.data import tfds_records
from chartjax.synth import plotqa
from chartjax.tools.synth import main as synth_main
from tfds_builders.plotqa import plotqa as plotqa_builder
from tfds_builders.plotqa.plotqa_table import plot_table

SEED = 5
SIZE = (400, 300)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("plotqa_synth")
    plotqa.generate(root / "plain", train_plots=4, test_plots=2, seed=SEED, size=SIZE)
    plotqa.generate(root / "packed", val_plots=2, seed=SEED, size=SIZE, pack_images=True)
    os.rename(root / "packed" / "val", root / "plain" / "val")
    return root / "plain"


def _pairs(corpus: Path, folder: str, version: str) -> list[dict]:
    return json.loads((corpus / folder / f"qa_pairs_{version}.json").read_text())["qa_pairs"]


def _regex(wording: str, fields: dict[str, list[str]]) -> re.Pattern:
    """The wording as a regex whose fields match only the plot's own names."""
    parts = re.split(r"(\{\w+\})", wording)
    out = []
    for p in parts:
        if p.startswith("{"):
            names = sorted(fields[p[1:-1]], key=len, reverse=True)
            out.append(f"(?P<{p[1:-1]}>" + "|".join(map(re.escape, names)) + ")")
        else:
            out.append(re.escape(p))
    return re.compile("".join(out) + "$")


def _expected(pair: dict, entry: dict):
    """The answer by the test's own arithmetic on the table derived from the annotation."""
    header, *rows = list(csv.reader(io.StringIO(plot_table(entry))))
    if pair["template"] == "structural":
        return len(header) - 1
    axes = entry["general_figure_info"]
    value_axis = "x_axis" if entry["type"] == "hbar_categorical" else "y_axis"
    fields = {
        "series": header[1:],
        "a": [r[0] for r in rows],
        "x": [header[0].lower()],
        "y": [axes[value_axis]["label"]["text"]],
    }
    fields["b"] = fields["a"]
    match = _regex(plotqa.KINDS[pair["qid"]][1], fields).match(pair["question_string"])
    assert match, pair
    col = header.index(match["series"])
    values = {r[0]: Decimal(r[col]) for r in rows}
    kind = pair["qid"]
    if kind == "retrieval":
        return values[match["a"]]
    if kind in ("max", "min"):
        best = (max if kind == "max" else min)(values.values())
        return next(c for c, v in values.items() if v == best)
    if kind == "greater":
        return "Yes" if values[match["a"]] > values[match["b"]] else "No"
    if kind == "difference":
        return abs(values[match["a"]] - values[match["b"]])
    if kind == "sum":
        return values[match["a"]] + values[match["b"]]
    mean = sum(values.values()) / len(values)
    return mean.quantize(Decimal("0.01"), ROUND_HALF_UP)


@pytest.mark.parametrize("folder", ["train", "val", "test"])
def test_answers_recomputed_from_the_annotations(corpus, folder):
    entries = {
        e["image_index"]: e for e in json.loads((corpus / folder / "annotations.json").read_text())
    }
    pairs = _pairs(corpus, folder, "V2")
    assert {p["template"] for p in pairs} >= {"structural", "data_retrieval", "arithmetic"}
    for pair in pairs:
        expected = _expected(pair, entries[pair["image_index"]])
        if isinstance(expected, Decimal):
            assert isinstance(pair["answer"], int | float), pair
            assert Decimal(str(pair["answer"])) == expected, pair
        else:
            assert pair["answer"] == expected, pair
        assert pair["type"] == entries[pair["image_index"]]["type"]


def test_v1_is_the_v2_pairs_of_its_templates_and_ids_are_unique(corpus):
    for folder in ("train", "val", "test"):
        v1, v2 = _pairs(corpus, folder, "V1"), _pairs(corpus, folder, "V2")
        ids = [p["question_id"] for p in v2]
        assert len(ids) == len(set(ids))
        assert v1 == [p for p in v2 if p["template"] in plotqa.V1_TEMPLATES]
        assert {p["template"] for p in v1} == set(plotqa.V1_TEMPLATES)
        # not ordered by plot
        assert [p["image_index"] for p in v2] != sorted(p["image_index"] for p in v2)


def test_every_plot_has_its_image(corpus):
    for folder in ("train", "test"):
        indices = {
            e["image_index"] for e in json.loads((corpus / folder / "annotations.json").read_text())
        }
        assert {int(p.stem) for p in (corpus / folder / "png").iterdir()} == indices
        assert {p["image_index"] for p in _pairs(corpus, folder, "V2")} <= indices
    with tarfile.open(corpus / "val" / "png.tar.gz") as tar:
        assert sorted(m.name for m in tar) == ["png/0.png", "png/1.png"]


def test_the_builder_builds_it_with_unique_ids(corpus, tmp_path):
    builder = plotqa_builder.Builder(data_dir=os.fspath(tmp_path), config="v2")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            manual_dir=os.fspath(corpus), compute_stats=tfds.download.ComputeStatsMode.SKIP
        )
    )
    for split, folder in (("train", "train"), ("validation", "val"), ("test", "test")):
        rows = list(tfds_records.split_examples(os.fspath(builder.data_path), split))
        ids = [r["id"].decode() for r in rows]
        assert len(ids) == len(set(ids)) == len(_pairs(corpus, folder, "V2"))
        assert all(i.startswith(f"v2/{split}/") for i in ids)


def test_deterministic_and_refuses_a_non_empty_out(corpus, tmp_path):
    again = tmp_path / "again"
    plotqa.generate(again, train_plots=4, test_plots=2, seed=SEED, size=SIZE)
    for name in ("annotations.json", "qa_pairs_V2.json", "png/3.png"):
        assert (again / "train" / name).read_bytes() == (corpus / "train" / name).read_bytes()
    argv = ["plotqa", "--out", os.fspath(again), "--train-plots", "1", "--size", "400x300"]
    assert synth_main(argv) == 2  # not empty: refused
    assert (again / "test").is_dir()
