"""Chart-to-Text from records (Chart2text, Field-Infuse): records, data-variable templating and
back-substitution on hand-made charts, content-selection labels, packing; the two models'
shapes, losses and decoding; every chart_to_text_*_{chart2text,field_infuse} recipe trained 2
steps on the builder's dummy data, writing a valid metrics.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

import gin
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from chartjax import config as config_lib
from chartjax.metrics import prediction_files, report
from chartjax.models import decoding
from chartjax.models.data_to_text import chart2text
from chartjax.models.data_to_text import record_seq2seq as model_lib
from chartjax.tasks.chart_to_text import records as ctr
from tests.tasks.tiny_recipes import RUN_TINY

ROOT = str(Path(__file__).resolve().parents[2])
RECIPE_DIR = os.path.join(ROOT, "gin_configs", "tasks")
RECIPES = sorted(
    f[:-4]
    for f in os.listdir(RECIPE_DIR)
    if f.startswith("chart_to_text_") and f.endswith(("_chart2text.gin", "_field_infuse.gin"))
)

HEADER = ["Year", "Sales in millions"]
ROWS = [["2019", "40"], ["2020", "1,250"]]
TITLE = "Sales of Acme 2015-2020"
SUMMARY = "In 2020 , Acme Sales reached 1,250 million , up from 2019 ."


def test_table_records_and_templating_round_trip():
    records = ctr.table_records(HEADER, ROWS)
    assert records == [
        ctr.Record("Year", "2019", 0, 0),
        ctr.Record("Sales in millions", "40", 1, 0),
        ctr.Record("Year", "2020", 0, 1),
        ctr.Record("Sales in millions", "1,250", 1, 1),
    ]
    templated, labels = ctr.template(SUMMARY, records, TITLE)
    # "In"/"in" are fillers, "," and "." have no letter or digit; values before header words
    # before title words ("Sales" is both); "million" is not the header's "millions".
    assert templated == (
        "In templateValue[1][0] , templateTitle[2] templateLabel[1][0] reached "
        "templateValue[1][1] million , up from templateValue[0][0] ."
    )
    assert labels == [1, 0, 1, 1]  # 40 (row 0, column 1) is not mentioned
    back = ctr.substitute(templated, ctr.slots(records, TITLE))
    assert back == SUMMARY
    # Words match case-sensitively: "sales" is not the header's "Sales".
    lower, _ = ctr.template(SUMMARY.replace("Sales", "sales"), records, TITLE)
    assert lower.split()[4] == "sales"


def test_numbers_match_as_numbers_and_unknown_variables_drop():
    records = ctr.table_records(["Country", "Share"], [["Chile", "45.0"], ["Peru", "2740"]])
    templated, labels = ctr.template("Chile : 45% ; Peru 2,740", records, "Shares")
    assert templated == "templateValue[0][0] : templateValue[0][1] ; templateValue[1][0] " + (
        "templateValue[1][1]"
    )
    assert labels == [1, 1, 1, 1]
    slot = ctr.slots(records, "Shares")
    assert ctr.substitute("templateValue[0][1] templateValue[9][0] templateTitle[0]", slot) == (
        "45.0 Shares"
    )
    assert ctr.substitute("templateLabel[1][0] templateLabel[1][3] templateTitle[4]", slot) == (
        "Share"
    )


def test_ocr_records_template_words_of_phrases():
    phrases = [("foreign born population", (0.0, 0.1, 0.5, 0.2)), ("50", None), ("1900", None)]
    records = ctr.ocr_records(phrases)
    assert [(r.value, r.row, r.column, r.box) for r in records] == [
        ("foreign", 0, 0, (0.0, 0.1, 0.5, 0.2)),
        ("born", 0, 1, (0.0, 0.1, 0.5, 0.2)),
        ("population", 0, 2, (0.0, 0.1, 0.5, 0.2)),
        ("50", 1, 0, None),
        ("1900", 2, 0, None),
    ]
    templated, labels = ctr.template(
        "The foreign born population was 50 million in 1900 .", records, "Foreign-born population"
    )
    assert templated == (
        "The templateValue[0][0] templateValue[0][1] templateValue[0][2] was templateValue[1][0] "
        "million in templateValue[2][0] ."
    )
    assert labels == [1, 1, 1, 1, 1]


def test_vocab_pack_and_example_arrays():
    records = ctr.table_records(HEADER, ROWS)
    vocab = ctr.build_vocab([["b", "a", "b", "Year"], ["Year", "c"]], size=6)
    assert vocab.words == ["<pad>", "</s>", "<unk>", "Year", "b", "a"]  # by count, then word
    assert vocab.encode_batch(["Year c b"], max_len=5).tolist() == [[3, 2, 4, 1, 0]]
    assert vocab.decode_batch([[3, 4, 1, 5], [0, 5, 0, 0]]) == ["Year b", "a"]
    shapes = ctr.Shapes(max_records=3, max_target_len=6, max_header_words=2, max_value_words=2)
    packed = ctr.pack(records, vocab, shapes)
    assert packed.shape == (3, 13)  # the 4th record does not fit
    # present, value, header, column, row, box x4, header words x2, value words x2
    assert packed[0].tolist() == [1, 2, 3, 0, 0, 0, 0, 0, 0, 3, 0, 2, 0]
    assert packed[1].tolist() == [1, 2, 2, 1, 0, 0, 0, 0, 0, 2, 2, 2, 0]
    meta = {
        "title": TITLE,
        "records": [[r.header, r.value, r.column, r.row, None] for r in records],
    }
    words = ["templateValue[1][0]", "templateValue[0][0]", "reached", "In"]
    vocab = ctr.WordVocab(words)
    enc, tgt, inp, cs = ctr.example_arrays(meta, "In 2020 reached 2019", vocab, shapes, True)
    assert tgt.tolist() == [6, 3, 5, 4, 1, 0] and inp.tolist() == [0, 6, 3, 5, 4, 1]
    assert cs.tolist() == [1, 0, 1]  # records (0,0) and (1,0); (1,1) was cut
    _, plain, _, _ = ctr.example_arrays(meta, "In 2020 reached 2019", vocab, shapes, False)
    assert plain.tolist() == [6, 2, 5, 2, 1, 0]  # untemplated numbers are unknown words


def _batch(cfg, b=2):
    rng = np.random.default_rng(0)
    rec = np.zeros((b, cfg.max_records, cfg.record_width), np.int32)
    rec[:, :3, model_lib.PRESENT] = 1
    rec[:, :3, model_lib.VALUE] = rng.integers(3, cfg.vocab_size, (b, 3))
    rec[:, :3, model_lib.COLUMN] = [0, 1, 0]
    rec[:, :3, model_lib.ROW] = [0, 0, 1]
    rec[:, :3, model_lib.BOX] = 500
    rec[:, :3, model_lib.HEADER_WORDS + cfg.max_header_words] = rec[:, :3, model_lib.VALUE]
    tgt = rng.integers(3, cfg.vocab_size, (b, cfg.max_target_len)).astype(np.int32)
    tgt[:, 5:] = 0
    inp = np.concatenate([np.zeros((b, 1), np.int32), tgt[:, :-1]], 1)
    cs = np.zeros((b, cfg.max_records), np.float32)
    cs[:, 0] = 1
    return {
        "encoder_input_tokens": rec,
        "decoder_input_tokens": inp,
        "decoder_target_tokens": tgt,
        "cs_labels": cs,
    }


@pytest.mark.parametrize("kind", ["chart2text", "field_infuse"])
@pytest.mark.slow
def test_models_shapes_loss_and_decoding(kind):
    cfg = model_lib.DataToTextConfig(
        vocab_size=40,
        kind=kind,
        d_model=16,
        num_heads=2,
        ffn_dim=32,
        encoder_layers=1,
        decoder_layers=1,
        max_records=6,
        max_target_len=8,
        max_header_words=2,
        max_value_words=3,
        use_boxes=True,
        box_dim=4,
        lstm_dim=8,
        dropout=0.0,
        attention_dropout=0.0,
    )
    model = chart2text.build(cfg, 0)
    batch = _batch(cfg)
    # Padding records changed, and the first record's box moved.
    padded = batch["encoder_input_tokens"].copy()
    padded[:, 4, model_lib.VALUE] = 7
    moved = batch["encoder_input_tokens"].copy()
    moved[:, 0, model_lib.BOX] = 0

    @nnx.jit
    def run(model, batch, padded, moved):
        logits, cs = model.forward(batch, deterministic=True)
        loss, aux = model_lib.loss(model, batch, deterministic=True)
        encode = [model.encode(dict(batch, encoder_input_tokens=r)) for r in (padded, moved)]
        return logits, cs, loss, aux, model.encode(batch), *encode

    logits, cs, loss, aux, enc, enc_padded, enc_moved = run(model, batch, padded, moved)
    assert logits.shape == (2, 8, 40) and cs.shape == (2, 6)
    assert np.isfinite(float(loss)) and float(aux["num_tokens"]) == 10
    # The total is the summary loss plus cs_weight x the records' binary cross-entropy.
    assert float(loss) == pytest.approx(float(aux["summary_loss"] + aux["cs_loss"]), rel=1e-6)
    assert float(aux["summary_loss"]) == pytest.approx(np.log(40), rel=0.2)  # near uniform
    # Padding records do not reach the encoding of the present ones; boxes do.
    np.testing.assert_allclose(np.asarray(enc_padded[:, :3]), np.asarray(enc[:, :3]), atol=1e-6)
    assert not np.allclose(np.asarray(enc_moved[:, 0]), np.asarray(enc[:, 0]))
    tokens = np.asarray(decoding.greedy_decode(model, batch, max_decode_len=8)[0])
    assert tokens.shape == (2, 8)
    # Cached greedy decoding's first token = argmax of the teacher-forced logits.
    np.testing.assert_array_equal(np.argmax(np.asarray(logits), -1)[:, 0], tokens[:, 0])


@pytest.mark.slow
def test_content_selection_loss_trains_the_head():
    import optax

    cfg = model_lib.DataToTextConfig(
        vocab_size=30, d_model=16, num_heads=2, ffn_dim=32, decoder_layers=1, max_records=6,
        max_target_len=8, max_header_words=2, max_value_words=2, dropout=0.0,
        attention_dropout=0.0, cs_weight=1.0,
    )  # fmt: skip
    model = chart2text.build(cfg, 1)
    batch = _batch(cfg)
    opt = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    @nnx.jit
    def step(model, opt):
        (_, aux), grads = nnx.value_and_grad(
            lambda m: model_lib.loss(m, batch, deterministic=True), has_aux=True
        )(model)
        opt.update(model, grads)
        return aux

    first = step(model, opt)
    for _ in range(30):
        last = step(model, opt)
    assert float(last["cs_loss"]) < 0.5 * float(first["cs_loss"])
    assert float(last["cs_accuracy"]) == 1.0
    logits = model.content_selection_logits(model.encode(batch))
    assert jnp.all(logits[:, 0] > 0) and jnp.all(logits[:, 1:3] < 0)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="Pew does not have"):
        ctr.make_task(config="pew", mode="tab", vocab_size=10)
    with pytest.raises(ValueError, match="needs tables_file"):
        ctr.make_task(mode="tab_ocr", vocab_size=10)
    with pytest.raises(ValueError, match="mode 'ocr' reads Pew"):
        ctr.make_task(mode="ocr", vocab_size=10)
    with pytest.raises(ValueError, match="kind='lstm'"):
        model_lib.DataToTextConfig(vocab_size=10, kind="lstm")


# ----------------------------------------------------------------------- recipes -----------

TINY = [
    "VOCAB_SIZE = 200",
    "MAX_RECORDS = 16",
    "MAX_TARGET_LEN = 16",
    "MAX_HEADER_WORDS = 4",
    "MAX_VALUE_WORDS = 4",
    "include 'sizes/data_to_text_tiny.gin'",  # the tiny model, as runs/smoke.gin's
    "Decoding.beam_size = 1",
    "chart_to_text_records_task.shuffle_buffer = 8",
    "chart_to_text_records_task.eval_splits = ('test',)",
] + [b for b in RUN_TINY if not b.startswith("Decoding.max_decode_len")]


@pytest.fixture(scope="module")
def data_dir(tfds_dir):
    tfds_dir("chart_to_text", "statista")
    return tfds_dir("chart_to_text", "pew")


@pytest.fixture(scope="module")
def tables_file(tmp_path_factory, data_dir):
    from chartjax.data import sources

    bdir = sources.tfds_builder_dir("chart_to_text/statista", data_dir)
    rows = [
        {"id": i, "prediction": f"TITLE | t <0x0A> Quarter | Users <0x0A> Q3 '20 | {2740 + n}"}
        for split in ("train", "validation", "test")
        for n, i in enumerate(sources.TfdsSource("", directory=bdir).ids(split))
    ]
    path = tmp_path_factory.mktemp("c2t_records") / "tables.jsonl"
    prediction_files.write_jsonl(path, rows)
    return str(path)


def test_every_paper_row_has_a_recipe():
    assert RECIPES == [
        "chart_to_text_pew_ocr_chart2text",
        "chart_to_text_pew_ocr_field_infuse",
        "chart_to_text_statista_tab_chart2text",
        "chart_to_text_statista_tab_field_infuse",
        "chart_to_text_statista_tab_ocr_chart2text",
        "chart_to_text_statista_tab_ocr_field_infuse",
    ]


# One training run per (model family x task kind) (issue #43 item 6, DESIGN §8); the input
# modes (ocr: Pew's OCR phrases with boxes, tab: Statista's gold tables, tab_ocr: DePlot's
# tables) differ only in how records are made, which `test_recipe_pipeline` featurizes and
# scores for every recipe:
#
#   family                           task kind                     end to end
#   Chart2text (transformer + CS)    records -> templated summary  statista_tab_ocr_chart2text
#   Field-Infuse (LSTM field infuse) records -> templated summary  pew_ocr_field_infuse (boxes)
E2E = ["chart_to_text_statista_tab_ocr_chart2text", "chart_to_text_pew_ocr_field_infuse"]


def _recipe_bindings(recipe, data_dir, tables_file):
    bindings = TINY + [f"DATA_DIR = '{data_dir}'"]
    if "_tab_ocr_" in recipe:
        bindings.append(f"TABLES = '{tables_file}'")
    return bindings


def _check_row(recipe, row):
    config = "pew" if "_pew_" in recipe else "statista"
    assert row["id"].startswith(config + "/") and "templated_prediction" in row
    if "_tab_ocr_" in recipe:  # DePlot's table is what the records hold
        assert "Users|274" in row["input"]


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.slow
def test_recipe_pipeline(recipe, data_dir, tables_file):
    """The recipe's task on the dummy data without a model: record batches of the recipe's
    shapes, and its own targets scored into a valid metrics.json."""
    from chartjax.data import sources
    from tests.tasks.tiny_recipes import recipe_batches

    bindings = _recipe_bindings(recipe, data_dir, tables_file)
    task, train_batch, batch = recipe_batches(recipe, bindings, "chart_to_text_records", "test")
    enc = np.asarray(train_batch["encoder_input_tokens"])
    assert enc.shape[:2] == (8, 16) and train_batch["cs_labels"].shape == (8, 16)
    assert train_batch["decoder_target_tokens"].shape == (8, 16)
    assert enc[..., model_lib.PRESENT].any()
    keep = batch["_mask"]
    assert keep.sum() == 1
    cols = {k: np.asarray(v)[keep] for k, v in batch.items() if k in sources.RECORD_KEYS}
    scores, rows = task.evaluate(np.asarray(batch["decoder_target_tokens"])[keep], cols, "test")
    obj = report.build_metrics(
        task=task.name, split="test", step=0, num_examples=len(rows), metrics=scores.metrics,
        breakdowns=scores.breakdowns, unavailable=scores.unavailable,
    )  # fmt: skip
    report.validate_metrics(obj)
    for name in ("bleu", "rouge_l", "meteor", "content_selection"):
        assert 0 <= obj["metrics"][name] <= 1
    (row,) = rows
    _check_row(recipe, row)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", E2E)
def test_recipe_end_to_end(recipe, tmp_path, data_dir, tables_file):
    from chartjax.train import train

    assert recipe in RECIPES
    bindings = _recipe_bindings(recipe, data_dir, tables_file)
    gin.clear_config()
    config_lib.parse_gin([f"tasks/{recipe}.gin"], bindings)
    try:
        out = train(str(tmp_path))
    finally:
        gin.clear_config()
    assert out["step"] == 2 and out["stop_reason"] == "done"
    assert np.isfinite(out["train"]["loss"]) and "cs_loss" in out["train"]
    mdir = tmp_path / "eval" / "test" / "step_2"
    obj = json.loads((mdir / "metrics.json").read_text())
    report.validate_metrics(obj)
    assert (obj["task"], obj["split"], obj["num_examples"]) == ("chart_to_text", "test", 1)
    for name in ("bleu", "rouge_l", "meteor", "content_selection"):
        assert 0 <= obj["metrics"][name] <= 1
    assert set(obj["unavailable"]) == {"bleurt", "perplexity"}
    (row,) = prediction_files.read_jsonl(mdir / "predictions.jsonl")
    _check_row(recipe, row)
