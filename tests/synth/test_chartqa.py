"""The ChartQA-style generator: its corpus read back as a consumer of the release would.

Every answer is recomputed here from the chart's `tables/<stem>.csv` (the test's own arithmetic,
not the generator's), every file a question names exists, and the ChartQA builder builds the
corpus with unique ids.
"""

from __future__ import annotations

import csv
import io
import json
import os
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
import tensorflow_datasets as tfds
from PIL import Image

from chartjax.data import tfds_records
from chartjax.synth import chartqa, chartqa_questions
from chartjax.tools.synth import main as synth_main
from tfds_builders.chartqa import chartqa as chartqa_builder

SEED = 11
SIZE = (400, 300)
COUNTS = {"train": 4, "val": 2, "test": 2}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("chartqa_synth") / "ChartQA Dataset"
    chartqa.generate(
        out,
        train_charts=COUNTS["train"],
        val_charts=COUNTS["val"],
        test_charts=COUNTS["test"],
        seed=SEED,
        questions=3,
        size=SIZE,
    )
    return out


def _entries(corpus: Path, folder: str, source: str) -> list[dict]:
    return json.loads((corpus / folder / f"{folder}_{source}.json").read_text())


def _table(path: Path) -> tuple[list[str], dict[str, dict[str, Decimal]]]:
    """(header, {series: {category: value}}) read with the csv module."""
    header, *rows = list(csv.reader(io.StringIO(path.read_text())))
    return header, {s: {r[0]: Decimal(r[j]) for r in rows} for j, s in enumerate(header) if j}


def _expected(kind: str, column: dict[str, Decimal], a: str, b: str):
    """The answer by the test's own arithmetic: a category, Yes/No or a number."""
    if kind == "retrieval":
        return column[a]
    if kind in ("max", "min"):
        pick = max if kind == "max" else min
        return pick(column, key=column.get)
    if kind == "greater":
        return "Yes" if column[a] > column[b] else "No"
    if kind == "difference":
        return abs(column[a] - column[b])
    if kind == "sum":
        return column[a] + column[b]
    return sum(column.values()) / len(column)  # average


def _matches(query: str, source: str, header: list[str], table) -> list[tuple]:
    """Every (kind, series, a, b) whose wording in `source` is exactly `query`."""
    col = chartqa_questions.SOURCES.index(source)
    cats = list(next(iter(table.values())))
    found = []
    for kind, wordings in chartqa_questions.TEMPLATES.items():
        for series in header[1:]:
            for a in cats:
                for b in cats:
                    text = wordings[col].format(x=header[0].lower(), series=series, a=a, b=b)
                    if text == query:
                        found.append((kind, series, a, b))
    return found


def test_layout_counts_and_every_referenced_file_exists(corpus):
    assert sorted(p.name for p in corpus.iterdir()) == ["test", "train", "val"]
    for folder, n in COUNTS.items():
        split = corpus / folder
        assert sorted(p.name for p in split.iterdir()) == [
            "png",
            "tables",
            f"{folder}_augmented.json",
            f"{folder}_human.json",
        ]
        stems = sorted(p.stem for p in (split / "png").iterdir())
        assert stems == sorted(p.stem for p in (split / "tables").iterdir())
        assert sorted(int(s.rsplit("_", 1)[1]) for s in stems) == list(range(n))
        for source in chartqa_questions.SOURCES:
            entries = _entries(corpus, folder, source)
            assert len(entries) == 3 * n  # --questions 3 per chart and file
            for e in entries:
                assert set(e) == {"imgname", "query", "label"}
                assert all(isinstance(v, str) for v in e.values())
                assert (split / "png" / e["imgname"]).is_file()
                assert (split / "tables" / f"{Path(e['imgname']).stem}.csv").is_file()
        for png in (split / "png").iterdir():
            with Image.open(png) as img:
                assert img.size == SIZE


def test_stems_say_how_many_series_the_table_has(corpus):
    for table in corpus.glob("*/tables/*.csv"):
        header, _ = _table(table)
        assert table.stem.startswith("two_col_" if len(header) == 2 else "multi_col_")


