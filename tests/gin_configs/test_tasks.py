"""docs/recipes.md and gin_configs/tasks/ agree: every paper-row recipe is in the table and every
recipe the table names exists (smoke, demo and synthetic recipes are not paper rows); the command
column matches each recipe's kind (`recipe.kind = "eval"` -> chartjax-eval); every row is
runnable or says why in terms that hold for a user with the data and the published weights; no
recipe names hardware, and the loops default to data parallelism over all devices."""

import ast
import os
import re
from pathlib import Path

import pytest
from gin import config_parser

ROOT = Path(__file__).resolve().parents[2]
GIN = ROOT / "gin_configs"
TASKS = GIN / "tasks"
NOT_ROWS = re.compile(r"(_smoke|_demo_|^synthetic_|_lora$)")  # LoRA variants: docs/peft.md
COMMANDS = {"`chartjax-train`": "train", "`chartjax-eval`": "eval"}
NOT_YET = "not implemented in chartjax yet"
# A reason for "not runnable" that holds for a user: the system was never published. "not a
# chartjax model family" is the wording of rows still being integrated (DeBERTa, TAPAS, BART):
# true for a user too, until those recipes land.
UNPUBLISHED = ("no code or weights were published", "not a chartjax model family")
# Reasons that describe a build machine, not what a user with the data and weights can do.
MACHINE_BOUND = re.compile(
    r"\bhere\b|this machine|cannot be downloaded|can't be downloaded|offline|no network|"
    r"sandbox|not installed|no internet",
    re.IGNORECASE,
)


