"""The papers' tables, with our numbers beside theirs, from a folder of recipe runs.

    python -m chartjax.tools.paper_tables --runs runs/ --out tables.md [--json tables.json]

A run is a workdir under `--runs` (at any depth) holding `config.gin` and
`eval/<split>/step_<N>/metrics.json` (or `eval_best/...`, what a selection rule chose:
preferred where present). Its recipe is the `tasks/<recipe>.gin` that
`recipe.gin_files` names in its `config.gin` (bound by chartjax.config.parse_gin, saved by
`chartjax-train` and, for evaluation-only runs, by `chartjax-eval`); a workdir without that
binding counts as recipe `<folder name>` when a recipe of that name exists (the docs'
`--workdir=runs/<recipe>`). For each split the latest step's metrics.json is read; of several
runs of one recipe, the one written last is used and the others are listed.

The paper numbers and the row -> recipe map are data, not code: `paper_numbers.json` next to
this file (shipped in the wheel as chartjax/tools/paper_numbers.json). Every cell gives the
paper's number and ours in the paper's units (fractions x 100 where the paper prints percent),
or why ours is absent: "not run" (the row's recipe has no run under --runs), "no recipe"
(chartjax cannot run the row: docs/recipes.md says why), "not evaluated" (the run has no
metrics.json of that split), "unavailable" (the metric could not be computed: its reason is
in the JSON) or "missing". The markdown goes to --out, listing the rows that have a run under
--runs and counting the others (`--all` lists every row); the JSON (--json, default: --out with
.json) always holds every row. Runs of recipes that are no paper row (our own CHART-Info models,
MatCha on Chart-to-Text, ...) are listed at the end with their metrics.

A compared cell gives n (the examples scored) and the 95 % interval: the metrics.json's own
`<metric>_ci95_low/_high`, else, for an accuracy, the Wilson interval of its n; a metric with
neither says so. Its status is "ok" only when the run is comparable with the row: "not
comparable" when the run's config.gin binds its model size, steps, batch or data splits other
than the recipe does (chartjax.recipe.differences; the reasons are listed), "different test set"
when a ChartCheck test_two score was made on the 2024 re-annotation rather than the paper's
test set 2 (its metrics.json's `provenance.libraries.chartcheck_test_two`); neither shows a
difference to the paper's number. Each recipe's declared substitutions (`recipe.substitutions`)
are printed under its row.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import re
import sys

from chartjax import recipe as recipe_lib
from chartjax.metrics.classification import wilson_interval
from chartjax.recipe import recipe_name
from chartjax.tasks.chartcheck.test_sets import PAPER as PAPER_TEST_TWO
from chartjax.tasks.chartcheck.test_sets import TEST_TWO_KEY, is_papers

NUMBERS_FILE = "paper_numbers.json"
STEP_DIR = re.compile(r"^step_(\d+)$")


# ------------------------------------------------------------------ inputs --------------------


def load_numbers(path: str | None = None) -> dict:
    """The paper-numbers file (default: the one shipped with chartjax.tools)."""
    if path is None:
        text = importlib.resources.files("chartjax.tools").joinpath(NUMBERS_FILE).read_text()
    else:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    return json.loads(text)


def gin_dir() -> str:
    return str(importlib.resources.files("chartjax.gin_configs"))


def known_recipes() -> set[str]:
    tasks = importlib.resources.files("chartjax.gin_configs").joinpath("tasks")
    return {p.name[: -len(".gin")] for p in tasks.iterdir() if p.name.endswith(".gin")}


def recipe_bindings(recipe: str) -> dict:
    """The recipe's bindings with its includes (chartjax.recipe.bindings)."""
    return recipe_lib.bindings(os.path.join(gin_dir(), "tasks", f"{recipe}.gin"), gin_dir())


def substitutions_of(recipe: str) -> list[str]:
    """`recipe.substitutions` as the recipe file binds it (its includes too)."""
    return list(recipe_bindings(recipe).get(("recipe", "substitutions"), []) or [])


