"""The rooms of chartjax/tasks and chartjax/models (docs/design.md §2): a room's front module is
its package's __init__.py, so its globals are the package's attributes, and importing one of the
room's modules sets the attribute of that name. A front module must therefore bind no global
named like a module of its room (`from chartjax.data import tables` in tasks/chart_info/ was
replaced by tasks/chart_info/tables.py as soon as anything imported that)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _module_level_names(tree: ast.Module) -> dict[str, tuple[int, str | None]]:
    """Names the module binds at its top level (not inside functions or classes): name ->
    (line, the module it imports under that name, if an import)."""
    out: dict[str, tuple[int, str | None]] = {}

    def visit(body):
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                for a in node.names:
                    local = a.asname or a.name.split(".")[0]
                    source = a.name if isinstance(node, ast.Import) else f"{node.module}.{a.name}"
                    out[local] = (node.lineno, source)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out[node.name] = (node.lineno, None)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            out[n.id] = (node.lineno, None)
            elif isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    visit(getattr(node, field, []) or [])
            elif isinstance(node, ast.ExceptHandler):
                visit(node.body)

    visit(tree.body)
    return out


def test_no_front_module_binds_the_name_of_a_module_of_its_room():
    found = []
    inits = sorted(
        p for pkg in ("tasks", "models") for p in (REPO / "chartjax" / pkg).rglob("__init__.py")
    )
    assert any(p.parent.name == "chart_info" for p in inits)
    for init in inits:
        room = init.parent
        package = ".".join(room.relative_to(REPO).parts)
        modules = {p.stem for p in room.glob("*.py") if p.name != "__init__.py"}
        modules |= {p.name for p in room.iterdir() if (p / "__init__.py").is_file()}
        names = _module_level_names(ast.parse(init.read_text()))
        found += [
            f"{init.relative_to(REPO)}:{line}: {name}"
            for name, (line, source) in sorted(names.items())
            if name in modules and source != f"{package}.{name}"
        ]
    assert not found, "globals that a module of the room would replace:\n  " + "\n  ".join(found)
