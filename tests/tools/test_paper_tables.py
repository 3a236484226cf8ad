"""chartjax.tools.paper_tables: a fake runs folder (a training run and an evaluation-only run,
each with config.gin and metrics.json) -> the markdown and JSON tables; and the paper-numbers
file agrees with itself, with the recipes and with docs/recipes.md."""

import json
import re
from pathlib import Path

import pytest

from chartjax.metrics import report
from chartjax.tools import paper_tables

ROOT = Path(__file__).resolve().parents[2]
NUMBERS = paper_tables.load_numbers()


def _run(root: Path, name: str, gin_files, splits: dict, config: str = "", libraries=None) -> None:
    """A workdir as chartjax-train/-eval leave it: config.gin naming the gin files (the
    `recipe.gin_files` binding parse_gin adds, and `config`) and
    eval/<split>/step_<N>/metrics.json (5 examples)."""
    workdir = root / name
    workdir.mkdir(parents=True)
    text = "evaluate.eval_batch_size = 8\n" + config
    if gin_files is not None:  # as gin.config_str() writes it (tests/test_recipe.py)
        text = f"# Parameters for recipe:\nrecipe.gin_files = {list(gin_files)!r}\n" + text
    (workdir / "config.gin").write_text(text)
    for (split, step), (metrics, unavailable) in splits.items():
        out = workdir / "eval" / split / f"step_{step}"
        out.mkdir(parents=True)
        obj = report.build_metrics(
            task="t", split=split, step=step, num_examples=5, metrics=metrics,
            unavailable=unavailable, provenance={"libraries": dict(libraries or {})},
        )  # fmt: skip
        report.write_metrics(out / "metrics.json", obj)


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    _run(
        root,
        "rn",
        ["tasks/figureqa_rn.gin", "hardware/fsdp.gin"],
        {
            ("validation2", 100): ({"accuracy": 0.6}, {}),
            ("validation2", 200): ({"accuracy": 0.7254}, {}),
            ("no_annot_test2", 200): ({"accuracy": 0.71}, {}),
        },
    )
    _run(
        root,
        "cc/zero",
        ["/home/u/chartjax/gin_configs/tasks/chartcheck_matcha_chartqa_zero.gin", "init/t5x.gin"],
        {
            ("test_one", 0): ({"accuracy": 0.301, "macro_f1": 0.45}, {}),
            ("test_two", 0): ({"accuracy": 0.2946}, {"macro_f1": "one class only"}),
        },
    )
    return root


def _row(result, table, row):
    (t,) = [t for t in result["tables"] if (t["paper"], t["table"]) == table]
    (r,) = [r for r in t["rows"] if r["row"] == row]
    return r


def test_tables_from_a_fake_runs_folder(runs, tmp_path):
    md = tmp_path / "tables.md"
    paper_tables.main(["--runs", str(runs), "--out", str(md)])
    result = json.loads((tmp_path / "tables.json").read_text())
    text = md.read_text()

    rn = _row(result, ("figureqa", "3"), "RN")
    assert (rn["recipe"], rn["run"]) == ("figureqa_rn", "rn")
    val, test = rn["cells"]
    assert (val["paper"], val["ours"], val["step"], val["status"]) == (72.54, 72.54, 200, "ok")
    assert (test["paper"], test["ours"], test["ours_raw"]) == (72.40, 71.0, 0.71)
    # An accuracy without an interval gets the Wilson interval of its correct / n (4 / 5 here).
    assert (val["n"], test["n"]) == (5, 5)
    assert val["ci95"] == pytest.approx([37.55, 96.38], abs=0.01)
    assert (
        "| RN | `figureqa_rn` | `rn` @ 200 | 72.54 | 72.54 (+0.00) [37.55, 96.38] n=5 | 72.40 | "
        "71.00 (-1.40) ["
    ) in text
    assert rn["comparable"] and rn["differences"] == []
    # What the recipe substitutes is printed under the row it compares.
    assert rn["substitutions"] and all(
        f"| ↳ | substitution: {x} |" in text.replace("\\|", "|") for x in rn["substitutions"]
    )

    zero = _row(result, ("chartcheck", "3"), "MatCha-chartqa-zero")
    assert zero["run"] == "cc/zero"
    assert [c["paper"] for c in zero["cells"]] == [29.1, 46.4, 29.3, 48.3]
    assert [c["ours"] for c in zero["cells"]][:3] == pytest.approx([30.1, 45.0, 29.46])
    assert zero["cells"][3]["status"] == "unavailable"
    assert zero["cells"][3]["reason"] == "one class only"
    assert (
        "| MatCha-chartqa-zero | `chartcheck_matcha_chartqa_zero` | `cc/zero` @ 0 | 29.1 | "
        "30.1 (+1.0) [11.8, 76.9] n=5 | 46.4 | 45.0 (-1.4) [no CI] n=5 | 29.3 | 29.5 (+0.2) "
        "[3.6, 62.4] n=5 | 48.3 | unavailable |"
    ) in text

    # A row whose recipe has no run, and a row chartjax cannot run: in the JSON; in the
    # markdown only with --all.
    text_only = _row(result, ("figureqa", "3"), "Text only")
    assert [c["status"] for c in text_only["cells"]] == ["not run", "not run"]
    assert "| Text only |" not in text
    abc = _row(result, ("chart_info_2019", "II"), "ABC")  # a participant's own system
    assert abc["recipe"] is None
    assert {c["status"] for c in abc["cells"]} == {"no recipe"}
    assert result["other_runs"] == [] and "(none)" in text
    everything = paper_tables.to_markdown(result, all_rows=True)
    assert "| Text only | `figureqa_text_only` | — | 50.01 | not run | 50.01 | not run |" in (
        everything
    )
    # Chart-to-Text's Pew table: BLEU printed with the paper's two decimals.
    assert "| OCR-T5 | `chart_to_text_pew_ocr_t5` | — | 10.49 | not run |" in everything