def gin_files_of(config_text: str) -> list[str]:
    """`recipe.gin_files` of a saved config.gin (gin's statement parser only: the caller's
    gin configuration is left alone)."""
    from gin import config_parser

    class Delegate(config_parser.ParserDelegate):
        def configurable_reference(self, scoped_name, evaluate):
            return None

        def macro(self, macro_name):
            return None

    for st in config_parser.ConfigParser(config_text, Delegate()):
        if (
            isinstance(st, config_parser.BindingStatement)
            and st.selector.rpartition(".")[2] == "recipe"
            and st.arg_name == "gin_files"
            and not st.scope
        ):
            return [str(f) for f in st.value]
    return []


def recipe_of(workdir: str, recipes: set[str]) -> str | None:
    config_file = os.path.join(workdir, "config.gin")
    if os.path.isfile(config_file):
        with open(config_file, encoding="utf-8") as f:
            name = recipe_name(gin_files_of(f.read()))
        if name:
            return name
    folder = os.path.basename(os.path.normpath(workdir))
    return folder if folder in recipes else None


def _latest_steps(eval_dir: str, selected: bool) -> dict:
    """{split: {...}} of the latest step of each split under `eval_dir`."""
    splits: dict[str, dict] = {}
    for split_name in sorted(os.listdir(eval_dir)) if os.path.isdir(eval_dir) else []:
        split_dir = os.path.join(eval_dir, split_name)
        for step_name in os.listdir(split_dir) if os.path.isdir(split_dir) else []:
            m = STEP_DIR.match(step_name)
            path = os.path.join(split_dir, step_name, "metrics.json")
            if not m or not os.path.isfile(path):
                continue
            with open(path, encoding="utf-8") as f:
                obj = json.load(f)
            split, step = obj.get("split", split_name), int(obj.get("step", m.group(1)))
            if split not in splits or step > splits[split]["step"]:
                libraries = (obj.get("provenance") or {}).get("libraries") or {}
                splits[split] = {
                    "step": step,
                    "metrics": obj.get("metrics", {}),
                    "unavailable": obj.get("unavailable", {}),
                    "num_examples": obj.get("num_examples"),
                    "test_set": libraries.get(TEST_TWO_KEY),
                    "path": path,
                    "mtime": os.path.getmtime(path),
                    "selected": selected,
                }
    return splits


def read_run(workdir: str) -> dict:
    """{split: {"step", "metrics", "unavailable", "path", "selected"}} per split: the
    parameters a selection rule chose (`eval_best/`, written by train.selection, e.g. the
    FigureQA paper's moving average on validation2) where the run has them, since those are
    what the paper reports; else the latest step of `eval/`."""
    splits = _latest_steps(os.path.join(workdir, "eval"), selected=False)
    splits.update(_latest_steps(os.path.join(workdir, "eval_best"), selected=True))
    return splits


def find_runs(root: str, recipes: set[str] | None = None) -> list[dict]:
    """Every workdir under `root` (a folder holding config.gin or eval/)."""
    recipes = known_recipes() if recipes is None else recipes
    runs = []
    for dirpath, dirnames, filenames in os.walk(root):
        if "config.gin" in filenames or "eval" in dirnames or "eval_best" in dirnames:
            splits = read_run(dirpath)
            runs.append(
                {
                    "dir": os.path.relpath(dirpath, root),
                    "path": dirpath,
                    "recipe": recipe_of(dirpath, recipes),
                    "splits": splits,
                    "mtime": max((s["mtime"] for s in splits.values()), default=0.0),
                }
            )
            skip = ("eval", "eval_best", "checkpoints", "best")
            dirnames[:] = [d for d in dirnames if d not in skip]
    return sorted(runs, key=lambda r: r["dir"])


# ------------------------------------------------------------------ tables --------------------


