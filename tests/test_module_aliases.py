"""Modules that moved into the rooms of chartjax/tasks and chartjax/models keep their old names
(chartjax/module_aliases.py): each old name imports as the very module it became, gin files and a
run's saved config.gin that import or qualify by the old name still parse and bind, pickles that
name it still load; and nothing in the repository itself uses an old name any more."""

from __future__ import annotations

import ast
import importlib
import pickle
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from chartjax import module_aliases

REPO = Path(__file__).resolve().parents[1]
MOVED = module_aliases.MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_name_imports_the_same_module_object(old):
    new = MOVED[old]
    module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert sys.modules[old] is sys.modules[new]
    # It stays the new module: its own name and spec, and no file at the old path.
    assert module.__name__ == new and module.__spec__.name == new
    assert Path(module.__file__).resolve().relative_to(REPO).with_suffix("").parts == tuple(
        new.split(".")
    )
    assert not (REPO / (old.replace(".", "/") + ".py")).exists()
    assert not (REPO / old.replace(".", "/")).exists()


def test_the_old_names_are_not_new_ones():
    assert not set(MOVED) & set(MOVED.values())
    assert all(o.startswith(("chartjax.tasks.", "chartjax.models.")) for o in MOVED)


@pytest.mark.slow
def test_a_fresh_process_imports_old_names_and_gin_binds_them():
    """As a run's config.gin does, first thing in a process: `import <old>` in a gin file, a
    binding qualified by the old module, and `from <old> import name`."""
    script = textwrap.dedent(
        """
        import pickle, gin
        from chartjax.tasks.chartqa_task import make_task
        gin.parse_config('''
        import chartjax.tasks.chartqa_task
        import chartjax.tasks.chart_info_text as chartjax2
        chartjax.tasks.chartqa_task.chartqa_task.eval_splits = ("validation[:1]",)
        chartjax.tasks.seq2seq.Features.max_patches = 64
        chart_info_text.chart_info_text_task.mode = "task4"
        ''')
        import chartjax.tasks.chartqa.task as new
        assert make_task is new.make_task, make_task
        assert gin.query_parameter("chartqa_task.eval_splits") == ("validation[:1]",)
        assert gin.query_parameter("Features.max_patches") == 64
        assert pickle.loads(b"cchartjax.tasks.seq2seq\\nDecoding\\n.").__module__ == (
            "chartjax.tasks.core.seq2seq"
        )
        from chartjax.models.bart import BartConfig
        assert pickle.loads(b"cchartjax.models.bart\\nBartConfig\\n.") is BartConfig
        assert BartConfig.__module__ == "chartjax.models.post_ln.bart"
        print("OK")
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().endswith("OK")


def test_python_dash_m_runs_a_module_by_its_old_name():
    run = subprocess.run(
        [sys.executable, "-m", "chartjax.tasks.chart_info_text", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "--predictions" in run.stdout


def test_pickles_that_name_an_old_module_load():
    old = "chartjax.tasks.seq2seq"
    loaded = pickle.loads(f"c{old}\nDecoding\n.".encode())
    assert loaded is importlib.import_module(MOVED[old]).Decoding


def test_gin_names_of_moved_configurables_are_unchanged():
    """A configurable defined in a moved module is registered under its old module (or a name
    given explicitly, as chartjax/models/configurables.py does), never under the new path: a
    saved config.gin that qualifies a name by its module keeps binding it."""
    import gin

    from chartjax import gin_imports  # noqa: F401  (every configurable registered)

    new_modules = set(MOVED.values())
    moved = [
        c
        for _, c in gin.config._REGISTRY.items()
        if getattr(c.wrapped, "__module__", None) in new_modules
    ]
    assert {"chartqa_task", "Features", "ClassifierFeatures"} <= {c.name for c in moved}
    assert not [c.selector for c in moved if c.module in new_modules]
    pinned = {c.selector for c in moved}
    assert "chartjax.tasks.chartqa_task.chartqa_task" in pinned
    assert "chartjax.tasks.seq2seq.Features" in pinned


# Where the repository's own code, tests and configs live; docs may tell the history.
SOURCES = ("chartjax", "tools", "tests", "gin_configs", "tfds_builders")
OWN = {"chartjax/module_aliases.py", "tests/test_module_aliases.py"}


def _old_from_imports(text: str) -> list[str]:
    """`from chartjax.tasks import <old module>` statements (any layout), by ast."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out += [
                f"from {node.module} import {a.name}"
                for a in node.names
                if f"{node.module}.{a.name}" in MOVED
            ]
    return out


@pytest.mark.slow
def test_nothing_in_the_repository_uses_an_old_name():
    """New code names the new modules (after a merge, a search for these names finds what still
    needs rewriting). `module="..."` is a gin name, not an import."""
    dotted = re.compile(
        r'(?<![\w.])(?<!module=")('
        + "|".join(map(re.escape, sorted(MOVED, key=len, reverse=True)))
        + r")(?!\w)"
    )
    found = []
    for path in sorted(p for root in SOURCES for p in (REPO / root).rglob("*")):
        rel = str(path.relative_to(REPO))
        if path.suffix not in (".py", ".gin") or rel in OWN or not path.is_file():
            continue
        text = path.read_text()
        found += [f"{rel}: {m.group(1)}" for m in dotted.finditer(text)]
        if path.suffix == ".py":
            found += [f"{rel}: {s}" for s in _old_from_imports(text)]
    assert not found, "old module names (chartjax/module_aliases.py):\n  " + "\n  ".join(found)
