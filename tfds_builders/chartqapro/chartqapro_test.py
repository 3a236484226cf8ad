"""ChartQAPro builder on dummy_data/ (the HF release layout, synthetic rows; make_dummy_data.py),
its `tfds:chartqapro:test` references through chartjax-score and its chartjax-infer prompts.

Expected values are written out by hand from the fixture.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow_datasets as tfds
from etils import epath
from PIL import Image

from chartjax.data import tfds_records
from chartjax.tasks import chartqapro as chartqapro_task
from chartjax.tools import score
from tfds_builders.chartqapro import chartqapro
from tfds_builders.common.bad_input import REPORT_NAME, BadInputError
from tfds_builders.common.input_fingerprint import FINGERPRINT_NAME

DUMMY = Path(__file__).resolve().parent / "dummy_data"
SHARDS = sorted((DUMMY / "data").glob("test-*.parquet"))
RED, BLUE, WHITE = (200, 30, 30), (30, 30, 200), (255, 255, 255)


class ChartqaproBuilderTest(tfds.testing.DatasetBuilderTestCase):
    """TFDS's own checks: registration, shapes/dtypes vs features, exact split sizes, reload."""

    DATASET_CLASS = chartqapro.Builder
    SPLITS = {"test": 7}  # rows of the two shards
    SKIP_CHECKSUMS = True  # manual_dir only, nothing downloaded

    def _make_builder(self, config=None):
        # TFDS's checks read with as_dataset, which array_record (the default) cannot serve.
        return self.dataset_class(
            data_dir=self.tmp_dir, config=config, version=self.VERSION, file_format="tfrecord"
        )


def _build(manual_dir: Path, data_dir: Path, **kwargs) -> tfds.core.DatasetBuilder:
    builder = chartqapro.Builder(data_dir=os.fspath(data_dir), **kwargs)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            manual_dir=os.fspath(manual_dir), compute_stats=tfds.download.ComputeStatsMode.SKIP
        )
    )
    return builder


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("chartqapro_data")
    return data_dir, _build(DUMMY, data_dir)


@pytest.fixture(scope="module")
def built(build) -> dict[str, dict]:
    _, builder = build
    rows = tfds_records.split_examples(
        os.fspath(builder.data_path), "test", skip_decoding=("image",)
    )
    return {ex["id"].decode(): ex for ex in rows}


def _texts(values) -> list[str]:
    return [v.decode() for v in values]


def _release_table() -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in SHARDS])


def test_one_record_per_row_ids_are_row_indexes_across_shards(built):
    assert sorted(built) == [f"test/{i}" for i in range(7)]
    types = {k: ex["question_type"].decode() for k, ex in built.items()}
    assert types == {
        "test/0": "Factoid",
        "test/1": "Multi Choice",
        "test/2": "Conversational",
        "test/3": "Fact Checking",
        "test/4": "Hypothetical",  # the first row of the second shard
        "test/5": "Factoid",
        "test/6": "Factoid",
    }


def test_questions_answers_year_flags_and_paragraphs(built):
    conv = built["test/2"]
    assert _texts(conv["question"]) == [
        "What is the highest value?",
        "Which country has it?",
        "Which country ranked second?",
    ]
    assert _texts(conv["answer"]) == ["80", "Japan", "South Korea"]
    assert conv["paragraph"] == b"The survey covered five countries."
    assert _texts(built["test/0"]["question"]) == ["What was the share of online sales in 2021?"]
    assert _texts(built["test/0"]["answer"]) == ["34.5"]
    assert _texts(built["test/6"]["answer"]) == ["[2015, 2016]"]
    assert _texts(built["test/6"]["year"]) == ["YES", "YES"]
    assert _texts(built["test/5"]["year"]) == ["YES"]
    assert _texts(built["test/1"]["year"]) == ["NO"]
    # No paragraph (null, as in rows 1 and 6, or empty, row 3): no context.
    assert [built[f"test/{i}"]["paragraph"] for i in (1, 3, 6)] == [b"", b"", b""]


def test_images_kept_as_distributed_or_flattened_to_rgb(built):
    release = _release_table().column("image").to_pylist()
    # An RGB JPEG and an 8-bit RGB PNG are stored as the release holds them.
    for i in (0, 1, 2, 5, 6):
        assert built[f"test/{i}"]["image"] == release[i]["bytes"]
    assert built["test/0"]["image"][:2] == b"\xff\xd8"
    # Palette and RGBA PNGs become RGB PNGs; a transparent pixel is white.
    for i in (3, 4):
        data = built[f"test/{i}"]["image"]
        with Image.open(io.BytesIO(data)) as im:
            assert (im.format, im.mode, im.size) == ("PNG", "RGB", (6, 4))
            px = np.asarray(im)
        assert tuple(px[1, 0]) == RED and tuple(px[0, 5]) == BLUE
    with Image.open(io.BytesIO(built["test/4"]["image"])) as im:
        assert im.getpixel((0, 0)) == WHITE