def _decimals(value: float, decimals: int) -> int:
    text = repr(float(value))
    return max(decimals, len(text.split(".")[1]) if "." in text and "e" not in text else 0)


def run_differences(run: dict, recipe: str) -> list[str]:
    """Why a run is not comparable with its recipe (chartjax.recipe.differences of the run's
    config.gin and the recipe file); [] when the run has no config.gin to read."""
    config = os.path.join(run.get("path", ""), "config.gin")
    if not os.path.isfile(config):
        return []
    try:
        return recipe_lib.differences(recipe_bindings(recipe), recipe_lib.bindings(config))
    except (OSError, SyntaxError, ValueError) as err:
        return [f"config.gin unreadable: {err}"]


def _n_and_interval(split: dict, name: str) -> tuple[int | None, list[float] | None]:
    """(n, [low, high] in metrics.json units) of a metric: the examples scored (`num_scored`
    when verdicts were skipped, else num_examples) and its interval, when there is one."""
    metrics = split["metrics"]
    n = metrics.get("num_scored", split.get("num_examples"))
    n = int(n) if isinstance(n, int | float) else None
    low, high = metrics.get(f"{name}_ci95_low"), metrics.get(f"{name}_ci95_high")
    if low is not None and high is not None:
        return n, [low, high]
    if name == "accuracy" and n:
        return n, list(wilson_interval(round(metrics[name] * n), n))
    return n, None


def _cell(
    column: dict,
    paper: float | None,
    run: dict | None,
    recipe: str | None,
    differences: list[str] = (),
) -> dict:
    cell = {"column": column["label"], "metric": column["metric"], "split": column["split"]}
    cell["paper"] = paper
    if recipe is None:
        return {**cell, "ours": None, "status": "no recipe"}
    if run is None:
        return {**cell, "ours": None, "status": "not run"}
    split = run["splits"].get(column["split"])
    if split is None:
        return {**cell, "ours": None, "status": "not evaluated"}
    name = column["metric"]
    if name in split["metrics"]:
        raw = split["metrics"][name]
        scale = 100 if column["unit"] == "percent" else 1
        n, interval = _n_and_interval(split, name)
        status, reasons = "ok", list(differences)
        test_set = split.get("test_set")
        if column["split"] == "test_two" and test_set:
            cell["test_set"] = test_set
            if is_papers(test_set) is False:
                status = "different test set"
                reasons.insert(0, f"test set: {test_set} (the paper's is {PAPER_TEST_TWO})")
        if differences:
            status = "not comparable"
        return {
            **cell,
            "ours": raw * scale,
            "ours_raw": raw,
            "n": n,
            "ci95": None if interval is None else [x * scale for x in interval],
            "step": split["step"],
            "selected": split.get("selected", False),
            "status": status,
            **({"reasons": reasons} if reasons else {}),
        }
    if name in split["unavailable"]:
        return {
            **cell,
            "ours": None,
            "status": "unavailable",
            "reason": split["unavailable"][name],
            "step": split["step"],
        }
    return {**cell, "ours": None, "status": "missing", "step": split["step"]}


