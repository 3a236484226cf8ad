"""The module import graph of chartjax/ (tools/ as chartjax.tools, gin_configs/ as data) and
tfds_builders/ has no cycles, and the model modules run where neither gin nor TensorFlow is
installed (the lent GPU machine, DESIGN.md §7).

The graph is read from the source with `ast`, so it sees every import, including those inside
functions: a cycle that is hidden behind a function-level import still ties two modules together
(neither can be understood, tested or moved without the other).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Source folder -> package name as installed (setup.py maps tools/ and gin_configs/).
TREES = {
    "chartjax": "chartjax",
    "tools": "chartjax.tools",
    "gin_configs": "chartjax.gin_configs",
    "tfds_builders": "tfds_builders",
}

# Modules that must import neither gin nor TensorFlow; configurables is the models' gin edge.
GIN_FREE_PACKAGES = ("chartjax.models",)
GIN_FREE_MODULES = ("chartjax.sharding",)
GIN_EDGE = ("chartjax.models.configurables",)
FORBIDDEN = ("gin", "tensorflow", "tensorflow_datasets")

# The layer order of docs/design.md §2, lowest first: a module imports only from its own layer
# or a lower one (0 arrows back up). A module is placed by its longest listed prefix; a new
# top-level module must be placed here (test_every_module_has_a_layer).
LAYERS = (
    (
        "base",
        "chartjax.version chartjax.file_modes chartjax.sharding chartjax.mesh chartjax.quiet "
        "chartjax.host_memory chartjax.output_place chartjax.workdir_lock chartjax.config_checks "
        "chartjax.checkpoint chartjax.optim chartjax.recipe chartjax.plots chartjax.profiling "
        "chartjax.report_figures chartjax.module_aliases",
    ),
    ("data", "chartjax.data"),
    ("metrics", "chartjax.metrics"),
    ("models", "chartjax.models"),
    ("synth", "chartjax.synth"),
    ("builders", "tfds_builders"),
    ("interop", "chartjax.interop"),
    ("support", "chartjax.testing"),
    ("tasks", "chartjax.tasks"),
    (
        "loop",
        "chartjax.state chartjax.trainable chartjax.selection chartjax.init_checkpoint "
        "chartjax.run_log chartjax.evaluate chartjax.train",
    ),
    ("config", "chartjax.gin_imports chartjax.config chartjax.gin_configs"),
    ("inference", "chartjax.inference"),
    ("api", "chartjax.api chartjax"),
    ("tools", "chartjax.tools"),
)


def find_modules(root: Path, trees: dict[str, str]) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the source folders."""
    modules = {}
    for folder, package in trees.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


def _alias(name: str, trees: dict[str, str]) -> str:
    """`tools.x` (the source folder's name) is the installed `chartjax.tools.x`."""
    head, _, rest = name.partition(".")
    if head in trees and trees[head] != head:
        return trees[head] + ("." + rest if rest else "")
    return name


