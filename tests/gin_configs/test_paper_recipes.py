"""The paper-row recipes as their authors ran them (issue 30): each recipe is loaded through gin
and what it builds is checked against the authors' scripts: the optimizer's updates on
parameters of very different scales (MatCha: HF Adafactor, not T5X's), the decoding lengths
(HF's max_length counts the decoder start token), the HF Trainer's linear decay and gradient
clipping, DePlot-DeBERTa's input, the Flan-T5 verdict counting and the explanation metric
variants; and every paper row lists its substitutions where paper_tables reads them. Sources
are in each recipe's header."""

from __future__ import annotations

import json
import os
from pathlib import Path

import gin
import jax.numpy as jnp
import numpy as np
import pytest

from chartjax import config as config_lib
from chartjax import optim
from chartjax import recipe as recipe_lib
from tests.test_optim import hf_adafactor_reference, run_steps, scaled_grads, scaled_params

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "gin_configs" / "tasks"
NUMBERS = json.loads((ROOT / "tools" / "paper_numbers.json").read_text(encoding="utf-8"))
PAPER_ROWS = sorted({r["recipe"] for t in NUMBERS["tables"] for r in t["rows"] if r["recipe"]})

MATCHA_FINETUNE = [
    "chartcheck_matcha_finetune_class",
    "chartcheck_matcha_finetune_multi",
    "chartcheck_matcha_finetune_5050_multi",
    "chartcheck_matcha_chartqa_finetune_5050_multi",
    "chartcheck_matcha_plotqa1_finetune_5050_multi",
    "chartcheck_matcha_plotqa2_finetune_5050_multi",
]
MATCHA_ZERO = [f"chartcheck_matcha_{m}_zero" for m in ("chartqa", "plotqa1", "plotqa2")]
FLAN_FINETUNE = [
    "chartcheck_deplot_flant5_finetune_class",
    "chartcheck_deplot_flant5_finetune_multi",
    "chartcheck_deplot_flant5_explanation_gold",
    "chartcheck_deplot_flant5_explanation_pred_labels",
]
FLAN_PROMPTED = ["chartcheck_deplot_flant5_zero_multi", "chartcheck_deplot_flant5_few_multi"]
CHART_TO_TEXT_HF = [
    f"chart_to_text_{r}"
    for r in (
        "pew_deplot_t5",
        "pew_ocr_t5",
        "pew_ocr_t5_boxes",
        "statista_deplot_t5",
        "statista_ocr_t5",
        "statista_ocr_t5_boxes",
        "statista_tab_t5",
        "pew_ocr_bart",
        "statista_deplot_bart",
        "statista_tab_bart",
    )
]
HF_TRAINER = [
    *FLAN_FINETUNE,
    *CHART_TO_TEXT_HF,
    "chartcheck_deplot_deberta_class",
    "chartcheck_deplot_tapas_class",
]
# The values the recipe's required macros need to parse (nothing is read from them here).
MACROS = [
    "VOCAB = 'unused'",
    "TABLES = 'unused'",
    "LABELS = 'unused'",
    "INIT_PATH = 'unused'",
    "VGG16_WEIGHTS = 'unused'",
]


@pytest.fixture(autouse=True)
def _clean_gin():
    gin.clear_config()
    yield
    gin.clear_config()


def load(recipe: str) -> None:
    config_lib.parse_gin([f"tasks/{recipe}.gin"], MACROS)


def bound(name: str, default=None):
    try:
        return gin.query_parameter(name)
    except ValueError:
        return default


# ------------------------------------------------------------------ optimizers and schedules --


@pytest.mark.parametrize("recipe", MATCHA_FINETUNE)
@pytest.mark.slow
def test_matcha_finetuning_steps_as_hf_adafactor_on_weights_of_any_scale(recipe):
    load(recipe)
    assert bound("make_optimizer.name") == "adafactor_hf"
    assert not bound("make_optimizer.grad_clip_norm")  # HF's update clipping only
    # matcha_finetuning_ChartFC.py lines 168-205: the lowest validation loss every 300 steps.
    assert (bound("train.best_metric"), bound("train.eval_every")) == ("loss", 300)
    tx, sched = optim.make_optimizer()
    # The recipe's schedule: 500 warmup steps to 1e-5, then cosine over 15,000 (the authors'
    # get_cosine_schedule_with_warmup), probed where the rate is not 0.
    assert float(sched(0)) == 0.0 and float(sched(500)) == pytest.approx(1e-5)
    assert float(sched(7750)) == pytest.approx(0.5e-5, rel=1e-4)
    # One update at step 600 (a restored optimizer count, so the rate is the recipe's 1e-5-ish),
    # the moments fresh (beta2 = 0 at HF's first step): every weight moves by an update of RMS
    # at most the rate, whatever its own scale, as transformers' Adafactor moves it.
    params = scaled_params()
    (grads,) = scaled_grads(params, 1)
    as32 = {k: jnp.asarray(v, jnp.float32) for k, v in params.items()}
    state = tx.init(as32)._replace(count=jnp.asarray(600, jnp.int32))
    updates, _ = tx.update({k: jnp.asarray(v, jnp.float32) for k, v in grads.items()}, state, as32)
    lr = float(sched(600))
    want = hf_adafactor_reference(params, [grads], [lr])[0]
    for k in params:
        step = np.asarray(updates[k], np.float64)
        np.testing.assert_allclose(step, want[k] - params[k], rtol=2e-5, atol=1e-12, err_msg=k)
        assert np.sqrt(np.mean(step**2)) == pytest.approx(lr, rel=1e-3), k  # clipped RMS 1 x lr


