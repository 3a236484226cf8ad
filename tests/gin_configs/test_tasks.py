"""docs/recipes.md and gin_configs/tasks/ agree: every paper-row recipe is in the table and every
recipe the table names exists (smoke, demo and synthetic recipes are not paper rows)."""

import os
import re
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
NOT_ROWS = re.compile(r"(_smoke|_demo_|^synthetic_)")


def test_recipes_table_matches_the_recipe_files():
    text = open(os.path.join(ROOT, "docs", "recipes.md"), encoding="utf-8").read()
    files = {
        f[:-4] for f in os.listdir(os.path.join(ROOT, "gin_configs", "tasks")) if f.endswith(".gin")
    }
    rows = {f for f in files if not NOT_ROWS.search(f)}
    named = set()
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            named.update(re.findall(r"^`([a-z0-9_]+)`$", cells[3]) if len(cells) > 3 else [])
    assert rows - named == set(), f"recipes missing from docs/recipes.md: {sorted(rows - named)}"
    assert named - files == set(), f"docs/recipes.md names unknown recipes: {named - files}"
    assert len(named) >= 29  # 15 ChartCheck + 6 Chart-to-Text + 5 CHART-Info/DePlot + 3 FigureQA
