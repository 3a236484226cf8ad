"""chartjax.plots: train_metrics.jsonl and evaluation reading, and the training-curves PNG
train.py writes (and plot_run draws): training panels, then the evaluations per split."""

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from chartjax import plots

# matplotlib's first two default line colours (tab:blue, tab:orange).
C0, C1 = (31, 119, 180), (255, 127, 14)


def _run(folder, rows, blank_lines=False):
    folder.mkdir()
    with open(folder / "train_metrics.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n" + ("\n" if blank_lines else ""))
    return str(folder)


def _rows(n=40, scale=1.0):
    return [
        {"step": s, "loss": scale * 3.0 / s, "accuracy": 1 - 0.5 / s, "learning_rate": 1e-3}
        for s in range(1, n + 1)
    ]


def _pixels(path):
    with Image.open(path) as im:
        assert im.format == "PNG"
        return np.asarray(im.convert("RGB")).astype(int)


def _count(px, colour, tol=12):
    return int((np.abs(px - np.array(colour)).max(axis=-1) <= tol).sum())


# A legend entry is ~60 pixels of its colour; a line across a panel is several hundred.
LINE = 300


def test_read_train_metrics_skips_blank_lines(tmp_path):
    rows = _rows(3)
    run = _run(tmp_path / "run", rows, blank_lines=True)
    assert plots.read_train_metrics(f"{run}/train_metrics.jsonl") == rows


def test_read_train_metrics_names_the_line_that_is_not_json(tmp_path):
    path = tmp_path / "train_metrics.jsonl"
    path.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": \n')
    with pytest.raises(ValueError, match=r"train_metrics.jsonl:2: not JSON"):
        plots.read_train_metrics(str(path))


def test_training_curves_png_has_one_panel_per_key_with_the_run_drawn(tmp_path):
    run = _run(tmp_path / "rn", _rows())
    out = tmp_path / "training_curves.png"
    assert plots.plot_training_curves({"rn": run}, str(out)) == str(out)
    assert out.stat().st_size > 0
    px = _pixels(out)
    # figsize (5 * 2 keys, 3.6) inches at 110 dpi.
    assert px.shape == (396, 1100, 3)
    assert (px != px[0, 0]).any(axis=-1).mean() > 0.01  # not a blank canvas
    assert tuple(px[0, 0]) == (255, 255, 255)
    # The run's line is drawn in both the loss (left) and accuracy (right) panel.
    assert _count(px[:, :550], C0) > LINE and _count(px[:, 550:], C0) > LINE
    assert _count(px, C1) == 0


def test_training_curves_one_line_per_run_and_custom_keys(tmp_path):
    runs = {
        "a": _run(tmp_path / "a", _rows()),
        "b": _run(tmp_path / "b", _rows(scale=2.0)),
    }
    out = tmp_path / "curves.png"
    plots.plot_training_curves(runs, str(out), keys=("loss",))
    px = _pixels(out)
    assert px.shape == (396, 550, 3)
    assert _count(px, C0) > LINE and _count(px, C1) > LINE


@pytest.mark.filterwarnings("ignore:No artists with labels found:UserWarning")
def test_training_curves_with_a_key_the_run_never_logged(tmp_path):
    # A seq2seq run logs no accuracy: its panel stays empty, the loss panel is still drawn.
    rows = [{"step": s, "loss": 1.0 / s} for s in range(1, 6)]  # < 30 points: with markers
    out = tmp_path / "curves.png"
    plots.plot_training_curves({"t5": _run(tmp_path / "t5", rows)}, str(out))
    px = _pixels(out)
    assert px.shape == (396, 1100, 3)
    assert _count(px[:, :550], C0) > LINE
    assert _count(px[:, 550:], C0) == 0  # no line and no legend entry


def _eval(workdir, split, step, metrics):
    """An evaluation's metrics.json where chartjax/evaluate.py writes it."""
    folder = Path(workdir) / "eval" / split / f"step_{step}"
    folder.mkdir(parents=True, exist_ok=True)
    obj = {"task": "figureqa", "split": split, "step": step, "num_examples": 8, "metrics": metrics}
    (folder / "metrics.json").write_text(json.dumps(obj))


def test_read_eval_metrics_by_split_and_step_without_predictions_only_splits(tmp_path):
    run = _run(tmp_path / "rn", _rows(3))
    _eval(run, "validation1", 20, {"accuracy": 0.75})
    _eval(run, "validation1", 10, {"accuracy": 0.5})
    _eval(run, "no_annot_test1", 20, {})  # predicted only: nothing to plot
    (tmp_path / "rn" / "eval" / ".figures" / "validation1").mkdir(parents=True)  # not a split
    assert plots.read_eval_metrics(run) == {
        "validation1": [(10, {"accuracy": 0.5}), (20, {"accuracy": 0.75})]
    }
    assert plots.default_eval_keys([plots.read_eval_metrics(run)]) == ("accuracy",)
    assert plots.default_eval_keys([{"test": [(1, {"rms_precision": 1.0, "rms_f1": 0.2})]}]) == (
        "rms_f1",
    )


def test_training_curves_add_an_eval_panel_with_a_line_per_split(tmp_path):
    run = _run(tmp_path / "rn", _rows())
    for step, acc in ((10, 0.5), (20, 0.6), (40, 0.8)):
        ci = {"accuracy_ci95_low": acc - 0.1, "accuracy_ci95_high": acc + 0.1}
        _eval(run, "validation1", step, {"accuracy": acc, **ci})
        _eval(run, "validation2", step, {"accuracy": acc - 0.2})
    out = tmp_path / "curves.png"
    plots.plot_training_curves({"rn": run}, str(out))
    px = _pixels(out)
    assert px.shape == (396, 1650, 3)  # loss, accuracy, eval accuracy
    eval_panel = px[:, 1100:]
    assert _count(eval_panel, C0) > LINE and _count(eval_panel, C1) > LINE  # both splits
    assert _count(px[:, 550:1100], C1) == 0  # one run: one training line per panel
    # The CLI: the same panels, or none with --eval_keys=.
    from chartjax.tools import plot_run

    plot_run.main(["--out", str(tmp_path / "cli.png"), f"rn={run}"])
    assert _pixels(tmp_path / "cli.png").shape == (396, 1650, 3)
    plot_run.main(["--out", str(tmp_path / "train_only.png"), "--eval_keys=", f"rn={run}"])
    assert _pixels(tmp_path / "train_only.png").shape == (396, 1100, 3)