def test_hf_adafactor_matches_the_reference_over_several_steps_from_the_start():
    load("chartcheck_matcha_finetune_multi")
    tx, sched = optim.make_optimizer()
    params = scaled_params()
    grads = scaled_grads(params, 5)
    got = run_steps(tx, params, grads)
    want = hf_adafactor_reference(params, grads, [float(sched(t)) for t in range(5)])
    for g, w in zip(got, want):
        for k in params:  # the first 5 steps are warmup: rates 0 .. 8e-8
            np.testing.assert_allclose(g[k], w[k], rtol=1e-6, atol=1e-12, err_msg=k)


@pytest.mark.parametrize("recipe", HF_TRAINER)
def test_hf_trainer_recipes_decay_linearly_and_clip_at_1(recipe):
    load(recipe)
    assert bound("make_optimizer.name") == "adamw"
    assert bound("schedule.kind") == "linear" and bound("schedule.end_value") == 0.0
    assert bound("make_optimizer.grad_clip_norm") == 1.0
    assert (bound("make_optimizer.b1"), bound("make_optimizer.b2")) == (0.9, 0.999)
    assert bound("make_optimizer.eps") == 1e-8
    optim.make_optimizer()  # builds
    sched = optim.schedule()  # in updates (accumulated steps count once)
    total, warmup = bound("schedule.total_steps"), bound("schedule.warmup_steps")
    peak = bound("schedule.peak")
    mid = warmup + (total - warmup) // 2
    assert float(sched(warmup)) == pytest.approx(peak)
    assert float(sched(mid)) == pytest.approx(peak * (total - mid) / (total - warmup), rel=1e-4)
    assert float(sched(total)) == pytest.approx(0.0, abs=1e-12)


# ------------------------------------------------------------------ decoding lengths -------------


@pytest.mark.parametrize(
    "recipe,length",
    [(r, 19) for r in FLAN_FINETUNE + FLAN_PROMPTED]
    + [(r, 127) for r in CHART_TO_TEXT_HF + MATCHA_FINETUNE + MATCHA_ZERO],
)
def test_decoding_lengths_are_hf_max_length_less_the_start_token(recipe, length):
    """HF's max_length=20 (Flan-T5 scripts without generation_max_length) and 128 (matcha_test.py,
    run_summarization's val_max_target_length) count the decoder start token."""
    load(recipe)
    assert bound("Decoding.max_decode_len") == length
    from chartjax.tasks.core import seq2seq

    assert seq2seq.Decoding().max_decode_len == length


# ------------------------------------------------------------------ DePlot-DeBERTa's input -------