def test_only_the_rows_a_run_touches_are_listed(runs, tmp_path):
    """Two runs listed every row of every paper table, ~60 of them "not run" or "no recipe"
    (issue 44 item 24): now the rows with a run, and a count of the others."""
    md = tmp_path / "tables.md"
    result = paper_tables.main(["--runs", str(runs), "--out", str(md)])
    text = md.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    listed = [r.split(" | ")[0][2:] for r in rows if not r.startswith(("| row ", "| ↳ "))]
    assert listed == ["MatCha-chartqa-zero", "RN"]
    assert "| not run |" not in text and "| no recipe |" not in text
    figureqa = next(t for t in result["tables"] if t["paper"] == "figureqa")
    n = len(figureqa["rows"]) - 1
    assert f"{n} other row{'s' * (n > 1)} of this table without a run here (--all)." in text
    untouched = [t for t in result["tables"] if not any(r["run"] for r in t["rows"])]
    assert f"{len(untouched)} tables without a run here (--all lists them): " in text
    paper_tables.main(["--runs", str(runs), "--out", str(md), "--all"])
    assert "| Text only | `figureqa_text_only` | — |" in md.read_text()


def test_runs_without_a_paper_row_and_runs_named_by_their_folder(tmp_path):
    root = tmp_path / "runs"
    # No recipe.gin_files (a run from before the binding): the folder names the recipe.
    _run(root, "chart_to_text_pew_matcha", None, {("test", 0): ({"bleu": 0.12}, {})})
    _run(root, "mine", ["my_experiment.gin"], {("validation", 5): ({"accuracy": 0.5}, {})})
    result = paper_tables.build(NUMBERS, paper_tables.find_runs(str(root)))
    assert [(r["dir"], r["recipe"]) for r in result["other_runs"]] == [
        ("chart_to_text_pew_matcha", "chart_to_text_pew_matcha"),
        ("mine", None),
    ]
    assert result["other_runs"][0]["splits"]["test"] == {
        "step": 0,
        "metrics": {"bleu": 0.12},
        "unavailable": {},
    }
    text = paper_tables.to_markdown(result)
    assert "| `mine` | (not a recipe run) | validation | 5 | accuracy 0.5 |" in text


def test_the_numbers_file_is_consistent():
    recipes = {p.stem for p in (ROOT / "gin_configs" / "tasks").glob("*.gin")}
    tables = {(t["paper"], t["table"]): t for t in NUMBERS["tables"]}
    assert len(tables) == len(NUMBERS["tables"])
    seen = set()
    for t in NUMBERS["tables"]:
        assert t["paper"] in NUMBERS["papers"]
        for c in t["columns"]:
            # percent <-> a metric bounded by 1 (a fraction in metrics.json)
            assert (c["unit"] == "percent") == report.is_bounded(c["metric"]), c
        for r in t["rows"]:
            assert r["recipe"] is None or r["recipe"] in recipes, r
    for n in NUMBERS["numbers"]:
        key = (n["paper"], n["table"], n["row"], n["metric"], n["split"])
        assert key not in seen, key
        seen.add(key)
        t = tables[(n["paper"], n["table"])]
        assert (n["metric"], n["split"]) in {(c["metric"], c["split"]) for c in t["columns"]}
        assert n["row"] in {r["row"] for r in t["rows"]}
        assert isinstance(n["value"], int | float)
    rows_with_numbers = {(k[0], k[1], k[2]) for k in seen}
    for t in NUMBERS["tables"]:
        for r in t["rows"]:
            assert (t["paper"], t["table"], r["row"]) in rows_with_numbers, r


# The numbers docs/recipes.md prints in its "paper" column, per section and table, in order.
DOC_COLUMNS = {
    ("chartcheck", "3"): [("accuracy", "test_one"), ("accuracy", "test_two")],
    ("chartcheck", "4"): [
        (f"explanation_{m}", "test_one")
        for m in ("bleu", "rouge_l", "meteor", "bertscore_f1", "bleurt")
    ],
    ("chart_to_text", "4 (Statista)"): [
        (m, "test") for m in ("bleu", "content_selection", "bleurt", "cider", "perplexity")
    ],
    ("figureqa", "3"): [("accuracy", "no_annot_test2")],
}
DOC_SECTIONS = {"## ChartCheck": "chartcheck", "## Chart-to-Text": "chart_to_text"}
DOC_SECTIONS.update({"## FigureQA": "figureqa", "## ICDAR": "chart_info_2019"})