def _rows(path: Path) -> list[list[str]]:
    """The data rows of every markdown table in `path` (6 cells: table, row, paper, recipe,
    command, needs)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[:2] != ["table", "row"] and cells[:2] != ["task", "row"]:
                out.append(cells)
    return out


ROWS = _rows(ROOT / "docs" / "recipes.md")


def _recipes_named(cell: str) -> list[str]:
    return re.findall(r"`([a-z0-9_]+)`", cell)


class _Delegate(config_parser.ParserDelegate):
    def configurable_reference(self, scoped_name, evaluate):
        return scoped_name

    def macro(self, macro_name):
        return macro_name


def _bound_kind(path: Path) -> str | None:
    kind = None
    for st in config_parser.ConfigParser(path.read_text(encoding="utf-8"), _Delegate()):
        if isinstance(st, config_parser.IncludeStatement):
            kind = _bound_kind(GIN / st.filename) or kind
        elif isinstance(st, config_parser.BindingStatement) and not st.scope:
            if (st.selector, st.arg_name) == ("recipe", "kind"):
                kind = st.value
    return kind


def recipe_kind(path: Path) -> str:
    """`recipe.kind` of a gin file with its includes, read with gin's statement parser (no
    configurable is imported; the last binding wins, as in gin; "train" by default)."""
    return _bound_kind(path) or "train"


def test_recipes_table_matches_the_recipe_files():
    files = {f[:-4] for f in os.listdir(TASKS) if f.endswith(".gin")}
    rows = {f for f in files if not NOT_ROWS.search(f)}
    named = set()
    for cells in ROWS:
        named.update(re.findall(r"^`([a-z0-9_]+)`$", cells[3]) if len(cells) > 3 else [])
    assert rows - named == set(), f"recipes missing from docs/recipes.md: {sorted(rows - named)}"
    assert named - files == set(), f"docs/recipes.md names unknown recipes: {named - files}"
    assert len(named) >= 29  # 15 ChartCheck + 6 Chart-to-Text + 5 CHART-Info/DePlot + 3 FigureQA


def test_the_command_column_matches_each_recipe_kind():
    wrong = []
    for cells in ROWS:
        if cells[4] in COMMANDS:
            for recipe in _recipes_named(cells[3]):
                kind = recipe_kind(TASKS / f"{recipe}.gin")
                if kind != COMMANDS[cells[4]]:
                    wrong.append(f"{recipe}: recipe.kind {kind!r}, docs say {cells[4]}")
    assert not wrong, wrong
    kinds = {f.stem: recipe_kind(f) for f in TASKS.glob("*.gin")}
    assert set(kinds.values()) <= {"train", "eval"}
    assert kinds["chartcheck_matcha_chartqa_zero"] == "eval" and kinds["figureqa_rn"] == "train"


def test_every_row_is_runnable_or_names_a_reason_that_holds_for_a_user():
    problems = []
    for cells in ROWS:
        assert len(cells) == 6, cells
        _, row, _, recipe, command, needs = cells
        where = f"{row!r}: "
        if MACHINE_BOUND.search(needs):
            problems.append(where + f"a reason about the build machine: {needs!r}")
        if command in COMMANDS:
            if not _recipes_named(recipe):
                problems.append(where + "runnable but names no recipe")
            for name in _recipes_named(recipe):
                if not (TASKS / f"{name}.gin").is_file():
                    problems.append(where + f"tasks/{name}.gin does not exist")
        elif command == "not yet runnable":
            if recipe != "—" or not needs.startswith(NOT_YET):
                problems.append(where + f"'not yet runnable' must say {NOT_YET!r} (no recipe)")
        elif command == "not runnable":
            if recipe != "—" or not any(reason in needs for reason in UNPUBLISHED):
                problems.append(where + f"'not runnable' must say one of {UNPUBLISHED}")
        else:
            problems.append(where + f"unknown command {command!r}")
    assert not problems, "\n".join(problems)


# Pages of facts about other codebases: their gin paths (pix2struct's sizes/base.gin) are theirs.
FACT_PAGES = {"docs/models.md", "docs/corpora.md", "docs/metrics.md", "docs/papers.md"}


def test_every_gin_file_the_docs_name_exists():
    pages = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("docs/*.md"))
    named_by = {}
    for doc in ["README.md", *(p for p in pages if p not in FACT_PAGES)]:
        text = (ROOT / doc).read_text(encoding="utf-8")
        for n in re.findall(r"(?<![\w/<])((?:gin_configs/)?[a-z_0-9]+/[a-z_0-9]+\.gin)", text):
            named_by.setdefault(n, doc)
    missing = {
        n: d for n, d in named_by.items() if not (GIN / n.removeprefix("gin_configs/")).is_file()
    }
    assert len(named_by) > 20 and not missing, missing


def _data_dir_values(path: Path) -> list:
    """The values of every `*.data_dir` binding of a gin file and its includes, in order."""
    out = []
    for st in config_parser.ConfigParser(path.read_text(encoding="utf-8"), _Delegate()):
        if isinstance(st, config_parser.IncludeStatement):
            out += _data_dir_values(GIN / st.filename)
        elif isinstance(st, config_parser.BindingStatement) and st.arg_name == "data_dir":
            out.append(st.value)
    return out


def test_every_recipe_reads_its_data_from_the_data_dir_macro():
    """`--gin_bindings="DATA_DIR='...'"` moves every recipe's data (docs/recipes.md says so)."""
    readers = {p.name: _data_dir_values(p) for p in sorted(TASKS.glob("*.gin"))}
    readers = {name: values for name, values in readers.items() if values}
    assert len(readers) > 40
    assert {name: v for name, v in readers.items() if v[-1] != "DATA_DIR"} == {}


def test_no_task_recipe_names_hardware():
    for path in sorted(TASKS.glob("*.gin")):
        body = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln[:1] != "#"]
        assert not [ln for ln in body if "hardware/" in ln], path.name
    # cpu.gin was the same preset as data_parallel.gin (and as the loops' defaults): gone.
    assert not (GIN / "hardware" / "cpu.gin").exists()
    assert sorted(p.name for p in (GIN / "hardware").glob("*.gin")) == [
        "data_parallel.gin",
        "fsdp.gin",
        "tensor_parallel.gin",
    ]


def _defaults(module: str, function: str) -> dict:
    tree = ast.parse((ROOT / "chartjax" / module).read_text(encoding="utf-8"))
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    args = fn.args
    named = args.args[len(args.args) - len(args.defaults) :] + args.kwonlyargs
    values = args.defaults + args.kw_defaults
    return {
        a.arg: ast.literal_eval(v)
        for a, v in zip(named, values)
        if v is not None and a.arg in ("mesh_shape", "rules")
    }


@pytest.mark.parametrize("module,function", [("train.py", "train"), ("evaluate.py", "evaluate")])
def test_the_loops_default_to_data_parallel_over_all_devices(module, function):
    assert _defaults(module, function) == {"mesh_shape": (-1, 1), "rules": "data_parallel"}