def test_every_answer_is_recomputed_from_the_table(corpus):
    kinds = set()
    for folder in COUNTS:
        for source in chartqa_questions.SOURCES:
            for e in _entries(corpus, folder, source):
                header, table = _table(
                    corpus / folder / "tables" / f"{Path(e['imgname']).stem}.csv"
                )
                found = _matches(e["query"], source, header, table)
                assert found, e  # asked in its own file's wording
                kind, series, a, b = found[0]
                # One reading only (the fields a wording leaves out match any value).
                used = {"max": 2, "min": 2, "average": 2, "retrieval": 3}.get(kind, 4)
                assert len({m[:used] for m in found}) == 1, e
                kinds.add(kind)
                want = _expected(kind, table[series], a, b)
                if isinstance(want, str):
                    assert e["label"] == want, e
                    if kind in ("max", "min"):  # the extreme is unique
                        values = list(table[series].values())
                        assert values.count(table[series][want]) == 1
                elif kind == "average":
                    assert abs(Decimal(e["label"]) - want) <= Decimal("0.005"), e
                else:
                    assert Decimal(e["label"]) == want, e
                    assert not e["label"].endswith(".0"), e  # written as ChartQA's labels
    assert kinds == set(chartqa_questions.KINDS)


def test_the_builder_builds_the_corpus_with_unique_ids(corpus, tmp_path):
    builder = chartqa_builder.Builder(data_dir=os.fspath(tmp_path))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            manual_dir=os.fspath(corpus), compute_stats=tfds.download.ComputeStatsMode.SKIP
        )
    )
    splits = {"train": "train", "validation": "val", "test": "test"}
    assert {k: v.num_examples for k, v in builder.info.splits.items()} == {
        split: COUNTS[folder] for split, folder in splits.items()
    }
    for split, folder in splits.items():
        rows = list(tfds_records.split_examples(os.fspath(builder.data_path), split, ()))
        ids = [r["id"].decode() for r in rows]
        assert len(ids) == len(set(ids)) == 2 * 3 * COUNTS[folder]
        first = json.loads((corpus / folder / f"{folder}_human.json").read_text())[0]
        got = {r["id"].decode(): r for r in rows}[f"{split}/human/0"]
        assert (got["query"].decode(), got["label"].decode()) == (first["query"], first["label"])
        stem = Path(first["imgname"]).stem
        assert got["table"].decode() == (corpus / folder / "tables" / f"{stem}.csv").read_text()
        assert got["image"].shape == (SIZE[1], SIZE[0], 3)


def test_same_seed_same_bytes_and_another_seed_differs(corpus, tmp_path):
    again = tmp_path / "again"
    chartqa.generate(again, val_charts=2, seed=SEED, questions=3, size=SIZE)
    for path in sorted((corpus / "val").rglob("*")):
        if path.is_file():
            assert (again / "val" / path.relative_to(corpus / "val")).read_bytes() == (
                path.read_bytes()
            ), path
    other = tmp_path / "other"
    chartqa.generate(other, val_charts=2, seed=SEED + 1, questions=3, size=SIZE)
    assert (other / "val/val_human.json").read_bytes() != (
        corpus / "val/val_human.json"
    ).read_bytes()


def test_the_cli_refuses_a_non_empty_split_folder_unless_told(tmp_path, capsys):
    out = tmp_path / "corpus"
    argv = ["chartqa", "--out", str(out), "--test-charts", "1", "--size", "320x240"]
    assert synth_main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["splits"] == [{"split": "test", "charts": 1, "human": 2, "augmented": 2}]
    before = (out / "test/test_human.json").read_bytes()
    assert synth_main([*argv, "--seed", "5"]) == 2
    assert f"{out / 'test'} exists and is not empty" in capsys.readouterr().err
    assert (out / "test/test_human.json").read_bytes() == before  # left as it was
    assert synth_main([*argv, "--train-charts", "1"]) == 2  # test/ is still in the way
    assert synth_main([*argv, "--seed", "5", "--overwrite"]) == 0
    assert (out / "test/test_human.json").read_bytes() != before
    assert not list(tmp_path.glob("corpus.incomplete-*"))