def _doc_rows():
    paper = None
    for line in (ROOT / "docs" / "recipes.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):  # a section of another benchmark (ChartQA) holds no paper row
            paper = next((n for p, n in DOC_SECTIONS.items() if line.startswith(p)), None)
        if paper and line.startswith("|") and not line.startswith(("|---", "| table", "| task")):
            yield paper, [c.strip() for c in line.strip().strip("|").split("|")]


def test_docs_rows_agree_with_the_numbers_file():
    """Each paper row docs/recipes.md prints: same numbers, same recipe (or none)."""
    values = {
        (n["paper"], n["table"], n["row"], n["metric"], n["split"]): n["value"]
        for n in NUMBERS["numbers"]
    }
    rows = {(t["paper"], t["table"], r["row"]): r for t in NUMBERS["tables"] for r in t["rows"]}
    checked = 0
    for paper, (table, row, printed, recipe, _, _) in _doc_rows():
        if paper == "chart_info_2019" or row.startswith("—") or "paper" in printed:
            continue
        tids = [t.strip() for t in table.split(",")]
        parts = printed.split(";")
        assert len(parts) == len(tids), row
        for tid, part in zip(tids, parts):
            key_table = tid
            columns = DOC_COLUMNS.get((paper, tid)) or DOC_COLUMNS[(paper, "4 (Statista)")]
            numbers = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", part)]
            assert (paper, key_table, row) in rows, (paper, key_table, row)
            want = [values[(paper, key_table, row, m, s)] for m, s in columns]
            assert numbers == pytest.approx(want), (row, tid)
            named = rows[(paper, key_table, row)]["recipe"]
            assert recipe == (f"`{named}`" if named else "—"), row
            checked += 1
    assert checked >= 40


def _matcha_class_row(root: Path, **kw) -> tuple[dict, str]:
    _run(
        root,
        "cc/class",
        ["tasks/chartcheck_matcha_finetune_class.gin"],
        {
            ("test_one", 4): ({"accuracy": 0.0, "macro_f1": 0.0}, {}),
            ("test_two", 4): ({"accuracy": 0.6, "macro_f1": 0.55}, {}),
        },
        **kw,
    )
    result = paper_tables.build(NUMBERS, paper_tables.find_runs(str(root)))
    return _row(result, ("chartcheck", "3"), "MatCha-finetune-class"), paper_tables.to_markdown(
        result
    )


def test_a_tiny_short_run_is_not_comparable(tmp_path):
    """A 4-step tiny-model run on dummy data (issue 30, item 9) is no reproduction of the row."""
    tiny = (
        "train.num_train_steps = 4\ntrain.global_batch_size = 8\n"
        "Pix2StructConfig.emb_dim = 32\nPix2StructConfig.num_encoder_layers = 1\n"
        "chartcheck_task.eval_splits = ('validation[:1]', 'test_one', 'test_two')\n"
    )
    row, text = _matcha_class_row(tmp_path / "runs", config=tiny)
    assert not row["comparable"]
    assert row["differences"] == [
        "model size: Pix2StructConfig.emb_dim = 32 (recipe: 768)",
        "model size: Pix2StructConfig.num_encoder_layers = 1 (recipe: 12)",
        "data split: chartcheck_task.eval_splits = ('validation[:1]', 'test_one', 'test_two') "
        "(recipe: '(default)')",
        "batch: train.global_batch_size = 8 (recipe: 4)",
        "steps: train.num_train_steps = 4 (recipe: 15000)",
    ]
    assert {c["status"] for c in row["cells"]} == {"not comparable"}
    # The cell shows ours with its interval and n, and no difference to the paper's 64.0.
    assert "| 64.0 | 0.0 [0.0, 43.4] n=5 (not comparable) |" in text
    assert "(-64.0)" not in text
    assert "| ↳ | not comparable: steps: train.num_train_steps = 4 (recipe: 15000) |" in text


def test_test_two_on_the_reannotation_is_a_different_test_set(tmp_path):
    reannotated = {"chartcheck_test_two": "reannotated_2024 (test_two.csv: 981 claims, 497 / 484)"}
    row, text = _matcha_class_row(tmp_path / "a", libraries=reannotated)
    assert row["comparable"]
    assert [c["status"] for c in row["cells"]] == [
        "ok",
        "ok",
        "different test set",
        "different test set",
    ]
    assert row["cells"][2]["reasons"][0].startswith("test set: reannotated_2024")
    assert "| 61.6 | 60.0 [23.1, 88.2] n=5 (different test set) |" in text
    paper = {"chartcheck_test_two": "paper_2023 (claim_..._V2.json: 981 claims, 503 / 478)"}
    row, _ = _matcha_class_row(tmp_path / "b", libraries=paper)
    assert [c["status"] for c in row["cells"]] == ["ok"] * 4
    assert row["cells"][2]["test_set"].startswith("paper_2023")
