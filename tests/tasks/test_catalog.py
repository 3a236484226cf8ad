"""The task catalog is the one door for a benchmark: the generic loops name none of them."""

import ast
import re
from pathlib import Path

from chartjax.tasks import catalog

REPO = Path(__file__).resolve().parents[2]
BENCHMARK_NAMES = re.compile(
    r"figureqa|chartcheck|chart_?to_?text|chart_?info|deplot|chartqa|statista|pew|matcha",
    re.IGNORECASE,
)
# The generic half of the house: loops, pipeline, inference engine and the two thin CLIs.
GENERIC = (
    "chartjax/train.py",
    "chartjax/evaluate.py",
    "chartjax/inference/engine.py",
    "chartjax/inference/features.py",
    "chartjax/inference/inputs.py",
    "chartjax/inference/job.py",
    "chartjax/inference/settings.py",
    "chartjax/data/pipeline.py",
    "chartjax/data/sources.py",
    "tools/score.py",
    "tools/train.py",
    "tools/evaluate.py",
)


def _code_without_docstrings(path: Path) -> str:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                body[0] = ast.Pass()
    return ast.unparse(tree)


def test_generic_modules_name_no_benchmark():
    found = {}
    for rel in GENERIC:
        path = REPO / rel
        text = path.read_text() if rel.startswith("chartjax/") else _code_without_docstrings(path)
        hits = sorted({m.group(0).lower() for m in BENCHMARK_NAMES.finditer(text)})
        if hits:
            found[rel] = hits
    assert not found, found


def test_every_cli_task_of_design_8_has_its_door():
    assert set(catalog.SCORERS) == {
        "figureqa",
        "chartcheck",
        "chart_to_text",
        *(f"chart_info_task{k}" for k in ("1", "2", "3", "4", "5", "6a", "6b")),
        "deplot",
        "chartqa",
        "plotqa",
        "chartqapro",
    }
    assert {s.layout for n, s in catalog.SCORERS.items() if n.startswith("chart_info")} == {
        "json_dir"
    }
    assert set(catalog.INFERENCE) == {
        "deplot",
        "chartqa",
        "chartqapro",
        "chartcheck",
        "caption",
        "summary",
        "text",
        "classify",
        "figureqa",
    }
    assert {n: s.modality for n, s in catalog.INFERENCE.items()}["text"] == "text"
    # Only the encoder-classifier door writes labels, the FigureQA baselines' yes / no; every
    # other writes text.
    assert {n for n, s in catalog.INFERENCE.items() if s.output == "labels"} == {"classify"}
    assert {n for n, s in catalog.INFERENCE.items() if s.output == "yes_no"} == {"figureqa"}
    assert set(catalog.TASKS) >= {"figureqa", "chartcheck", "chart_to_text", "chart_info", "deplot"}


def test_named_templates_come_from_the_tasks():
    from chartjax.data.tables import DEPLOT_PROMPT
    from chartjax.tasks import chartcheck

    templates = catalog.templates()
    assert templates["deplot"] == DEPLOT_PROMPT
    assert templates["chartcheck_flan_class"] == chartcheck.FLAN_CLASS
    assert templates["chartqa"] == "{question}"
