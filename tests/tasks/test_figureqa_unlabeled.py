"""chartjax-eval on a FigureQA workdir (issue 27, items 4, 5 and 9): a split without answers
(no_annot_test1 stores -1) is predicted, not refused: predictions.jsonl without targets, which
chartjax-score scores against a key, and a metrics.json that scores nothing and says why; the
labelled split's metrics reach TensorBoard as `eval/<split>/<metric>` at the checkpoint's step,
a progress bar counts the batches, and report.html shows each question's figure, its template's
text and yes/no answers."""

import json

import gin
import pytest

from chartjax import config as config_lib
from chartjax import train as train_lib
from chartjax.metrics import prediction_files, report
from chartjax.tasks.figureqa import TEMPLATES
from chartjax.tools import evaluate as eval_cli
from chartjax.tools import score
from tests.tasks.test_figureqa import TINY

STEPS = ["train.num_train_steps = 2", "train.checkpoint_every = 2", "train.final_eval = False"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, tfds_dir):
    """A 2-step RN run on the dummy data, not evaluated: chartjax-eval evaluates it."""
    data_dir = tfds_dir("figureqa")
    out = tmp_path_factory.mktemp("rn")
    gin.clear_config()
    bindings = [f"figureqa_task.data_dir = '{data_dir}'", "BatchEmaSelection.final_split = None"]
    config_lib.parse_gin(["tasks/figureqa_rn.gin"], TINY + bindings + STEPS)
    try:
        train_lib.train(str(out))
    finally:
        gin.clear_config()
    return out, data_dir


def _events(workdir):
    """{tag: [(step, value)]} read back with TensorFlow's own event reader."""
    import tensorflow as tf

    out = {}
    for path in sorted((workdir / "tensorboard").glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for v in event.summary.value:
                out.setdefault(v.tag, []).append((event.step, v.simple_value))
    return out


@pytest.mark.slow
def test_a_split_without_answers_is_predicted_and_scorable(workdir, tmp_path, capsys):
    run, data_dir = workdir
    status = eval_cli.main([f"--workdir={run}", "--split=no_annot_test1", "--split=validation1"])
    gin.clear_config()
    captured = capsys.readouterr()
    assert status == 0, captured.err
    step_dir = run / "eval" / "no_annot_test1" / "step_2"
    assert "no_annot_test1: predictions only (3 examples, the split has no answers)" in captured.out
    assert "eval validation1" in captured.err and "batch" in captured.err  # the progress bar

    # predictions.jsonl: id, prediction 0/1 and its yes/no, no target.
    rows = prediction_files.read_jsonl(step_dir / "predictions.jsonl")
    assert [r["id"] for r in rows] == ["0/0", "1/1", "1/2"]  # <image_index>/<position in qa_pairs>
    for r in rows:
        assert "target" not in r and r["prediction"] in (0, 1)
        assert r["prediction_text"] == ("no", "yes")[r["prediction"]]
    # metrics.json: no invented score; every metric unavailable, saying why.
    obj = json.loads((step_dir / "metrics.json").read_text())
    report.validate_metrics(obj)
    assert obj["metrics"] == {} and obj["num_examples"] == 3
    assert set(obj["unavailable"]) == {
        "accuracy",
        "macro_f1",
        "accuracy_ci95_low",
        "accuracy_ci95_high",
    }
    assert all(
        "has no answers" in why and "predictions only" in why for why in obj["unavailable"].values()
    )

    # The file as written is what chartjax-score takes, against a key...
    key = tmp_path / "key.jsonl"
    prediction_files.write_jsonl(key, [{"id": r["id"], "target": 1} for r in rows])
    out = tmp_path / "scored.json"
    args = ["--task", "figureqa", "--predictions", str(step_dir / "predictions.jsonl")]
    assert score.main([*args, "--references", str(key), "--out", str(out)]) == 0
    accuracy = json.loads(out.read_text())["metrics"]["accuracy"]
    assert accuracy == sum(r["prediction"] for r in rows) / 3
    # ... and against the split itself, which has none to give.
    refs = ["--references", "tfds:figureqa:no_annot_test1", "--data_dir", data_dir]
    assert score.main([*args, *refs, "--out", str(out)]) == 0
    assert json.loads(out.read_text())["metrics"].get("accuracy") is None

    # TensorBoard: the labelled split at the checkpoint's step; nothing for the other.
    scalars = _events(run)
    metrics = json.loads((run / "eval" / "validation1" / "step_2" / "metrics.json").read_text())
    assert scalars["eval/validation1/accuracy"] == [
        (2, pytest.approx(metrics["metrics"]["accuracy"]))
    ]
    assert not any("no_annot" in tag for tag in scalars)
    assert "train/loss" in scalars

    # report.html: predictions only; each question's figure, its template, yes/no.
    html = (step_dir / "report.html").read_text()
    assert "id='predictions-only'" in html
    assert html.count("data:image/png;base64,") == 3  # figures 0 and 1 of the 3 questions
    assert sorted(p.name for p in (run / "eval" / ".figures" / "no_annot_test1").iterdir()) == [
        "0.png",
        "1.png",
    ]
    assert f"template 4: {TEMPLATES[4].format(c1='X', c2='Y')}" in html
    assert html.count("<td>yes</td>") + html.count("<td>no</td>") == 3
    labelled = (run / "eval" / "validation1" / "step_2" / "report.html").read_text()
    assert "1: Is X the maximum?" in labelled  # the question_template breakdown, as text
    assert labelled.count("data:image/png;base64,") == 3  # two figures and the breakdown plot