def build(numbers: dict, runs: list[dict]) -> dict:
    """The tables (JSON-ready): every paper row with its cells, plus the other runs."""
    by_recipe: dict[str, list[dict]] = {}
    for run in runs:
        if run["recipe"]:
            by_recipe.setdefault(run["recipe"], []).append(run)
    for group in by_recipe.values():
        group.sort(key=lambda r: (r["mtime"], r["dir"]), reverse=True)  # written last first
    values = {
        (n["paper"], n["table"], n["row"], n["metric"], n["split"]): n["value"]
        for n in numbers["numbers"]
    }
    tables, rows_recipes = [], set()
    for t in numbers["tables"]:
        rows = []
        for r in t["rows"]:
            recipe = r.get("recipe")
            if recipe:
                rows_recipes.add(recipe)
            group = by_recipe.get(recipe, []) if recipe else []
            run = group[0] if group else None
            differences = run_differences(run, recipe) if run else []
            cells = [
                _cell(
                    c,
                    values.get((t["paper"], t["table"], r["row"], c["metric"], c["split"])),
                    run,
                    recipe,
                    differences,
                )
                for c in t["columns"]
            ]
            rows.append(
                {
                    "row": r["row"],
                    "recipe": recipe,
                    "run": run["dir"] if run else None,
                    "other_runs": [o["dir"] for o in group[1:]],
                    "note": r.get("note"),
                    "comparable": not differences,
                    "differences": differences,
                    "substitutions": substitutions_of(recipe) if recipe else [],
                    "cells": cells,
                }
            )
        tables.append(
            {
                "paper": t["paper"],
                "paper_title": numbers["papers"][t["paper"]]["title"],
                "table": t["table"],
                "title": t["title"],
                "note": t.get("note"),
                "columns": t["columns"],
                "rows": rows,
            }
        )
    others = [
        {
            "dir": run["dir"],
            "recipe": run["recipe"],
            "splits": {
                s: {"step": v["step"], "metrics": v["metrics"], "unavailable": v["unavailable"]}
                for s, v in sorted(run["splits"].items())
            },
        }
        for run in runs
        if run["recipe"] not in rows_recipes
    ]
    return {"tables": tables, "other_runs": others}


# ------------------------------------------------------------------ markdown ------------------


def _fmt(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}"


COMPARED_STATUSES = ("ok", "not comparable", "different test set")


def _ours(cell: dict, decimals: int) -> str:
    if cell["status"] not in COMPARED_STATUSES:
        return cell["status"]
    ours = round(cell["ours"], decimals)
    text = _fmt(ours, decimals)
    if cell["paper"] is not None and cell["status"] == "ok":
        # the difference of the printed numbers; never "-0.00"
        text += f" ({round(ours - cell['paper'], decimals) + 0.0:+.{decimals}f})"
    if cell.get("ci95"):
        low, high = cell["ci95"]
        text += f" [{_fmt(low, decimals)}, {_fmt(high, decimals)}]"
    else:
        text += " [no CI]"
    text += f" n={cell['n']}" if cell.get("n") is not None else " n=?"
    if cell["status"] != "ok":
        text += f" ({cell['status']})"
    return text


def _run_cell(row: dict) -> str:
    if not row["run"]:
        return "—"
    steps = sorted({(c["step"], c.get("selected", False)) for c in row["cells"] if "step" in c})
    named = [f"{step} (selected)" if selected else str(step) for step, selected in steps]
    text = f"`{row['run']}`" + (f" @ {', '.join(named)}" if named else "")
    if row["other_runs"]:
        text += f" (also: {', '.join(row['other_runs'])})"
    return text


def _under_row(row: dict, width: int) -> list[str]:
    """Table lines under a compared row: why it is not comparable, what its recipe substitutes."""
    notes = []
    reasons = [x for c in row["cells"] for x in c.get("reasons", []) if x.startswith("test set")]
    for text in [*row["differences"], *dict.fromkeys(reasons)]:
        notes.append(f"not comparable: {text}" if text in row["differences"] else text)
    notes += [f"substitution: {s}" for s in row["substitutions"]]
    return ["| ↳ | " + note.replace("|", "\\|") + " |" + " |" * (width - 2) for note in notes]