def imports_of(module: str, path: Path, modules, trees) -> set[str]:
    """The project modules `module` imports, anywhere in the file."""
    is_package = path.name == "__init__.py"
    targets = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets += [_alias(a.name, trees) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package, `level - 1` levels up
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = _alias(node.module, trees)
            # `from x import y`: y may be a submodule (an edge to x.y) or a name in x.
            targets += [
                f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source
                for a in node.names
            ]
    out = set()
    for target in targets:
        while target and target not in modules:  # `import a.b.fn`-like names: the module
            target = target.rpartition(".")[0]
        if target and target != module:
            out.add(target)
    return out


def import_graph(root: Path = REPO, trees: dict[str, str] = TREES) -> dict[str, set[str]]:
    modules = find_modules(root, trees)
    return {m: imports_of(m, p, modules, trees) for m, p in modules.items()}


def _components(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def find_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Every elementary cycle, as `a -> b -> a` starting at its smallest module name."""
    chains = []
    for comp in _components(graph):
        for start in sorted(comp):
            later = {m for m in comp if m >= start}
            paths = [[start]]
            while paths:
                path = paths.pop()
                for w in sorted(graph[path[-1]] & later):
                    if w == start:
                        chains.append(" -> ".join(path + [start]))
                    elif w not in path:
                        paths.append(path + [w])
    return sorted(chains)


def test_graph_sees_function_level_relative_and_submodule_imports(tmp_path):
    """The graph builder on a made-up tree: each kind of import closes a cycle it must see."""
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "def f():\n    from pkg import b\n",  # function level, y a submodule
        "pkg/b.py": "from .sub import c\n",  # relative
        "pkg/sub/__init__.py": "",
        "pkg/sub/c.py": "from .. import a\nimport pkg.d\n",  # parent-relative; dotted import
        "pkg/d.py": "from pkg.a import f\n",  # y a name in the module
        "tools/t.py": "import tools.u\n",  # the source folder's name, mapped
        "tools/u.py": "from pkg.tools import t\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path, {"pkg": "pkg", "tools": "pkg.tools"})
    assert graph["pkg.a"] == {"pkg.b"}
    assert graph["pkg.sub.c"] == {"pkg.a", "pkg.d"}
    assert graph["pkg.d"] == {"pkg.a"}
    assert find_cycles(graph) == [
        "pkg.a -> pkg.b -> pkg.sub.c -> pkg.a",
        "pkg.a -> pkg.b -> pkg.sub.c -> pkg.d -> pkg.a",
        "pkg.tools.t -> pkg.tools.u -> pkg.tools.t",
    ]


def test_no_import_cycles():
    graph = import_graph()
    assert "chartjax.models.t5" in graph and "tfds_builders.chart_info.chart_info" in graph
    assert "chartjax.tools.score" in graph and "chartjax.tasks.catalog" in graph
    cycles = find_cycles(graph)
    assert not cycles, f"{len(cycles)} import cycle(s):\n  " + "\n  ".join(cycles)


@pytest.mark.slow
def test_models_and_sharding_import_neither_gin_nor_tensorflow():
    modules = sorted(
        m
        for m in find_modules(REPO, TREES)
        if (m in GIN_FREE_MODULES or m.startswith(tuple(p + "." for p in GIN_FREE_PACKAGES)))
        and m not in GIN_EDGE
    )
    assert "chartjax.models.t5" in modules and "chartjax.sharding" in modules
    script = textwrap.dedent(
        f"""
        import importlib, sys
        for name in {modules!r}:
            importlib.import_module(name)
        bad = sorted(
            m for m in sys.modules
            if any(m == f or m.startswith(f + ".") for f in {FORBIDDEN!r})
        )
        print("FORBIDDEN", bad)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert "FORBIDDEN []" in run.stdout, run.stdout


def layer_of(module: str, layers=LAYERS) -> int | None:
    """The index in `layers` of the longest prefix of `module` (None: not placed)."""
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(layers):
        for prefix in prefixes.split():
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    return best


def back_arrows(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """Every import from a lower layer up to a higher one, as `a (layer) -> b (layer)`."""
    out = []
    for module, targets in graph.items():
        if module.endswith("_test"):  # a builder's test beside it (TFDS's convention): a test
            continue
        here = layer_of(module, layers)
        for target in sorted(targets):
            there = layer_of(target, layers)
            if here is not None and there is not None and there > here:
                out.append(f"{module} ({layers[here][0]}) -> {target} ({layers[there][0]})")
    return sorted(out)


def test_back_arrows_are_found_on_a_made_up_graph():
    layers = (("low", "pkg.low"), ("high", "pkg.high pkg"))
    graph = {"pkg.low.a": {"pkg.high.b"}, "pkg.high.b": {"pkg.low.a"}, "pkg": {"pkg.low.a"}}
    assert layer_of("pkg.low.a", layers) == 0 and layer_of("pkg", layers) == 1
    assert layer_of("other", layers) is None
    assert back_arrows(graph, layers) == ["pkg.low.a (low) -> pkg.high.b (high)"]


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in import_graph() if layer_of(m) is None)
    assert not unplaced, f"place these in LAYERS (and docs/design.md §2): {unplaced}"


def test_imports_run_down_the_layers_only():
    arrows = back_arrows(import_graph())
    assert not arrows, f"{len(arrows)} import(s) against the layer order:\n  " + "\n  ".join(arrows)


def test_design_doc_states_the_layer_order():
    """docs/design.md writes the same order, lowest first, as `layer: prefixes` lines."""
    text = (REPO / "docs" / "design.md").read_text()
    block = text.split("<!-- layers: begin -->")[1].split("<!-- layers: end -->")[0]
    written = [line.strip("` ").split(":", 1) for line in block.strip().splitlines()[1:-1]]
    assert [(name.strip(), " ".join(p.split())) for name, p in written] == [
        (name, " ".join(p.split())) for name, p in LAYERS
    ]


def test_only_tests_and_benchmarks_import_the_support_package():
    graph = import_graph()
    users = sorted(
        m
        for m, targets in graph.items()
        if any(t.startswith("chartjax.testing") for t in targets)
        and not m.startswith(("chartjax.testing", "chartjax.tools.bench", "chartjax.tools.gpu"))
    )
    assert "chartjax.testing.tiny_hf" in graph
    assert not users, f"product modules importing test support (chartjax/testing): {users}"


def test_no_file_of_the_inference_path_is_over_400_lines():
    """docs/design.md §2: files stay well under 400 lines; the inference engine is held to it."""
    sizes = {
        p.name: len(p.read_text().splitlines())
        for p in (REPO / "chartjax" / "inference").glob("*.py")
    }
    assert "engine.py" in sizes and "prompts.py" in sizes
    assert {n: s for n, s in sizes.items() if s > 400} == {}
