"""Which ChartCheck test set 2 a score is on, read from the build (no jax, no TensorFlow).

Test set 2 has two versions: the paper's (Table 1: 981 claims, 503 supports / 478 refutes) and
the 2024 re-annotation published today (497 / 484). The builder records which one it read in
its `metadata.json` (tfds_builders/chartcheck/test_sets.py); every metrics.json that scores
test_two carries it as `provenance.libraries[TEST_TWO_KEY]`, and chartjax.tools.paper_tables
marks a comparison with the paper on the re-annotation "different test set". The evaluation
(the chartcheck tasks' scoring) and chartjax-score (tfds references) both call
`test_set_provenance`.
"""

from __future__ import annotations

import json
import os

TEST_TWO_KEY = "chartcheck_test_two"
PAPER = "paper_2023"  # = tfds_builders.chartcheck.test_sets.PAPER


def test_set_provenance(builder_dir: str, split: str) -> dict[str, str]:
    """`{TEST_TWO_KEY: "<version> (<file>: <n> claims, <s> supports / <r> refutes; by
    <how>)"}` for a split that reads test_two ("test_two", "test_two[:10]", "a+test_two"),
    from the build's metadata.json; "unknown ..." for a build that predates the record; {} for
    other splits."""
    names = {part.strip().split("[", 1)[0] for part in split.split("+")}
    if "test_two" not in names:
        return {}
    try:
        with open(os.path.join(builder_dir, "metadata.json"), encoding="utf-8") as f:
            found = json.load(f).get("test_two")
    except (OSError, ValueError):
        found = None
    if not found:
        return {TEST_TWO_KEY: "unknown (a build without metadata.json: rebuild with 2.1.0)"}
    how = str(found.get("recognized_by", "")).split(":", 1)[0]
    return {
        TEST_TWO_KEY: f"{found['version']} ({found.get('file')}: {found.get('claims')} claims, "
        f"{found.get('supports')} supports / {found.get('refutes')} refutes; by {how})"
    }


def is_papers(value: str | None) -> bool | None:
    """Whether a recorded test set (the TEST_TWO_KEY value) is the paper's; None: unknown."""
    if not value or value.startswith("unknown"):
        return None
    return value.split()[0] == PAPER
