"""ChartCheck task: prompts and targets of every mode, the 50/50 split, few-shot picks, scoring;
every gin_configs/tasks/chartcheck_*.gin recipe end to end on the builder's dummy data (tiny
models, 2 training steps or evaluation only), including the DePlot tables / predicted-label
files and the error for an id they lack."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import gin
import pytest

from chartjax import config as config_lib
from chartjax.metrics import prediction_files, report
from chartjax.tasks import chartcheck as cc
from tests.tasks.tiny_recipes import P2S_TINY, RUN_TINY, T5_TINY, recipe_batches

ROOT = str(Path(__file__).resolve().parents[2])
RECIPE_DIR = os.path.join(ROOT, "gin_configs", "tasks")

EXAMPLE = {
    "id": "test:3",
    "caption": "Market share",
    "claim": "A has the largest share.",
    "label": 1,
    "explanation": "A is 50%.",
    "chart_type": "pie_chart",
    "reasoning_types": ["Compare"],
}
TABLE = "TITLE | Market share <0x0A> A | 50% <0x0A> B | 20%"


def _one(expand, **overrides):
    (rec,) = expand(dict(EXAMPLE, **overrides))
    return rec


# ----------------------------------------------------------------------- prompts, targets --


def test_matcha_prompts_and_targets():
    rec = _one(cc.make_expand("matcha_class", train_split="train"))
    assert rec["prompt"] == (
        "The chart below has the following caption: Market share. Given the "
        "caption and the chart below, is the following claim true: A has the "
        "largest share.?"
    )
    assert rec["target"] == "Yes"
    assert rec["meta"] == {
        "label": "TRUE",
        "chart_type": "pie_chart",
        "reasoning_types": ["Compare"],
        "explanation": "A is 50%.",
        "prompt_kind": "class",
    }
    assert _one(cc.make_expand("matcha_class", train_split="train"), label=0)["target"] == "No"
    multi = _one(cc.make_expand("matcha_multi", train_split="train"), label=0)
    assert multi["prompt"] == rec["prompt"] + " Explain why?"
    assert multi["target"] == "No. Explanation: A is 50%."
    script = _one(
        cc.make_expand("matcha_class", train_split="train", matcha_prompt="zero_shot_script")
    )
    assert script["prompt"] == (
        "is the following claim supported by the chart: A has the largest share. (Yes/No)"
    )


def test_5050_halves_train_claims_and_evaluates_multi():
    expand = cc.make_expand("matcha_5050", train_split="train")
    ids = [f"train:{i}" for i in range(40)]
    kinds = {i: _one(expand, id=i)["meta"]["prompt_kind"] for i in ids}
    assert set(kinds.values()) == {"class", "multi"}
    assert 10 <= sum(k == "multi" for k in kinds.values()) <= 30
    # The dummy train split (train:0..4) has claims in both halves.
    assert {kinds[f"train:{i}"] for i in range(5)} == {"class", "multi"}
    assert all(kinds[i] == ("multi" if cc.in_explanation_half(i) else "class") for i in ids)
    for rec in (_one(expand, id=i) for i in ids):  # the target follows the prompt kind
        assert rec["target"].startswith("Yes. Explanation:") == (
            rec["meta"]["prompt_kind"] == "multi"
        )
    # Evaluation splits always see the multi prompt; the halves are stable across calls.
    assert {
        _one(expand, id=f"{s}:{i}")["meta"]["prompt_kind"]
        for s in ("val", "test", "test_two")
        for i in range(20)
    } == {"multi"}
    assert kinds == {
        i: _one(cc.make_expand("matcha_5050", train_split="train"), id=i)["meta"]["prompt_kind"]
        for i in ids
    }


def test_flan_prompts_and_targets():
    table = cc.format_table(TABLE, "official")
    assert table == "['TITLE | Market share \\n', ' A | 50% \\n', ' B | 20%']"
    assert cc.format_table(TABLE, "text") == "TITLE | Market share \n A | 50% \n B | 20%"

    def expand(mode, **kw):
        return cc.make_expand(mode, train_split="train", table_for=lambda eid: table, **kw)

    cls = _one(expand("flan_class"))
    assert cls["prompt"] == (
        "Classify if claim 'A has the largest share.' is true or false given "
        f"this caption: Market share and this table: {table}.\n Answer:"
    )
    assert cls["target"] == "true."
    multi = _one(expand("flan_multi"), label=0)
    body = (
        "Classify and explain if claim 'A has the largest share.' is true or false given this "
        f"caption: Market share and this table: {table}.\n Answer:"
    )
    assert multi["prompt"] == body and multi["target"] == "false. A is 50%."
    zero = _one(expand("flan_multi", prompt_setting="zero"))
    assert zero["prompt"] == (
        "\nGiven a claim, a table and it's caption, decide if the claim is "
        "true or false. \n\nComplete the following:\n\n " + body
    )
    few = _one(
        expand(
            "flan_multi", prompt_setting="few", few_shot=cc.few_shot_prefix(cc.OFFICIAL_FEW_SHOT)
        )
    )
    assert few["prompt"] == OFFICIAL_FEW_SHOT_PROMPT + " " + body
    gold = _one(expand("flan_explain_gold"), label=0)
    assert gold["prompt"] == (
        "Explain why 'A has the largest share.' is false given this caption: "
        f"Market share and table: {table}."
    )
    assert gold["target"] == "A is 50%." and gold["meta"]["input_label"] == "false"
    # Predicted labels replace the gold one where label_for gives one (test sets), not elsewhere.
    pred = cc.make_expand(
        "flan_explain_pred",
        train_split="train",
        table_for=lambda e: table,
        label_for=lambda eid: "true" if eid.startswith("test") else None,
    )
    # A predicted label reads "True"/"False", as the authors wrote it at test time; training
    # shows the gold label in lower case.
    assert _one(pred, label=0)["prompt"].startswith(
        "Explain why 'A has the largest share.' is True "
    )
    assert " is false " in _one(pred, id="train:1", label=0)["prompt"]


# The authors' INIT_PROMPT_FEW_SHOT (classification_explanation_flanT5.py), written out here.
OFFICIAL_FEW_SHOT_PROMPT = (
    "\nGiven a claim, a table and it's caption, decide if the claim is true or false. \n\n"
    "Examples: \n"
    "Classify and explain if claim 'Coal is the second-lowest source of energy for electricity "
    "production in Romania.' is true or false given this caption: 'Electricity production in "
    "Romania by source of energy.' and this table: 'TITLE | \n Other | 2 \n Hydro | 36% \n Coal | "
    "33% \n Nuclear | 19% \n Gas | 10%'.\n"
    "Answer: false. The chart shows that Coal contributes to 33% of the electricity production in "
    "Romania, which is the second-highest percentage among all the sources of energy listed in "
    "the chart.\n\n"
    "Classify and explain if claim 'Hydro is the primary source of energy for electricity "
    "production in Romania.' is true or false given this caption: 'Electricity production in "
    "Romania by source of energy.' and this table: 'TITLE | \n Other | 2 \n Hydro | 36% \n Coal | "
    "33% \n Nuclear | 19% \n Gas | 10%'.\n"
    "Answer: true. The chart shows that Hydro contributes to 36% of the electricity production in "
    "Romania, which is the highest percentage among all the sources of energy listed in the "
    "chart. \n\nComplete the following:\n"
)


def test_few_shot_picks_k_per_class_deterministically():
    train = [
        {
            "id": f"train:{i}",
            "label": "TRUE" if i % 3 else "FALSE",
            "claim": f"c{i}",
            "caption": "cap",
            "explanation": f"e{i}",
        }
        for i in range(12)
    ]
    picked = cc.pick_few_shot(train, 2)
    assert [e["label"] for e in picked] == ["FALSE", "TRUE", "FALSE", "TRUE"]
    assert picked == cc.pick_few_shot(list(reversed(train)), 2)  # order-free: by sha256(id)
    falses = sorted((e for e in train if e["label"] == "FALSE"), key=lambda e: cc.id_hash(e["id"]))
    assert [e["id"] for e in picked[::2]] == [e["id"] for e in falses[:2]]
    with pytest.raises(ValueError, match="only 4 FALSE"):
        cc.pick_few_shot(train, 5)
    prefix = cc.few_shot_prefix([dict(e, label=e["label"].lower(), table="T") for e in picked])
    assert prefix.count("Classify and explain if claim") == 4
    first = picked[0]
    assert (
        f"if claim '{first['claim']}' is true or false given this caption: 'cap' and this "
        f"table: 'T'.\nAnswer: false. {first['explanation']}\n\n"
    ) in prefix


def test_predicted_label_reading():
    assert cc.predicted_label({"prediction": "whatever", "label": "FALSE"}) == "false"
    assert cc.predicted_label({"prediction": "false. It is not.", "label": None}) == "false"
    assert cc.predicted_label({"prediction": "No idea"}) == "true"  # the authors' rule
    assert cc.explanation_text("matcha_multi", "Yes. Explanation: It rises.") == "It rises."
    assert cc.explanation_text("matcha_multi", "Yes") == ""
    assert cc.explanation_text("flan_multi", "true. It rises.") == "true. It rises."


def test_score_fn_classification_and_explanations():
    recs = [
        {
            "id": f"test:{i}",
            "target": t,
            "meta": {
                "label": g,
                "chart_type": ct,
                "reasoning_types": rt,
                "explanation": "It rises.",
            },
        }
        for i, (t, g, ct, rt) in enumerate(
            [
                ("Yes. Explanation: It rises.", "TRUE", "line_chart", ["Compare"]),
                ("No. Explanation: It rises.", "FALSE", "line_chart", []),
                ("Yes. Explanation: It falls.", "FALSE", "pie_chart", ["Compare", "Filter"]),
                ("No. Explanation: It rises.", "TRUE", "pie_chart", []),
            ]
        )
    ]
    texts = ["Yes. Explanation: It rises.", "No. Explanation: It rises.", "Yes, it does", "Maybe"]
    scores, extra = cc.make_score_fn("matcha_multi")(texts, recs, "test_one")
    assert scores.metrics["accuracy"] == 0.5 and scores.metrics["num_unparseable"] == 1
    assert [e["label"] for e in extra] == ["TRUE", "FALSE", "TRUE", None]
    assert scores.breakdowns["chart_type"]["line_chart"]["accuracy"] == 1.0
    assert scores.breakdowns["reasoning_type"]["Compare"]["n"] == 2
    # Explanations: the text after "Explanation:" (empty when missing) vs the gold explanation.
    assert 0 < scores.metrics["explanation_rouge_l"] < 1
    assert {"explanation_bertscore_f1", "explanation_bleurt"} <= set(scores.unavailable)
    flan, _ = cc.make_score_fn("flan_class")(["true.", "false.", "false", "neither"], recs, "x")
    assert flan.metrics["accuracy"] == 0.75 and flan.metrics["num_unparseable"] == 1
    assert not any(k.startswith("explanation_") for k in flan.metrics)
    expl, extra = cc.make_score_fn("flan_explain_gold")(
        ["It rises."] * 4, [dict(r, target="It rises.") for r in recs], "x"
    )
    assert "accuracy" not in expl.metrics and expl.metrics["explanation_rouge_l"] == 1.0
    assert extra[0] == {"gold_label": "TRUE"}


def test_bad_arguments_are_named():
    from chartjax.tasks.core import seq2seq

    text = seq2seq.Features(modality="text", vocab_file="unused")
    with pytest.raises(ValueError, match="mode 'nope'"):
        cc.make_task(mode="nope", features=text)
    with pytest.raises(ValueError, match="needs Features.modality = 'image'"):
        cc.make_task(mode="matcha_class", features=text)
    with pytest.raises(ValueError, match="needs tables_file"):
        cc.make_task(mode="flan_class", features=text)
    with pytest.raises(ValueError, match="needs label_predictions"):
        cc.make_task(mode="flan_explain_pred", tables_file="x", features=text)


# ----------------------------------------------------------------------- end to end --------
# Every recipe body goes through `recipe_pipeline` (its gin parsed with tiny sizes, the task
# built, its train and eval batches featurized from the dummy data, scored and written as
# metrics.json, no model). A train()/evaluate() run costs 5-20 s of tracing and checkpointing on
# 2 cores even with its compiles cached, so `test_recipe_end_to_end` runs one recipe per
# (model family x task kind) (issue #43 item 6, DESIGN §8); the other rows differ from their
# representative only in gin values that `test_recipe_pipeline` checks:
#
#   family                     task kind                                   end to end
#   MatCha (Pix2Struct)        fine-tune, verdict (+ explanation) as text  matcha_finetune_5050_multi
#                              (class / multi / 5050 prompts)              (every split)
#   MatCha (Pix2Struct)        zero-shot, evaluation only                  matcha_chartqa_zero
#   Flan-T5 on DePlot tables   fine-tune, explanation of a predicted label deplot_flant5_explanation_pred_labels
#                              (class / multi / gold-label explanation)
#   Flan-T5 on DePlot tables   zero/few-shot prompted, evaluation only     deplot_flant5_few_multi
#   DeBERTa / TAPAS            encoder classifier                          test_chartcheck_classifier.py
# The LoRA rows are peft/lora.gin on a row above; a gin run with it trains in
# tests/models/test_lora.py.

RUN_TINY = RUN_TINY + ["chartcheck_task.shuffle_buffer = 8"]
SPLIT_SIZES = {"train": 5, "validation": 3, "test_one": 4, "test_two": 3}
# The encoder-classifier rows (DeBERTa, TAPAS) have their own tests: test_chartcheck_classifier.py.
CLASSIFIER_RECIPES = ("chartcheck_deplot_deberta_class", "chartcheck_deplot_tapas_class")
RECIPES = sorted(
    f[:-4]
    for f in os.listdir(RECIPE_DIR)
    if f.startswith("chartcheck_") and f.endswith(".gin") and f[:-4] not in CLASSIFIER_RECIPES
)
EVAL_ONLY = {
    "chartcheck_matcha_chartqa_zero",
    "chartcheck_matcha_plotqa1_zero",
    "chartcheck_matcha_plotqa2_zero",
    "chartcheck_deplot_flant5_zero_multi",
    "chartcheck_deplot_flant5_few_multi",
}
E2E = [
    "chartcheck_matcha_finetune_5050_multi",
    "chartcheck_matcha_chartqa_zero",
    "chartcheck_deplot_flant5_explanation_pred_labels",
    "chartcheck_deplot_flant5_few_multi",
]
ALL_SPLITS = "chartcheck_matcha_finetune_5050_multi"  # evaluated on every split
CLASSIFY_ONLY = {"flan_class", "matcha_class"}


def recipe_text(recipe: str) -> str:
    """The recipe's text, the task recipes it includes (a LoRA variant includes its row's)
    written out in their place."""
    with open(os.path.join(RECIPE_DIR, recipe + ".gin")) as f:
        text = f.read()
    return re.sub(r"^include 'tasks/(\w+)\.gin'$", lambda m: recipe_text(m[1]), text, flags=re.M)


def recipe_body(recipe: str) -> str:
    """The recipe without its comments: several rows differ only in the weights they start
    from (a user binding), e.g. the three zero-shot MatCha rows."""
    return "\n".join(line for line in recipe_text(recipe).splitlines() if not line.startswith("#"))


# One pipeline run per distinct body (the same computation on the same input otherwise).
BODIES = {}
for _r in RECIPES:
    BODIES.setdefault(recipe_body(_r), _r)
DISTINCT = sorted(BODIES.values())


def recipe_mode(recipe: str) -> str:
    (mode,) = [
        line.split("=")[1].strip().strip('"')
        for line in recipe_text(recipe).splitlines()
        if line.startswith("chartcheck_task.mode")
    ]
    return mode


@pytest.fixture(scope="module")
def data_dir(tfds_dir):
    return tfds_dir("chartcheck")


@pytest.fixture(scope="module")
def all_ids(data_dir):
    from chartjax.data import sources

    bdir = sources.tfds_builder_dir("chartcheck", data_dir)
    return {
        split: sources.TfdsSource("chartcheck", directory=bdir).ids(split) for split in SPLIT_SIZES
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory, all_ids):
    """DePlot-style tables for every dummy id (as chartjax-infer writes them), and predicted
    labels for the test sets; plus copies that lack one id."""
    d = tmp_path_factory.mktemp("chartcheck_files")
    ids = [i for split in all_ids.values() for i in split]
    tables = [
        {"id": i, "prediction": f"TITLE | chart {n} <0x0A> Year | Value <0x0A> 2019 | {n}"}
        for n, i in enumerate(ids)
    ]
    labels = [
        {"id": i, "prediction": "false." if n % 2 else "true.", "target": "true."}
        for n, i in enumerate(all_ids["test_one"] + all_ids["test_two"])
    ]
    out = {}
    for name, rows in (("tables", tables), ("labels", labels)):
        out[name] = str(d / f"{name}.jsonl")
        prediction_files.write_jsonl(out[name], rows)
        out[name + "_missing"] = str(d / f"{name}_missing.jsonl")
        prediction_files.write_jsonl(
            out[name + "_missing"], [r for r in rows if r["id"] != all_ids["test_one"][1]]
        )
    return out


@pytest.fixture(scope="module")
def init_ckpts(tiny_t5x):
    """Tiny T5X checkpoints standing in for MatCha (Pix2Struct) and Flan-T5 (T5 v1.1)."""
    return {"p2s": tiny_t5x("pix2struct"), "t5": tiny_t5x("t5")}


def _bindings(recipe, vocab_file, data_dir, files, init_path="unused", extra=()):
    text = recipe_text(recipe)
    b = (
        (P2S_TINY if "models/pix2struct.gin" in text else T5_TINY)
        + RUN_TINY
        + [f"VOCAB = '{vocab_file}'", f"DATA_DIR = '{data_dir}'", f"INIT_PATH = '{init_path}'"]
    )
    if "TABLES = %gin.REQUIRED" in text:
        b.append(f"TABLES = '{files['tables']}'")
    if "LABELS = %gin.REQUIRED" in text:
        b.append(f"LABELS = '{files['labels']}'")
    return b + list(extra)


def _init(recipe, init_ckpts):
    return init_ckpts["p2s" if "models/pix2struct.gin" in recipe_text(recipe) else "t5"]


def _run(recipe, workdir, bindings, eval_only):
    from chartjax.evaluate import evaluate
    from chartjax.train import train

    gin.clear_config()
    config_lib.parse_gin([f"tasks/{recipe}.gin"], bindings)
    try:
        return evaluate(str(workdir)) if eval_only else train(str(workdir))
    finally:
        gin.clear_config()


def _check_metrics(obj, rows, split, mode, step):
    report.validate_metrics(obj)
    assert (obj["task"], obj["split"], obj["step"]) == ("chartcheck", split, step)
    assert obj["num_examples"] == SPLIT_SIZES[split]
    assert len(rows) == SPLIT_SIZES[split] and len({r["id"] for r in rows}) == len(rows)
    m = obj["metrics"]
    unavailable = set(obj["unavailable"])
    if not mode.startswith("flan_explain"):
        # Accuracy is what the predictions imply: unparseable verdicts are wrong, or left out of
        # both sides where the recipe drops them (num_skipped) as the Flan-T5 script did.
        right = sum(r["label"] == r["gold_label"] for r in rows)
        assert m["num_unparseable"] == sum(r["label"] is None for r in rows)
        assert m["num_scored"] == len(rows) - m["num_skipped"]
        assert m["num_skipped"] in (0, m["num_unparseable"])
        if m["num_scored"]:
            assert m["accuracy"] == pytest.approx(right / m["num_scored"])
            assert 0 <= m["macro_f1_ci95_low"] <= m["macro_f1"] <= m["macro_f1_ci95_high"] <= 1
            assert {"chart_type", "reasoning_type", "confusion"} <= set(obj["breakdowns"])
        else:  # every verdict dropped: nothing to score
            assert {"accuracy", "macro_f1"} <= unavailable
        unavailable -= {"accuracy", "macro_f1"}
    if split == "test_two":  # which test set 2 the build holds (the dummy's: the re-annotation)
        assert obj["provenance"]["libraries"]["chartcheck_test_two"].startswith(
            "reannotated_2024 (test_two.csv: 3 claims"
        )
    if mode not in CLASSIFY_ONLY:
        for name in ("bleu", "rouge_l", "meteor"):
            assert 0 <= m[f"explanation_{name}"] <= 1
        assert unavailable == {
            "explanation_bertscore_precision",
            "explanation_bertscore_recall",
            "explanation_bertscore_f1",
            "explanation_bleurt",
        }
        variant = "matcha_test" if mode.startswith("matcha") else "flan_t5_script"
        assert obj["provenance"]["libraries"]["chartcheck_explanations"].startswith(variant)
    else:
        assert not unavailable and "explanation_bleu" not in m


def _check_split(workdir, split, step, mode):
    mdir = workdir / "eval" / split / f"step_{step}"
    obj = json.loads((mdir / "metrics.json").read_text())
    rows = prediction_files.read_jsonl(mdir / "predictions.jsonl")
    _check_metrics(obj, rows, split, mode, step)
    return obj, rows


def test_recipes_sharing_a_body():
    groups = {}
    for r in RECIPES:
        groups.setdefault(BODIES[recipe_body(r)], []).append(r)
    assert len(RECIPES) == 17 and len(DISTINCT) == 12  # 15 paper rows and 2 LoRA variants
    # One end-to-end run per (family x task kind), each a recipe of this file; every mode's
    # prompts are featurized by test_recipe_pipeline.
    assert set(E2E) <= set(RECIPES) and {recipe_mode(r) for r in DISTINCT} == set(cc.MODES)
    assert sorted(groups["chartcheck_matcha_chartqa_zero"]) == [
        f"chartcheck_matcha_{m}_zero" for m in ("chartqa", "plotqa1", "plotqa2")
    ]
    assert sorted(groups["chartcheck_matcha_chartqa_finetune_5050_multi"]) == [
        f"chartcheck_matcha_{m}finetune_5050_multi"
        for m in ("chartqa_", "", "plotqa1_", "plotqa2_")
    ]


@pytest.mark.parametrize("recipe", DISTINCT)
def test_recipe_pipeline(recipe, vocab_file, data_dir, files):
    """The recipe's task on the dummy data, without a model: batches have the recipe's shapes,
    and scoring the targets themselves gives perfect metrics in a valid metrics.json."""
    import numpy as np

    mode, image = recipe_mode(recipe), "models/pix2struct.gin" in recipe_text(recipe)
    bindings = _bindings(
        recipe, vocab_file, data_dir, files, extra=["Features.max_target_len = 128"]
    )
    task, train_batch, batch = recipe_batches(recipe, bindings, "chartcheck", "test_one")
    enc = train_batch["encoder_input_tokens"]
    assert enc.shape == ((8, 64, 2 + 4 * 4 * 3) if image else (8, 64))
    assert train_batch["decoder_target_tokens"].shape == (8, 128)
    keep = batch["_mask"]
    assert keep.sum() == SPLIT_SIZES["test_one"]
    cols = {k: np.asarray(v)[keep] for k, v in batch.items() if k in cc.seq2seq.RECORD_KEYS}
    targets = np.asarray(batch["decoder_target_tokens"])[keep]
    scores, rows = task.evaluate(targets, cols, "test_one")
    metrics, breakdowns = scores.metrics, scores.breakdowns
    obj = report.build_metrics(
        task="chartcheck",
        split="test_one",
        step=0,
        num_examples=len(rows),
        metrics=metrics,
        breakdowns=breakdowns,
        unavailable=scores.unavailable,
        provenance={"libraries": scores.libraries},
    )
    _check_metrics(obj, rows, "test_one", mode, 0)
    assert all(r["prediction"] == r["target"] for r in rows)
    if mode not in ("flan_explain_gold", "flan_explain_pred"):
        assert metrics["accuracy"] == 1.0 and metrics["num_unparseable"] == 0
    if mode not in CLASSIFY_ONLY:
        assert metrics["explanation_bleu"] == pytest.approx(1.0)
        assert metrics["explanation_rouge_l"] == pytest.approx(1.0)
    best = re.findall(r'^train.best_metric = "(\w+)"(?:\s*#.*)?$', recipe_text(recipe), re.M)
    assert len(best) == (recipe not in EVAL_ONLY)
    # It keeps its best checkpoint by a computed metric, or by the validation loss (MatCha's
    # fine-tuning, as its authors), which chartjax.evaluate adds beside the task's metrics.
    assert all(b in metrics or b == "loss" for b in best)
    if "prompt_setting" in recipe_text(recipe):  # zero/few-shot: the authors' instruction
        assert all(r["input"].startswith("\nGiven a claim, a table") for r in rows)
    elif mode.startswith("flan"):  # DePlot's tables are in the prompts
        assert all("TITLE | chart" in r["input"] for r in rows)
    if mode == "flan_explain_pred":  # test_one claims are explained with the predicted label
        _check_predicted_labels_shown(rows, files)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", E2E)
def test_recipe_end_to_end(recipe, tmp_path, vocab_file, data_dir, files, init_ckpts):
    eval_only = recipe in EVAL_ONLY
    mode = recipe_mode(recipe)
    splits = ("validation", "test_one", "test_two") if recipe == ALL_SPLITS else ("test_one",)
    out = _run(
        recipe,
        tmp_path,
        _bindings(
            recipe,
            vocab_file,
            data_dir,
            files,
            _init(recipe, init_ckpts),
            [f"chartcheck_task.eval_splits = {splits!r}"],
        ),
        eval_only,
    )
    step = 0 if eval_only else 2
    if not eval_only:
        assert out["step"] == 2 and out["stop_reason"] == "done"
        assert (tmp_path / "checkpoints" / "2").is_dir()
    for split in splits:
        obj, rows = _check_split(tmp_path, split, step, mode)
        if "chart_type" in obj["breakdowns"]:  # every claim is in one chart-type group
            assert sum(g["n"] for g in obj["breakdowns"]["chart_type"].values()) == len(rows)
    if mode == "flan_explain_pred":  # test_one claims were explained with the predicted label
        _check_predicted_labels_shown(rows, files)


def _check_predicted_labels_shown(rows, files):
    labels = {r["id"]: r["prediction"] for r in prediction_files.read_jsonl(files["labels"])}
    for r in rows:
        shown = labels[r["id"]].rstrip(".").capitalize()  # "True"/"False" (the authors')
        assert f" is {shown} given this caption" in r["input"]


@pytest.mark.parametrize(
    "recipe,which",
    [
        ("chartcheck_deplot_flant5_finetune_class", "tables"),
        ("chartcheck_deplot_flant5_explanation_pred_labels", "labels"),
    ],
)
def test_missing_id_is_named(recipe, which, tmp_path, vocab_file, data_dir, files, all_ids):
    key = "TABLES" if which == "tables" else "LABELS"
    bindings = _bindings(
        recipe, vocab_file, data_dir, files, extra=[f"{key} = '{files[which + '_missing']}'"]
    )
    missing = all_ids["test_one"][1]
    with pytest.raises(KeyError, match=f"{which}.*_missing.jsonl has no row for id '{missing}'"):
        _run(recipe, tmp_path, bindings, False)


# ----------------------------------------------------------------------- DePlot's tables -----
TABLE_RECIPES = sorted(
    r for r in os.listdir(RECIPE_DIR) if "TABLES = %gin.REQUIRED" in recipe_text(r[:-4])
)


def tables_command(recipe: str) -> list[str]:
    """The chartjax-infer command a recipe's header prescribes for TABLES, as argv."""
    import shlex

    lines = recipe_text(recipe).splitlines()
    start = next(
        i for i, ln in enumerate(lines) if ln.startswith("#   chartjax-infer --task deplot")
    )
    text = ""
    for ln in lines[start:]:
        text += ln.lstrip("#").strip() + " "
        if not ln.rstrip().endswith("\\"):
            break
    # Placeholders: <split> the split, any other <...> a word of its own.
    text = re.sub(r"<split>", "test_one", text.replace("\\ ", " "))
    argv = shlex.split(re.sub(r"<[^>]*>", "placeholder", text))
    assert argv[0] == "chartjax-infer"
    return argv[1:]


