"""The FigureQA generator's options for quick learning checks (`Options`, chartjax-synth flags).

They narrow the corpus (one figure type, few elements, a template or two, a handful of colours)
and must leave the release output alone: options that do not bind write the same bytes.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from chartjax.synth.figureqa import FIGURE_TYPES, Options, generate
from chartjax.synth.figureqa_data import color_set, palette_subset
from chartjax.synth.figureqa_questions import NUM_TEMPLATES
from chartjax.tools.synth import main as synth_main

SIZES = {"train_images": 6, "val_images": 2}


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_options_that_do_not_bind_write_the_release_bytes(tmp_path):
    generate(tmp_path / "release", seed=3, **SIZES)
    loose = Options(
        figure_types=FIGURE_TYPES,
        max_elements=10,  # the most any figure type has
        templates=tuple(range(NUM_TEMPLATES)),
        colors_per_set=50,  # a whole colour set
    )
    generate(tmp_path / "loose", seed=3, options=loose, **SIZES)
    release, other = _files(tmp_path / "release"), _files(tmp_path / "loose")
    assert release.keys() == other.keys() and len(release) > 10
    assert [k for k in release if release[k] != other[k]] == []


def test_sanity_corpus_options_through_the_cli(tmp_path):
    argv = ["figureqa", "--out", str(tmp_path), "--seed", "1", "--workers", "1"]
    argv += ["--train-images", "12", "--val-images", "4", "--figure-types", "vbar_categorical"]
    argv += ["--max-elements", "3", "--templates", "0,1", "--colors-per-set", "4"]
    assert synth_main(argv) == 0
    allowed = {
        1: {c.hex for c in palette_subset(color_set("A"), 4)},  # vbar: set A in scheme 1
        2: {c.hex for c in palette_subset(color_set("B"), 4)},
    }
    assert len(allowed[1]) == 4 and not allowed[1] & allowed[2]
    for split, scheme in (("train1", 1), ("validation1", 1), ("validation2", 2)):
        annotations = json.loads((tmp_path / split / "annotations.json").read_text())
        qa = json.loads((tmp_path / split / "qa_pairs.json").read_text())["qa_pairs"]
        assert {a["type"] for a in annotations} == {"vbar_categorical"}
        for a in annotations:
            (bars,) = a["models"]
            assert 2 <= len(bars["colors"]) <= 3
            assert set(bars["colors"]) <= allowed[scheme]
        assert {q["question_id"] for q in qa} == {0, 1}
        counts = Counter((q["question_id"], q["answer"]) for q in qa)
        assert counts[(0, 0)] == counts[(0, 1)] and counts[(1, 0)] == counts[(1, 1)]


def test_palette_subset_spreads_over_the_set():
    palette = color_set("A")
    assert palette_subset(palette, None) == palette
    assert palette_subset(palette, len(palette)) == palette
    four = palette_subset(palette, 4)
    assert [c.id for c in four] == [palette[i].id for i in (0, 12, 25, 37)]


@pytest.mark.parametrize(
    "options, message",
    [
        (Options(figure_types=("scatter",)), "figure_types"),
        (Options(max_elements=1), "max_elements"),
        (Options(figure_types=("line",), templates=(0, 1)), "applies to line"),
        (Options(templates=(15,)), "templates"),
        (Options(colors_per_set=5), "colors_per_set"),  # bars can have 10 elements
        (Options(max_elements=3, colors_per_set=2), "colors_per_set"),
    ],
)
def test_options_that_cannot_make_a_corpus_are_refused(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        generate(tmp_path, seed=0, options=options, **SIZES)
    assert not any(tmp_path.iterdir())  # refused before any folder