def test_deplot_deberta_reads_claim_then_table_and_caption_for_3_epochs():
    load("chartcheck_deplot_deberta_class")
    assert bound("chartcheck_classifier_task.with_caption") is True
    from chartjax.tasks.chartcheck import classifier as chartcheck_classifier

    expand = chartcheck_classifier.make_expand(
        "deberta",
        table_for=lambda eid: "TITLE | <0x0A> a | 1",
        table_format=bound("chartcheck_classifier_task.table_format"),
        with_caption=bound("chartcheck_classifier_task.with_caption"),
        label_ids=chartcheck_classifier.LABEL_IDS,
    )
    (rec,) = expand(
        {
            "id": "test:0",
            "claim": "A rose.",
            "caption": "Sales by year",
            "label": 1,
            "chart_type": "unknown",
            "reasoning_types": [],
        }
    )
    # tokenizer(claim, str(f.readlines()) + ". " + caption): table_based_classification.py.
    assert rec["prompt"] == "A rose."
    assert rec["meta"]["pair"] == "['TITLE | \\n', ' a | 1']. Sales by year"
    # 3 epochs of ceil(7,607 / 2) // 2 updates, 4 claims each; evaluation every 300 updates.
    assert bound("schedule.total_steps") == 3 * (-(-7607 // 2) // 2) == 5706
    assert bound("make_optimizer.accumulate_steps") == 2
    assert bound("train.num_train_steps") == 2 * 5706
    assert bound("train.eval_every") == bound("train.checkpoint_every") == 600


# ------------------------------------------------------------------ verdicts and metrics ---------


def _score_fn(mode_default: str):
    from chartjax.tasks import chartcheck

    mode = bound("chartcheck_task.mode", mode_default)
    return chartcheck.make_score_fn(
        mode,
        drop_unparseable=bound("chartcheck_task.drop_unparseable", False),
        explanation_metrics=bound("chartcheck_task.explanation_metrics"),
    )


def _records(golds):
    return [
        {
            "id": f"test:{i}",
            "target": f"{g.lower()}. It is.",
            "meta": {
                "label": g,
                "chart_type": "unknown",
                "reasoning_types": [],
                "explanation": "It is.",
            },
        }
        for i, g in enumerate(golds)
    ]


@pytest.mark.parametrize("recipe", FLAN_PROMPTED + FLAN_FINETUNE[:2])
@pytest.mark.slow
def test_flan_verdicts_skip_outputs_with_neither_word_and_say_how_many(recipe):
    load(recipe)
    assert bound("chartcheck_task.drop_unparseable") is True
    texts = ["true. It is.", "false. No.", "I cannot tell.", "It is false.", "maybe"]
    scores, _ = _score_fn("flan_multi")(
        texts, _records(["TRUE", "TRUE", "FALSE", "FALSE", "TRUE"]), "x"
    )
    m = scores.metrics
    assert (m["num_unparseable"], m["num_skipped"], m["num_scored"]) == (2, 2, 3)
    assert m["accuracy"] == pytest.approx(2 / 3)  # of the 3 counted, as compute_metrics did


@pytest.mark.parametrize(
    "recipe,variant",
    [(r, "matcha_test") for r in MATCHA_FINETUNE[1:]]
    + [(r, "flan_t5_script") for r in FLAN_PROMPTED + FLAN_FINETUNE[1:]],
)
def test_explanation_metrics_are_the_variant_the_rows_authors_used(recipe, variant):
    load(recipe)
    assert bound("chartcheck_task.explanation_metrics") == variant
    mode = bound("chartcheck_task.mode")
    texts = [
        "Yes. Explanation: The bars rise." if mode.startswith("matcha") else "true. Bars rise."
    ]
    scores, _ = _score_fn(mode)(texts, _records(["TRUE"]), "test_one")
    assert scores.libraries["chartcheck_explanations"].startswith(variant)
    stemmed = "use_stemmer=True" in scores.libraries["rouge_score"]
    assert stemmed == (variant == "flan_t5_script")
    # Model-based metrics need their weights: unavailable, naming the authors' models.
    model = "microsoft/deberta-xlarge-mnli" if variant == "matcha_test" else "roberta-large"
    assert model in scores.unavailable["explanation_bertscore_f1"]


def test_explanation_from_predicted_labels_writes_them_as_the_authors_did():
    from chartjax.tasks import chartcheck

    load("chartcheck_deplot_flant5_explanation_pred_labels")
    expand = chartcheck.make_expand(
        bound("chartcheck_task.mode"),
        train_split="train",
        table_for=lambda eid: "T",
        label_for=lambda eid: "false" if eid.startswith("test") else None,
    )
    example = {
        "caption": "c",
        "claim": "A rose.",
        "label": 1,
        "explanation": "e",
        "chart_type": "unknown",
        "reasoning_types": [],
    }
    (test,) = expand(dict(example, id="test:0"))
    (train,) = expand(dict(example, id="train:0"))
    assert test["prompt"].startswith("Explain why 'A rose.' is False given")
    assert train["prompt"].startswith("Explain why 'A rose.' is true given")


# ------------------------------------------------------------------ declared substitutions -------


def test_every_paper_row_lists_its_substitutions_where_paper_tables_reads_them():
    from chartjax.tools import paper_tables

    assert len(PAPER_ROWS) == 38
    for recipe in PAPER_ROWS:
        path = os.fspath(TASKS / f"{recipe}.gin")
        subs = recipe_lib.bindings(path, os.fspath(TASKS.parent)).get(("recipe", "substitutions"))
        assert isinstance(subs, list) and all(isinstance(s, str) and s for s in subs), recipe
        assert paper_tables.substitutions_of(recipe) == subs
        header = [ln for ln in open(path, encoding="utf-8") if ln.startswith("#")]
        # The header points at the list instead of keeping a second, drifting copy.
        assert not any(ln.startswith("# Substitutions: cosine") for ln in header), recipe
    # Selection by validation loss every 300 steps is now the authors' own: no longer declared.
    load("chartcheck_matcha_finetune_multi")
    assert not any(
        s.startswith("checkpoint selection") for s in recipe_lib.settings().substitutions
    )