def test_build_writes_its_input_fingerprint(build):
    _, builder = build
    stored = json.loads((Path(builder.data_path) / FINGERPRINT_NAME).read_text())
    assert stored["files"] == len(list(DUMMY.rglob("*"))) - 1  # every file but data/ itself


# The shards unpacked flat, and the Hub's parquet conversion with and without its config folder.
@pytest.mark.parametrize(
    "layout", ["{name}", "test/{k:04d}.parquet", "default/test/{k:04d}.parquet"]
)
def test_other_layouts_give_the_same_rows(tmp_path, layout):
    for k, shard in enumerate(SHARDS):
        dest = tmp_path / layout.format(name=shard.name, k=k)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shard, dest)
    shards = chartqapro.find_shards(epath.Path(tmp_path))
    assert len(shards) == 2
    rows = dict(chartqapro.read_rows(shards))
    assert sorted(rows) == [f"test/{i}" for i in range(7)]
    assert rows["test/4"]["question_type"] == "Hypothetical"


def test_two_layouts_or_none_are_refused(tmp_path):
    with pytest.raises(BadInputError, match=r"no ChartQAPro parquet files .*found \[\]"):
        chartqapro.find_shards(epath.Path(tmp_path))
    shutil.copytree(DUMMY / "data", tmp_path / "data")
    shutil.copy(SHARDS[0], tmp_path / SHARDS[0].name)
    with pytest.raises(BadInputError, match=r"two layouts \(data/test-\*\.parquet, test-\*"):
        chartqapro.find_shards(epath.Path(tmp_path))


def _write(path: Path, columns: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
    return path


def _image_cell() -> dict:
    return _release_table().column("image").to_pylist()[0]


def test_string_questions_other_type_spelling_and_no_year_or_paragraph_columns(tmp_path):
    path = _write(
        tmp_path / "data" / "test-00000-of-00001.parquet",
        {
            "image": [_image_cell()["bytes"]],  # a plain binary column
            "Question": ["How many?"],
            "Answer": ["3"],
            "Question_Type": ["Factoid"],
        },
    )
    ((key, example),) = chartqapro.read_rows([epath.Path(path)])
    assert key == "test/0"
    assert example["question"] == ["How many?"] and example["answer"] == ["3"]
    assert (example["question_type"], example["year"], example["paragraph"]) == ("Factoid", [], "")


def _one_row(**overrides) -> dict:
    row = {
        "image": [_image_cell()],
        "Question": [["Q?"]],
        "Answer": [["1"]],
        "Question Type": ["Factoid"],
        "Year": [["NO"]],
        "Paragraph": [None],
    }
    row.update(overrides)
    return row


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"Answer": [[]]}, r"field 'Answer': expected a string or a list of strings, got \[\]"),
        (
            {"image": [{"bytes": b"not an image", "path": "x.png"}]},
            r"field 'image': cannot decode image",
        ),
        ({"image": [{"bytes": None, "path": "x.png"}]}, r"field 'image': no embedded image"),
        ({"Question Type": [""]}, r"field 'Question Type'"),
    ],
)
def test_bad_row_names_file_row_and_field(tmp_path, overrides, message):
    path = _write(tmp_path / "test-00000-of-00001.parquet", _one_row(**overrides))
    ((_, error),) = chartqapro.read_rows([epath.Path(path)])
    assert isinstance(error, BadInputError)
    assert str(error).startswith(f"{path}, row 0: ")
    assert error.reason.endswith("(id test/0)")
    assert re.search(message, str(error))


def test_a_missing_column_names_the_file(tmp_path):
    row = _one_row()
    del row["Answer"]
    path = _write(tmp_path / "test-00000-of-00001.parquet", row)
    with pytest.raises(BadInputError, match=rf"{path}: no column 'Answer' \(columns: "):
        list(chartqapro.read_rows([epath.Path(path)]))


def test_bad_rows_stop_the_build_or_are_skipped_and_counted(tmp_path):
    release = tmp_path / "release"
    shutil.copytree(DUMMY / "data", release / "data")
    # A third shard: one good row, then one with no answer.
    good, bad = _one_row(), _one_row(Answer=[[]])
    rows = {k: good[k] + bad[k] for k in good}
    _write(release / "data" / "test-00002-of-00002.parquet", rows)
    shard = release / "data" / "test-00002-of-00002.parquet"
    with pytest.raises(BadInputError, match=rf"{shard}, row 1: field 'Answer'.*\(id test/8\)"):
        _build(release, tmp_path / "strict")
    builder = _build(release, tmp_path / "lenient", skip_bad=True)
    assert builder.info.splits["test"].num_examples == 8
    report = json.loads((Path(builder.data_path) / REPORT_NAME).read_text())
    assert report["skipped_per_split"] == {"test": 1}


def test_without_pyarrow_one_line_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError) as info:
        list(chartqapro.read_rows(SHARDS))
    assert str(info.value) == (
        "the ChartQAPro builder reads parquet with pyarrow: pip install 'chartjax[chartqapro]'"
    )


# ---------------------------------------------------------------- chartjax-score, -infer ----

