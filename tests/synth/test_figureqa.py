"""End-to-end checks of the FigureQA-style generator on a small rendered corpus.

One corpus is generated in-process with 1 worker and again through the CLI with 2 workers
(module-scoped fixtures); the tests read the files back as a consumer of the release would.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from chartjax.synth.figureqa import generate
from chartjax.synth.figureqa_data import color_set, load_colors, scheme_set
from chartjax.synth.figureqa_questions import TEMPLATES
from chartjax.tools.synth import main as synth_main
from tests.synth.figureqa_oracle import answer

SEED = 7
SIZES = {"train_images": 10, "val_images": 3, "test_images": 3}
ALL_SPLITS = ["train1", "validation1", "validation2", "no_annot_test1", "no_annot_test2"]
ANSWERED = ["train1", "validation1", "validation2"]
TEST_SPLITS = ["no_annot_test1", "no_annot_test2"]
TYPES = {"vbar_categorical", "hbar_categorical", "pie", "line", "dot_line"}
QA_KEYS = {
    "image_index",
    "question_id",
    "question_string",
    "answer",
    "color1_name",
    "color1_id",
    "color1_rgb",
    "color2_name",
    "color2_id",
    "color2_rgb",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("figureqa_w1")
    generate(out, seed=SEED, workers=1, **SIZES)
    return out


@pytest.fixture(scope="module")
def corpus_cli_2workers(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("figureqa_w2")
    argv = ["figureqa", "--out", str(out), "--seed", str(SEED), "--workers", "2"]
    argv += ["--train-images", "10", "--val-images", "3", "--test-images", "3"]
    assert synth_main(argv) == 0
    return out


def _load(path: Path):
    with open(path) as f:
        return json.load(f)


def _answered(corpus: Path, split: str) -> tuple[list[dict], list[dict]]:
    """(annotations, qa_pairs with answers) of a split, test answers from the answer keys."""
    base = corpus / ("testset_with_answers" if split in TEST_SPLITS else "") / split
    return _load(base / "annotations.json"), _load(base / "qa_pairs.json")["qa_pairs"]


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_layout_and_schema(corpus):
    assert sorted(p.name for p in corpus.iterdir()) == sorted(ALL_SPLITS + ["testset_with_answers"])
    colors = load_colors()
    for split in ALL_SPLITS:
        n = SIZES["train_images"] if split == "train1" else SIZES["val_images"]
        d = corpus / split
        assert sorted(p.name for p in (d / "png").iterdir()) == sorted(f"{i}.png" for i in range(n))
        assert (d / "annotations.json").exists() == (split not in TEST_SPLITS)
        doc = _load(d / "qa_pairs.json")
        assert set(doc) == {"qa_pairs", "total_distinct_questions", "total_distinct_colors"}
        assert doc["total_distinct_questions"] == 15 and doc["total_distinct_colors"] == 100
        pairs = doc["qa_pairs"]
        want_keys = QA_KEYS - {"answer"} if split in TEST_SPLITS else QA_KEYS
        # QAs of one image are contiguous and every image has some.
        seen = [p["image_index"] for p in pairs]
        assert seen == sorted(seen) and set(seen) == set(range(n))
        for p in pairs:
            assert set(p) == want_keys
            assert isinstance(p["question_id"], int) and 0 <= p["question_id"] <= 14
            c1 = colors[p["color1_id"]]
            assert (p["color1_name"], p["color1_rgb"]) == (c1.name, c1.rgb)
            if p["color2_id"] == -1:
                assert (p["color2_name"], p["color2_rgb"]) == ("--None--", [-1, -1, -1])
                c2_name = ""
            else:
                c2 = colors[p["color2_id"]]
                assert (p["color2_name"], p["color2_rgb"]) == (c2.name, c2.rgb)
                c2_name = c2.name
            template = TEMPLATES[p["question_id"]]
            assert p["question_string"] == template.format(c1=c1.name, c2=c2_name)
            assert ("{c2}" in template) == (p["color2_id"] != -1)
            if "answer" in p:
                assert p["answer"] in (0, 1) and type(p["answer"]) is int
        if split in TEST_SPLITS:
            keys = _load(corpus / "testset_with_answers" / split / "qa_pairs.json")["qa_pairs"]
            assert [{k: v for k, v in q.items() if k != "answer"} for q in keys] == pairs
            assert all(q["answer"] in (0, 1) for q in keys)


def test_annotations_real_file_shape(corpus):
    for split in ALL_SPLITS:
        anns, _ = _answered(corpus, split)
        assert [a["image_index"] for a in anns] == list(range(len(anns)))
        counts = Counter(a["type"] for a in anns)
        assert set(counts) <= TYPES and max(counts.values()) - min(counts.values()) <= 1
        for a in anns:
            assert set(a) == {"type", "image_index", "models", "general_figure_info"}
            info = a["general_figure_info"]
            fig = info["figure_info"]["bbox"]["bbox"]  # double-nested as the real v1.0.0 files
            assert fig["h"] == 400 and 400 <= fig["w"] <= 800 and fig["x"] == fig["y"] == 0
            with Image.open(corpus / split / "png" / f"{a['image_index']}.png") as im:
                assert im.mode == "RGB" and im.size == (fig["w"], fig["h"])
            assert info["title"]["text"] == "title"
            assert {"plot_info", "legend"} <= set(info)
            if a["type"] == "pie":
                assert "x_axis" not in info and "y_axis" not in info
                assert all(
                    set(m) == {"name", "label", "color", "bbox", "span", "start", "end"}
                    for m in a["models"]
                )
                assert sum(m["span"] for m in a["models"]) == pytest.approx(2 * np.pi)
            else:
                for axis, text in (("x_axis", "xaxis_label"), ("y_axis", "yaxis_label")):
                    ax = info[axis]
                    assert ax["label"]["text"] == text
                    assert set(ax) == {
                        "label",
                        "major_labels",
                        "major_ticks",
                        "minor_ticks",
                        "rule",
                    }
                    assert (
                        len(ax["major_labels"]["values"]) == len(ax["major_labels"]["bboxes"]) > 1
                    )
                    assert ax["major_ticks"]["values"] == ax["major_labels"]["values"]
            for key in ("x_gridlines", "y_gridlines"):
                if key in info:
                    assert len(info[key]["values"]) == len(info[key]["bboxes"]) > 0
            if a["type"] in ("vbar_categorical", "hbar_categorical"):
                (bars,) = a["models"]
                assert set(bars) == {"name", "labels", "colors", "bboxes", "x", "y", "width"}
                names, values = (
                    (bars["x"], bars["y"])
                    if a["type"] == "vbar_categorical"
                    else (bars["y"], bars["x"])
                )
                assert names == bars["labels"] and 2 <= len(names) <= 10
                assert all(isinstance(v, float) for v in values)
            elif a["type"] in ("line", "dot_line"):
                assert 2 <= len(a["models"]) <= 7
                for m in a["models"]:
                    assert set(m) == {"name", "label", "color", "bboxes", "x", "y"}
                    assert 5 <= len(m["x"]) == len(m["y"]) <= 20
                    assert len(m["bboxes"]) == len(m["x"]) - (a["type"] == "line")
            legend_models = [item["model"] for item in info["legend"]["items"]]
            assert legend_models == [it["label"]["text"] for it in info["legend"]["items"]]


def _boxes(node):
    """Every bbox dict anywhere in an annotation."""
    if isinstance(node, dict):
        if set(node) == {"x", "y", "w", "h"}:
            yield node
        else:
            for v in node.values():
                yield from _boxes(v)
    elif isinstance(node, list):
        for v in node:
            yield from _boxes(v)


def test_every_bbox_inside_image(corpus):
    n_boxes = 0
    for split in ALL_SPLITS:
        anns, _ = _answered(corpus, split)
        for a in anns:
            fig = a["general_figure_info"]["figure_info"]["bbox"]["bbox"]
            for b in _boxes(a):
                n_boxes += 1
                assert b["w"] >= 0 and b["h"] >= 0, b
                assert b["x"] >= 0 and b["y"] >= 0, (split, a["image_index"], b)
                assert b["x"] + b["w"] <= fig["w"] and b["y"] + b["h"] <= fig["h"], (
                    split,
                    a["image_index"],
                    b,
                )
    assert n_boxes > 1000


def _hex(pixel) -> str:
    return "#" + "".join(f"{int(v):02X}" for v in pixel)


def test_legend_inside_the_plot_or_clear_of_it(corpus):
    """An inside legend stays within the plot area; an outside one does not overlap it."""
    inside = outside = 0
    for split in ALL_SPLITS:
        anns, _ = _answered(corpus, split)
        for a in anns:
            info = a["general_figure_info"]
            lg, plot = info["legend"]["bbox"], info["plot_info"]["bbox"]
            lx0, ly0, lx1, ly1 = lg["x"], lg["y"], lg["x"] + lg["w"], lg["y"] + lg["h"]
            px0, py0, px1, py1 = plot["x"], plot["y"], plot["x"] + plot["w"], plot["y"] + plot["h"]
            if px0 <= lx0 and lx1 <= px1 and py0 <= ly0 and ly1 <= py1:
                inside += 1
                assert lg["w"] <= 0.6 * plot["w"] + 1e-6 and lg["h"] <= 0.6 * plot["h"] + 1e-6
            else:
                outside += 1
                assert lx1 <= px0 or lx0 >= px1 or ly1 <= py0 or ly0 >= py1, (
                    split,
                    a["image_index"],
                )
    assert inside and outside


def test_bboxes_locate_the_drawn_colours(corpus):
    """Bar and legend-swatch boxes come from the drawing: their centre pixel has the element's
    colour (unless an inside legend covers a bar)."""
    checked = 0
    for split in ANSWERED:
        anns, _ = _answered(corpus, split)
        for a in anns:
            rgb = np.asarray(Image.open(corpus / split / "png" / f"{a['image_index']}.png"))
            info = a["general_figure_info"]
            lg = info["legend"]["bbox"]

            def centre(b):
                return int(b["y"] + b["h"] / 2), int(b["x"] + b["w"] / 2)

            def in_legend(y, x, lg=lg):
                return lg["x"] <= x <= lg["x"] + lg["w"] and lg["y"] <= y <= lg["y"] + lg["h"]

            hexes = {}
            if a["type"] in ("vbar_categorical", "hbar_categorical"):
                (bars,) = a["models"]
                hexes = dict(zip(bars["labels"], bars["colors"]))
                for box, hexcode in zip(bars["bboxes"], bars["colors"]):
                    y, x = centre(box)
                    if not in_legend(y, x):
                        assert _hex(rgb[y, x]) == hexcode
                        checked += 1
            elif a["type"] == "pie":
                hexes = {m["label"]: m["color"] for m in a["models"]}
            for item in info["legend"]["items"]:
                if item["model"] in hexes:  # patch swatches are filled rectangles
                    y, x = centre(item["preview"]["bbox"])
                    assert _hex(rgb[y, x]) == hexes[item["model"]]
                    checked += 1
    assert checked > 20


def test_answers_rederived_from_annotations(corpus):
    per_template = Counter()
    for split in ALL_SPLITS:
        anns, pairs = _answered(corpus, split)
        for qa in pairs:
            assert answer(anns[qa["image_index"]], qa) == qa["answer"], (split, qa)
            per_template[qa["question_id"]] += 1
    assert set(per_template) == set(range(15))


def test_yes_no_balanced_per_template(corpus):
    for split in ALL_SPLITS:
        _, pairs = _answered(corpus, split)
        counts = Counter((q["question_id"], q["answer"]) for q in pairs)
        for qid in range(15):
            assert counts[qid, 0] == counts[qid, 1], (split, qid, counts)


def test_colour_schemes_per_split(corpus):
    for split in ALL_SPLITS:
        scheme = 2 if split in ("validation2", "no_annot_test2") else 1
        anns, pairs = _answered(corpus, split)
        for a in anns:
            allowed = {c.name for c in color_set(scheme_set(a["type"], scheme))}
            names = [it["model"] for it in a["general_figure_info"]["legend"]["items"]]
            assert set(names) <= allowed, (split, a["type"], names)
            assert len(set(names)) == len(names)
        for qa in pairs:
            allowed = {c.id for c in color_set(scheme_set(anns[qa["image_index"]]["type"], scheme))}
            assert qa["color1_id"] in allowed and qa["color2_id"] in allowed | {-1}


@pytest.mark.slow
def test_deterministic_across_worker_counts(corpus, corpus_cli_2workers):
    one, two = _files(corpus), _files(corpus_cli_2workers)
    assert sorted(one) == sorted(two)
    differing = [name for name in one if one[name] != two[name]]
    assert differing == []


def test_refuses_to_overwrite(corpus, tmp_path):
    (tmp_path / "train1").mkdir()
    (tmp_path / "train1" / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="train1"):
        generate(tmp_path, train_images=1, seed=0)
    assert (tmp_path / "train1" / "keep.txt").exists()
    # A later split's folder is checked before the first figure is drawn.
    answers = tmp_path / "other" / "testset_with_answers" / "no_annot_test2"
    answers.mkdir(parents=True)
    (answers / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="testset_with_answers/no_annot_test2"):
        generate(tmp_path / "other", train_images=1, test_images=1, seed=0)
    assert [p.name for p in (tmp_path / "other").iterdir()] == ["testset_with_answers"]
    assert list(tmp_path.glob("*.incomplete-*")) == []


def _dies_at(monkeypatch, split: str, index: int) -> None:
    import chartjax.synth.figureqa as figureqa

    real = figureqa.make_image

    def make_image(job):
        if (job.split, job.index) == (split, index):
            raise OSError(28, "No space left on device")
        return real(job)

    monkeypatch.setattr(figureqa, "make_image", make_image)


def test_a_run_that_dies_leaves_no_partial_split(tmp_path, monkeypatch):
    """Dying in validation1 used to leave train1 whole and validation1 half written (an
    annotations.json cut after one figure) where the builder would read them."""
    _dies_at(monkeypatch, "validation1", 1)
    with pytest.raises(OSError, match="No space left"):
        generate(tmp_path / "fq", train_images=2, val_images=2, seed=0)
    assert list(tmp_path.iterdir()) == []  # neither fq/ nor fq.incomplete-*


def test_overwrite_replaces_a_split_only_once_the_new_one_is_complete(tmp_path, monkeypatch):
    out = tmp_path / "fq"
    generate(out, train_images=2, test_images=1, seed=0)
    before = _files(out)
    _dies_at(monkeypatch, "no_annot_test2", 0)
    with pytest.raises(OSError, match="No space left"):
        generate(out, train_images=3, test_images=1, seed=1, overwrite=True)
    assert _files(out) == before and list(tmp_path.iterdir()) == [out]
    monkeypatch.undo()
    generate(out, train_images=3, test_images=1, seed=1, overwrite=True)
    fresh = tmp_path / "fresh"
    generate(fresh, train_images=3, test_images=1, seed=1)
    assert _files(out) == _files(fresh)  # the same bytes as a run into an empty folder
