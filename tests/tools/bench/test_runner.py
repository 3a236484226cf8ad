"""The bench runner (tools/bench/runner.py) on a tiny bench: a few chartjax-train steps of the
synthetic smoke recipe, read back from train_metrics.jsonl and metrics.json."""

import json

import pytest

from chartjax.tools.bench import baselines, benches, runner


def test_every_bench_names_existing_recipes():
    import os

    for bench in benches.BENCHES.values():
        for arm in bench.arms.values():
            for gin in arm.recipe:
                assert os.path.exists(os.path.join("gin_configs", gin)), (bench.name, gin)


@pytest.mark.slow
def test_runner_trains_through_the_product_and_reads_its_logs(tmp_path, capsys):
    tiny = runner.Bench(
        "tiny",
        "two steps of the smoke recipe",
        {"t5": runner.Arm(("tasks/t5_synthetic_smoke.gin",))},
        corpus=("echo 1 > {corpus}/made.txt",),
        bindings=(
            "train.num_train_steps = 2",
            "train.log_every = 1",
            "train.checkpoint_every = 2",
            "train.progress = False",
        ),
        metric_keys=("token_accuracy",),
        baseline=lambda corpus: {"made": open(f"{corpus}/made.txt").read().strip()},
        check=lambda r: {"steps": r["arms"]["t5"]["train"]["step"]},
    )
    argv = ["tiny", "--workdir", str(tmp_path / "w"), "--cache", str(tmp_path / "c")]
    report = runner.main(argv, benches={"tiny": tiny})
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(report, default=str))
    res = report["results"]
    t5 = res["arms"]["t5"]
    assert t5["train"]["step"] == 2 and "loss" in t5["train"] and "compile_s" in t5["train"]
    assert t5["train"]["median_step_s"] > 0 and t5["train"]["median_input_wait_fraction"] >= 0
    assert set(t5["eval"]["validation"]) == {"step", "num_examples", "token_accuracy"}
    assert res["baseline"] == {"made": "1"} and res["check"] == {"steps": 2}
    assert res["cpu_s"]["total"] >= res["cpu_s"]["t5"] > 0  # the arm's process tree counts
    assert res["commands"]["t5"][0][1:3] == ["-m", "chartjax.tools.train"]
    # a second bench of the same corpus commands reuses the build
    assert runner.prepare_corpus(tiny, str(tmp_path / "c"))[0] == res["corpus"]


def test_a_failing_command_names_its_output(tmp_path):
    bad = runner.Bench("bad", "", {}, corpus=("echo boom; exit 3",))
    with pytest.raises(runner.BenchError, match="boom"):
        runner.prepare_corpus(bad, str(tmp_path))


def test_figureqa_majority_is_chosen_on_train1(tmp_path):
    for split, answers in (("train1", [1, 1, 0]), ("validation1", [0, 0, 1, 1])):
        (tmp_path / "raw" / split).mkdir(parents=True)
        pairs = {"qa_pairs": [{"answer": a} for a in answers]}
        (tmp_path / "raw" / split / "qa_pairs.json").write_text(json.dumps(pairs))
    out = baselines.figureqa_majority(str(tmp_path))
    assert out["answer"] == "yes" and out["validation1_accuracy"] == 0.5


def test_ordering_check_needs_every_gap_beyond_the_intervals():
    def res(accs):
        arms = {a: {"eval": {"v": {"accuracy": x, "num_examples": 4000}}} for a, x in accs.items()}
        return {"arms": arms}

    check = benches.ordering(("t", "c", "r"), "v")
    assert check(res({"t": 0.5, "c": 0.6, "r": 0.7}))["holds"]
    assert not check(res({"t": 0.5, "c": 0.6, "r": 0.605}))["holds"]
    assert not check(res({"t": 0.6, "c": 0.7, "r": 0.8}))["holds"]  # text-only off chance
