"""paper_tables prefers what a selection rule chose (`eval_best/`) over the last step (`eval/`):
the FigureQA paper reports the parameters its moving average on validation2 picked."""

from __future__ import annotations

import json
from pathlib import Path

from chartjax.metrics import report
from chartjax.tools import paper_tables


def _metrics(folder: Path, split: str, step: int, accuracy: float) -> None:
    out = folder / split / f"step_{step}"
    out.mkdir(parents=True)
    obj = report.build_metrics(
        task="figureqa", split=split, step=step, num_examples=5, metrics={"accuracy": accuracy}
    )
    report.write_metrics(out / "metrics.json", obj)


def test_the_selected_parameters_fill_the_paper_row(tmp_path):
    root = tmp_path / "runs"
    workdir = root / "rn"
    workdir.mkdir(parents=True)
    (workdir / "config.gin").write_text("recipe.gin_files = ['tasks/figureqa_rn.gin']\n")
    _metrics(workdir / "eval", "validation2", 900, 0.60)  # the last step
    _metrics(workdir / "eval", "no_annot_test2", 900, 0.59)
    _metrics(workdir / "eval_best", "validation2", 640, 0.7254)  # the moving average's choice

    (run,) = paper_tables.find_runs(str(root))
    assert run["splits"]["validation2"]["step"] == 640
    assert run["splits"]["validation2"]["selected"] is True
    assert run["splits"]["no_annot_test2"]["selected"] is False  # no selected eval: last step

    md = tmp_path / "tables.md"
    paper_tables.main(["--runs", str(root), "--out", str(md)])
    result = json.loads((tmp_path / "tables.json").read_text())
    (table,) = [t for t in result["tables"] if (t["paper"], t["table"]) == ("figureqa", "3")]
    (rn,) = [r for r in table["rows"] if r["row"] == "RN"]
    val, test = rn["cells"]
    assert (val["ours"], val["step"], val["selected"]) == (72.54, 640, True)
    assert (test["ours"], test["step"], test["selected"]) == (59.0, 900, False)
    assert "| RN | `figureqa_rn` | `rn` @ 640 (selected), 900 | 72.54 | 72.54 (+0.00) [" in (
        md.read_text()
    )