# (id, prediction, the score by hand) against the build's references (the last answer).
PREDICTIONS = [
    ("test/0", "35", 1.0),  # 34.5: |35 - 34.5| / 34.5 = 1.4 % <= 5 %
    ("test/1", "b.", 1.0),  # Multi Choice: exact, case-insensitive, trailing "." stripped
    ("test/2", "South Corea", 10 / 11),  # "South Korea": ANLS 1 - 1/11
    ("test/3", "False", 0.0),  # Fact Checking "True": exact
    ("test/4", "70", 1.0),  # 69: 1.4 %
    ("test/5", "2020", 0.0),  # 2019 with Year YES: exact (5 % would accept it)
    ("test/6", "[2015, 2017]", 0.5),  # [2015, 2016], both items Year: one of two right
]


def test_references_from_the_build(build):
    data_dir, _ = build
    refs, split, _ = score.load_tfds("tfds:chartqapro:test", "chartqapro", os.fspath(data_dir))
    assert split == "test"
    assert refs["test/2"] == {
        "id": "test/2",
        "target": "South Korea",
        "meta": {"question_type": "Conversational", "year": ["NO"]},
    }
    assert refs["test/6"]["target"] == "[2015, 2016]"
    assert refs["test/6"]["meta"]["year"] == ["YES", "YES"]


def test_chartjax_score_per_type_breakdown_by_hand(build, tmp_path):
    data_dir, _ = build
    preds = tmp_path / "predictions.jsonl"
    preds.write_text(
        "".join(json.dumps({"id": i, "prediction": p}) + "\n" for i, p, _ in PREDICTIONS)
    )
    out = tmp_path / "metrics.json"
    rc = score.main(
        [
            "--task", "chartqapro",
            "--predictions", os.fspath(preds),
            "--references", "tfds:chartqapro:test",
            "--data_dir", os.fspath(data_dir),
            "--out", os.fspath(out),
        ]
    )  # fmt: skip
    assert rc == 0
    obj = json.loads(out.read_text())
    assert obj["metrics"]["relaxed_accuracy"] == pytest.approx(97 / 154)  # (3.5 + 10/11) / 7
    by_type = {k: v["relaxed_accuracy"] for k, v in obj["breakdowns"]["question_type"].items()}
    assert by_type == pytest.approx(
        {
            "Factoid": 0.5,  # (1 + 0 + 0.5) / 3
            "Multi Choice": 1.0,
            "Conversational": 10 / 11,
            "Fact Checking": 0.0,
            "Hypothetical": 1.0,
        }
    )
    assert obj["breakdowns"]["question_type"]["Factoid"]["n"] == 3


def _open(*args):
    from chartjax.inference import inputs as infer_inputs
    from chartjax.tasks import catalog
    from chartjax.tools import infer as infer_cli

    argv = ["--task", "chartqapro", "--checkpoint", "x", "--out", "o", *args]
    _, prompt, inputs, _ = infer_cli.typed(infer_cli.parse_args(argv))
    return infer_inputs.open_inputs(
        inputs, prompt, catalog.inference("chartqapro"), catalog.templates()
    )


def test_infer_prompts_from_the_build_as_lmms_eval_writes_them(build):
    data_dir, _ = build
    examples = {
        ex.id: ex for ex in _open("--tfds", "chartqapro:test", "--data_dir", os.fspath(data_dir))
    }
    assert sorted(examples) == [f"test/{i}" for i in range(7)]
    assert examples["test/2"].prompt == (
        "Context: The survey covered five countries.\n\n"
        "Q1: What is the highest value? A1: 80 Q2: Which country has it? A2: Japan "
        "Q3: Which country ranked second?\nAnswer the question with a single word."
    )
    assert examples["test/1"].prompt == (
        "Which region had the highest value? A) North B) South C) East\n"
        "Answer the question with a single word."
    )
    assert examples["test/2"].target == "South Korea"
    assert examples["test/0"].image_bytes[:2] == b"\xff\xd8"
    queries = _open(
        "--tfds", "chartqapro:test", "--data_dir", os.fspath(data_dir),
        "--template", "chartqapro_query",
    )  # fmt: skip
    assert {ex.id: ex.prompt for ex in queries}["test/6"] == (
        "Which two years had the lowest values?"
    )


def test_infer_prompts_from_jsonl_rows_with_the_datasets_fields(tmp_path):
    Image.new("RGB", (4, 4), RED).save(tmp_path / "c.png")
    row = {
        "id": "q1",
        "image": "c.png",
        "Question": ["Which is higher?", "By how much?"],
        "Answer": ["A", "3"],
        "Question Type": "Conversational",
        "Paragraph": "",
    }
    (tmp_path / "in.jsonl").write_text(json.dumps(row) + "\n")
    (ex,) = _open("--inputs", os.fspath(tmp_path / "in.jsonl"))
    assert ex.prompt == chartqapro_task.prompt(row["Question"], "Conversational", "", row["Answer"])
    assert (
        ex.prompt == "Q1: Which is higher? A1: A Q2: By how much?" + chartqapro_task.PROMPT_SUFFIX
    )
