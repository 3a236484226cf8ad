"""tools/demo.py's own parts: the corpus stamp, the recipes it trains, and the printed verdict
and comparison.json read from each run's metrics.json (the runs themselves are `make demo`)."""

import json
import os

import gin
import pytest

from chartjax import config as config_lib
from chartjax.metrics.classification import wilson_interval
from chartjax.synth import figureqa as synth
from chartjax.tools import demo


def _metrics(correct, n, step):
    low, high = wilson_interval(correct, n)
    m = {"accuracy": correct / n, "accuracy_ci95_low": low, "accuracy_ci95_high": high}
    template = {"0": dict(m, n=n // 2), "1": dict(m, n=n - n // 2)}
    return {
        "task": "figureqa",
        "split": "validation1",
        "step": step,
        "num_examples": n,
        "metrics": dict(m, macro_f1=0.5),
        "breakdowns": {"question_template": template},
    }


def _workdir(tmp_path, name, steps_and_counts, n=1000):
    wd = tmp_path / "runs" / name
    for step, correct in steps_and_counts:
        d = wd / "eval" / "validation1" / f"step_{step}"
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(json.dumps(_metrics(correct, n, step)))
    rows = [{"step": s, "loss": 0.7 - s / 1e4, "accuracy": 0.5} for s in (50, 100)]
    (wd / "train_metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    return str(wd)


def test_report_names_the_winner_on_validation1_beyond_both_intervals(tmp_path, capsys):
    runs = {
        # step 900's file must lose to step 2000's (numeric, not lexical, order)
        "rn": ("RN", _workdir(tmp_path, "rn", [(900, 600), (2000, 880)])),
        "text_only": ("text-only", _workdir(tmp_path, "text_only", [(1000, 505)])),
    }
    result = demo.report(runs, str(tmp_path))
    out = capsys.readouterr().out
    # Wilson 95%: 880/1000 -> [85.8, 89.9]; 505/1000 -> [47.4, 53.6]
    assert "RN beats text-only on validation1 beyond the 95% CIs: RN 88.00% [85.8, 89.9]" in out
    assert "text-only 50.50% [47.4, 53.6]" in out
    assert "template 0 (Is X the minimum?)" in out
    saved = json.loads((tmp_path / "comparison.json").read_text())
    assert saved == json.loads(json.dumps(result))
    assert saved["winner"] == "RN" and saved["split"] == "validation1"
    assert saved["corpus"] == demo.CORPUS_NAME
    assert saved["models"]["rn"]["step"] == 2000 and saved["models"]["rn"]["n"] == 1000
    assert saved["models"]["rn"]["metrics_json"].endswith("step_2000/metrics.json")
    assert (tmp_path / "training_curves.png").stat().st_size > 0


def test_verdict_overlap_and_reverse():
    rn, text = _metrics(540, 1000, 1)["metrics"], _metrics(505, 1000, 1)["metrics"]
    sentence, winner = demo.verdict(("RN", rn), ("text-only", text))
    assert winner is None and sentence.startswith("RN and text-only do not differ")
    sentence, winner = demo.verdict(("RN", text), ("text-only", _metrics(600, 1000, 1)["metrics"]))
    assert winner == "text-only" and sentence.startswith("text-only beats RN")


def test_missing_evaluation_is_named(tmp_path):
    with pytest.raises(SystemExit, match="no evaluation of validation1"):
        demo.latest_metrics(str(tmp_path))


def test_corpus_stamp_tracks_the_settings(tmp_path, monkeypatch):
    import subprocess
    import types

    from chartjax.tools.bench import corpora

    class Args:
        train_images, val_images, seed = 2000, 250, 0

    calls = []
    monkeypatch.setattr(synth, "generate", lambda raw, **kw: calls.append(kw))
    monkeypatch.setattr(
        subprocess,
        "run",
        lambda cmd, **kw: calls.append(cmd) or types.SimpleNamespace(returncode=0),
    )
    path = tmp_path / "corpus.json"
    gen = dict(train_images=1, val_images=1, seed=0, workers=1, options=demo.CORPUS)

    def prepare(stamp):
        return corpora.figureqa_stamped(
            str(tmp_path / "raw"), str(tmp_path / "tfds"), str(path), stamp, gen
        )

    stamp = demo.corpus_stamp(Args)
    assert not prepare(stamp) and len(calls) == 2  # generated, then `tfds build`
    assert calls[1][1] == "build" and json.loads(path.read_text()) == stamp
    assert prepare(stamp) and len(calls) == 2  # the same stamp: reused
    Args.seed = 1
    assert not prepare(demo.corpus_stamp(Args)) and len(calls) == 4
    path.write_text("{not json")
    assert not prepare(demo.corpus_stamp(Args)) and len(calls) == 6
    synth.Options(**demo.CORPUS).check()  # the generator accepts the demo's corpus


@pytest.mark.parametrize("recipe", ["figureqa_demo_rn", "figureqa_demo_text_only"])
def test_demo_recipes_evaluate_validation1_with_the_measured_settings(recipe):
    from chartjax.models import configurables
    from chartjax.tasks import figureqa

    gin.clear_config()
    try:
        config_lib.parse_gin([f"tasks/{recipe}.gin"], [])
        assert gin.query_parameter("figureqa_task.eval_splits") == ("validation1",)
        lr = gin.query_parameter("make_optimizer.lr")
        if recipe == "figureqa_demo_rn":  # cosine from 1e-3 to 0 at the last step
            assert lr is None and gin.query_parameter("schedule.peak") == 1e-3
            steps = gin.query_parameter("train.num_train_steps")
            assert gin.query_parameter("schedule.total_steps") == steps
        else:
            assert lr == 1e-3
        assert gin.query_parameter("train.global_batch_size") == 32
        # not the paper protocol the included recipes carry (runs/figureqa_adam.gin)
        assert gin.query_parameter("train.selection") is None
        assert gin.query_parameter("figureqa_task.train_pad") == 0
        cfg = configurables.RNConfig()  # gin's: the recipe's bindings
        assert cfg.dropout == 0.0 and cfg.image_size == 64
        assert figureqa.make_task().eval_splits == ("validation1",)
    finally:
        gin.clear_config()
    assert os.path.exists(os.path.join(demo.ROOT, "gin_configs", "tasks", f"{recipe}.gin"))