@pytest.mark.parametrize("recipe", [r[:-4] for r in TABLE_RECIPES if r.startswith("chartcheck")])
def test_the_tables_command_renders_no_header_prompt(recipe, data_dir, tmp_path):
    """table_generation_deplot.py (a057637 line 39) set is_vqa = False: DePlot saw the chart
    alone. The command the recipe prescribes must do the same."""
    import numpy as np

    from chartjax.inference import inputs as infer_inputs
    from chartjax.tasks import catalog
    from chartjax.tasks.core import seq2seq
    from chartjax.tools import infer as infer_cli

    args = infer_cli.parse_args([*tables_command(recipe), "--data_dir", data_dir])
    assert (args.task, args.max_decode_len, args.tfds) == ("deplot", 512, "chartcheck:test_one")
    _, prompt, inputs, _ = infer_cli.typed(args)
    examples = infer_inputs.open_inputs(
        inputs, prompt, catalog.inference("deplot"), catalog.templates()
    )
    assert len(examples) == SPLIT_SIZES["test_one"]
    assert {ex.prompt for ex in examples} == {""}
    image = np.zeros((4, 6, 3), np.uint8)
    np.testing.assert_array_equal(
        seq2seq.image_with_header(image, examples[0].prompt, seq2seq.Features(vocab_file="x")),
        image,
    )
    # Without --header the task's own prompt would be rendered above the chart.
    default = infer_cli.parse_args(["--task", "deplot", "--checkpoint", "x", "--out", "o",
                                    "--tfds", "chartcheck:test_one", "--data_dir", data_dir])  # fmt: skip
    _, prompt, inputs, _ = infer_cli.typed(default)
    prompted = infer_inputs.open_inputs(
        inputs, prompt, catalog.inference("deplot"), catalog.templates()
    )
    assert prompted[0].prompt.startswith("Generate underlying data table")


def test_test_two_scores_name_the_test_set_the_build_holds(tmp_path, data_dir):
    import tensorflow_datasets as tfds

    from chartjax.data import sources
    from chartjax.tasks.chartcheck import test_sets as ts
    from tfds_builders.chartcheck.chartcheck import Builder

    release = sources.tfds_builder_dir("chartcheck", data_dir)
    assert ts.test_set_provenance(release, "test_one") == {}
    assert ts.test_set_provenance(release, "test_two[:2]")[ts.TEST_TWO_KEY].startswith(
        "reannotated_2024 (test_two.csv: 3 claims, 2 supports / 1 refutes; by layout)"
    )
    paper = Builder(data_dir=str(tmp_path))
    manual = os.path.join(ROOT, "tfds_builders", "chartcheck", "dummy_data", "paper_era")
    paper.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=manual))
    found = ts.test_set_provenance(str(paper.data_path), "validation+test_two")
    assert found[ts.TEST_TWO_KEY].startswith("paper_2023 (claim_explanation_verification_pre")
    assert ts.test_set_provenance(str(tmp_path), "test_two")[ts.TEST_TWO_KEY].startswith("unknown")