def test_bad_options_are_named(tmp_path):
    with pytest.raises(ValueError, match="no charts requested"):
        chartqa.generate(tmp_path / "a")
    with pytest.raises(ValueError, match="questions: 1 to 7"):
        chartqa.generate(tmp_path / "a", test_charts=1, questions=8)
    assert not (tmp_path / "a").exists()


def test_numbers_are_written_as_chartqa_labels():
    number = chartqa_questions.number
    assert [number(Decimal(v)) for v in ("19.0", "23.50", "120", "0.00", "-0.0")] == [
        "19",
        "23.5",
        "120",
        "0",
        "0",
    ]
    assert number(Decimal("2.345"), 2) == "2.35"  # half up
    assert number(Decimal(10) / 3, 2) == "3.33"


def test_answers_of_a_hand_made_table():
    table = chartqa_questions.Table.from_csv(
        "Year,Male,Female\n2018,1.25,3.0\n2019,2.5,3.0\n2020,0.75,1.5\n"
    )
    answer = chartqa_questions.answer
    assert answer(table, "retrieval", "Female", "2018") == "3"
    assert answer(table, "max", "Male") == "2019"
    assert answer(table, "max", "Female") is None  # a tie: not asked
    assert answer(table, "min", "Female") == "2020"
    assert answer(table, "greater", "Male", "2018", "2019") == "No"
    assert answer(table, "greater", "Female", "2018", "2019") is None  # equal: not asked
    assert answer(table, "difference", "Male", "2020", "2019") == "1.75"
    assert answer(table, "sum", "Male", "2018", "2019") == "3.75"
    assert answer(table, "average", "Male") == "1.5"
    assert answer(table, "average", "Female") == "2.5"
    assert table.to_csv() == "Year,Male,Female\n2018,1.25,3.0\n2019,2.5,3.0\n2020,0.75,1.5\n"
    rng = np.random.default_rng(0)
    # Distinct kinds, at most one each: of seven, only Female's max and the equal comparison
    # can drop out, so two are always found.
    asked = chartqa_questions.questions(rng, table, "human", 7)
    assert 5 <= len(asked) <= 7 and len({q for q, _ in asked}) == len(asked)
    assert all(label for _, label in asked)
    assert len(chartqa_questions.questions(rng, table, "augmented", 2)) == 2


def test_learning_options_restrict_the_corpus(tmp_path):
    """The options of tools/bench/benches.py's `chartqa_learning`: only the kinds asked, one
    series of at most 2 bars, every chart a two_col_ one; bad values are named."""
    out = tmp_path / "lattice"
    chartqa.generate(
        out,
        test_charts=3,
        seed=SEED,
        questions=1,
        size=(576, 416),
        kinds=("retrieval",),
        types=["Grouped_vertical_bar"],
        max_categories=2,
        max_series=1,
        value_labels=20,
        text_grid=32,
        tick_size=20,
    )
    assert sorted(p.stem for p in (out / "test/png").iterdir()) == [
        f"two_col_{i}" for i in range(3)
    ]
    for source in chartqa_questions.SOURCES:
        for e in _entries(out, "test", source):
            header, table = _table(out / "test/tables" / f"{Path(e['imgname']).stem}.csv")
            assert len(header) == 2 and len(table[header[1]]) <= 2
            ((kind, series, a, _), *_) = _matches(e["query"], source, header, table)
            assert kind == "retrieval" and Decimal(e["label"]) == table[series][a]
    with pytest.raises(ValueError, match="kinds: distinct question kinds"):
        chartqa.generate(tmp_path / "b", test_charts=1, kinds=("retrieval", "median"))
    with pytest.raises(ValueError, match="questions: 1 to 2"):
        chartqa.generate(tmp_path / "b", test_charts=1, questions=3, kinds=("max", "min"))
    with pytest.raises(ValueError, match="ChartQA's generator draws"):
        chartqa.generate(tmp_path / "b", test_charts=1, types=["Pie"])