def to_markdown(result: dict, all_rows: bool = False) -> str:
    """The tables as markdown: the rows with a run here (every row with `all_rows`); the others
    are counted under their table, and tables without any run are named at the end."""
    out = [
        "# The papers' tables, reproduced",
        "",
        "Each cell: the paper's number, then ours in the paper's units with the difference, "
        "its 95% interval [low, high] and n, the examples scored. "
        '"not comparable": the run\'s model size, steps, batch or data splits differ from the '
        'recipe\'s (listed under the row; no difference is shown); "different test set": a '
        "ChartCheck test_two score on the 2024 re-annotation, not the paper's test set 2; "
        '"not run": the row\'s recipe has no run here; "no recipe": chartjax cannot run the '
        'row (docs/recipes.md says why); "not evaluated": the run has no metrics of that '
        'split; "unavailable": the metric could not be computed (reason in the JSON). Under '
        "each compared row: what its recipe substitutes for the paper's run."
        + ("" if all_rows else " Rows without a run here are counted, not listed (--all)."),
    ]
    untouched = []
    for t in result["tables"]:
        shown = [r for r in t["rows"] if all_rows or r["run"]]
        if not shown:
            untouched.append(f"{t['paper_title']} Table {t['table']} ({len(t['rows'])} rows)")
            continue
        out += ["", f"## {t['paper_title']}, Table {t['table']}: {t['title']}", ""]
        if t["note"]:
            out += [t["note"], ""]
        header = ["row", "recipe", "run @ step"]
        for c in t["columns"]:
            header += [f"{c['label']} paper", f"{c['label']} ours"]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---|" * 3 + "---:|" * (2 * len(t["columns"])))
        for r in shown:
            line = [r["row"] + (f" ({r['note']})" if r["note"] else "")]
            line += [f"`{r['recipe']}`" if r["recipe"] else "—", _run_cell(r)]
            for c, cell in zip(t["columns"], r["cells"]):
                d = (
                    c["decimals"]
                    if cell["paper"] is None
                    else _decimals(cell["paper"], c["decimals"])
                )
                line += ["—" if cell["paper"] is None else _fmt(cell["paper"], d), _ours(cell, d)]
            out.append("| " + " | ".join(line) + " |")
            if r["run"]:
                out += _under_row(r, len(line))
        if len(shown) < len(t["rows"]):
            n = len(t["rows"]) - len(shown)
            out += ["", f"{n} other row{'s' * (n > 1)} of this table without a run here (--all)."]
    if untouched:
        out += [
            "",
            f"{len(untouched)} tables without a run here (--all lists them): "
            + "; ".join(untouched)
            + ".",
        ]
    out += ["", "## Runs without a paper row", ""]
    if not result["other_runs"]:
        out.append("(none)")
    else:
        out += ["| run | recipe | split | step | metrics |", "|---|---|---|---:|---|"]
        for run in result["other_runs"]:
            recipe = f"`{run['recipe']}`" if run["recipe"] else "(not a recipe run)"
            if not run["splits"]:
                out.append(f"| `{run['dir']}` | {recipe} | — | — | no metrics.json yet |")
            for split, v in run["splits"].items():
                metrics = ", ".join(f"{k} {val:.4g}" for k, val in sorted(v["metrics"].items()))
                out.append(f"| `{run['dir']}` | {recipe} | {split} | {v['step']} | {metrics} |")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ command line --------------


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", required=True, help="the folder holding the recipe runs")
    p.add_argument("--out", required=True, help="the markdown file to write")
    p.add_argument("--json", default=None, help="the JSON file (default: --out with .json)")
    p.add_argument("--numbers", default=None, help="another paper-numbers file")
    p.add_argument(
        "--all",
        action="store_true",
        help="list every paper row in the markdown, also those without a run under --runs "
        "(by default they are counted; the JSON always has every row)",
    )
    args = p.parse_args(argv)
    if not os.path.isdir(args.runs):
        p.error(f"--runs {args.runs!r} is not a folder")
    result = build(load_numbers(args.numbers), find_runs(args.runs))
    json_path = args.json or os.path.splitext(args.out)[0] + ".json"
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(to_markdown(result, all_rows=args.all))
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    ran = sum(1 for t in result["tables"] for r in t["rows"] if r["run"])
    print(f"{ran} paper rows with a run; wrote {args.out} and {json_path}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
