"""The FigureQA ordering benchmark's own logic: corpus settings, the selection EMA, the CI-gap
decision, the validation2 split, and the result's shape on a 3-step run of tiny models on
in-memory features (the corpus build and the real runs are the benchmark itself)."""

import argparse
import json

import numpy as np
import pytest

from chartjax.models import relation_network as rn
from chartjax.tools.bench import figureqa_ordering as fo


@pytest.mark.parametrize("name", sorted(fo.CORPORA))
def test_named_corpora_are_valid(name):
    fo.check_corpus(fo.CORPORA[name])


@pytest.mark.parametrize(
    "change, field",
    [
        ({"figure_types": ("vbar_categorical",)}, "need >= 2 figure types"),
        # vbar and pie both use colour set A in training: validation2's set B is never seen
        ({"figure_types": ("vbar_categorical", "pie")}, "all use colour set {'A'}"),
        ({"templates": (0, 7)}, "corpus.templates"),
        ({"colours": 4}, "unknown fields ['colours']"),
        ({"colors_per_set": 2}, "colors_per_set must be in [3, 50]"),  # 3 bars need 3 colours
    ],
)
def test_bad_corpus_settings_are_refused_naming_the_field(change, field):
    with pytest.raises(ValueError) as err:
        fo.check_corpus({**fo.CORPORA["bars"], **change})
    assert field in str(err.value)


def _final(text, cnn, rn_):
    # (accuracy, Wilson 95% CI) of 1,000 questions: 500 -> [46.91, 53.09], 560 -> [52.91,
    # 59.05], 600 -> [56.93, 62.99], 700 -> [67.09, 72.76] (chartjax.metrics.classification)
    table = {
        50.0: [46.91, 53.09],
        56.0: [52.91, 59.05],
        60.0: [56.93, 62.99],
        70.0: [67.09, 72.76],
    }
    return {
        m: {"accuracy": a, "ci95": table[a]}
        for m, a in zip(fo.MODELS, (text, cnn, rn_), strict=True)
    }


def test_wilson_table_of_the_hand_made_numbers():
    from chartjax.tools.bench.figureqa_sanity import accuracy_ci

    table = {500: [46.91, 53.09], 560: [52.91, 59.05], 600: [56.93, 62.99], 700: [67.09, 72.76]}
    for correct, ci in table.items():
        preds = np.r_[np.ones(correct), np.zeros(1000 - correct)].astype(int)
        assert accuracy_ci(preds, np.ones(1000, int))["ci95"] == ci


def test_ordering_holds_when_every_gap_clears_the_intervals():
    d = fo.ordering(_final(50.0, 60.0, 70.0))
    assert d == {
        "text_only_at_chance": True,
        "text_only_below_cnn_lstm": True,
        "gap_cnn_lstm_minus_text_only": 10.0,
        "cnn_lstm_below_rn": True,
        "gap_rn_minus_cnn_lstm": 10.0,
        "holds": True,
    }


def test_ordering_fails_on_overlapping_intervals_or_a_reversed_pair():
    # 53.09 (text-only's upper bound) > 52.91 (CNN+LSTM's lower): a 6-point gap is not enough
    d = fo.ordering(_final(50.0, 56.0, 70.0))
    assert not d["text_only_below_cnn_lstm"] and d["cnn_lstm_below_rn"] and not d["holds"]
    d = fo.ordering(_final(50.0, 70.0, 60.0))  # CNN+LSTM above the RN
    assert d["text_only_below_cnn_lstm"] and not d["cnn_lstm_below_rn"] and not d["holds"]
    assert d["gap_rn_minus_cnn_lstm"] == -10.0


def test_ordering_needs_text_only_at_chance():
    d = fo.ordering(_final(56.0, 70.0, 70.0))
    assert not d["text_only_at_chance"]
    assert fo.ordering(_final(56.0, 70.0, 70.0), chance_band=6.0)["text_only_at_chance"]
    with pytest.raises(ValueError, match="no result for"):
        fo.ordering({"rn": {"accuracy": 70.0, "ci95": [67.0, 73.0]}})


def test_selector_ema_and_start():
    s = fo.Selector(decay=0.9, start=100)
    assert not s.update(10, 50.0)  # before update 100: tracked, never selected
    assert s.ema == 50.0
    assert s.update(100, 60.0)  # 0.9 * 50 + 0.1 * 60 = 51
    assert s.ema == pytest.approx(51.0)
    assert not s.update(110, 40.0)  # 49.9 < 51
    assert s.update(120, 80.0)  # 0.9 * 49.9 + 8 = 52.91
    assert s.best == (pytest.approx(52.91), 120)


def test_split_selection_keeps_figures_apart():
    d = {"image_index": np.array([0, 0, 1, 2, 2, 3]), "label": np.array([0, 1, 0, 1, 0, 1])}
    sel, rest = fo.split_selection(d, 2)
    assert sel["image_index"].tolist() == [0, 0, 1] and rest["image_index"].tolist() == [2, 2, 3]
    assert rest["label"].tolist() == [1, 0, 1]
    with pytest.raises(ValueError, match="one part is empty"):
        fo.split_selection(d, 4)


def test_add_figure_types_names_the_file_of_a_missing_annotation(tmp_path):
    for split in ("train1", "validation1", "validation2"):
        (tmp_path / split).mkdir()
        ann = [{"image_index": 0, "type": "pie"}, {"image_index": 1, "type": "hbar_categorical"}]
        (tmp_path / split / "annotations.json").write_text(json.dumps(ann))
    feats = {s: {"image_index": np.array([1, 0, 1])} for s in ("train1", "validation1")}
    feats["validation2"] = {"image_index": np.array([0, 2])}
    with pytest.raises(ValueError, match=r"validation2/annotations.json: no annotation .*\[2\]"):
        fo.add_figure_types(feats, str(tmp_path))
    assert feats["train1"]["figure_type"].tolist() == [
        "hbar_categorical",
        "pie",
        "hbar_categorical",
    ]


def _features(n, rng, size=16):
    return {
        "image": rng.integers(0, 256, (n, size, size, 3)).astype(np.uint8),
        "question_tokens": rng.integers(4, 20, (n, 6)).astype(np.int32),
        "question_length": np.full(n, 6, np.int32),
        "label": rng.integers(0, 2, n).astype(np.int32),
        "question_id": rng.integers(0, 2, n).astype(np.int32),
        "image_index": np.arange(n, dtype=np.int32),
        "figure_type": np.array(["vbar_categorical", "hbar_categorical"] * (n // 2)),
    }


def test_three_step_run_has_the_reported_shape(tmp_path):
    rng = np.random.default_rng(0)
    data = {s: _features(8, rng) for s in ("train1", "validation1", "validation2", "select")}
    args = argparse.Namespace(eval_every=1, select_every=1, select_from=1)
    schedule = [np.arange(4), np.arange(4, 8), np.arange(4)]
    tiny = dict(image_size=16, conv_layers=2, conv_channels=4, vocab_size=24, embed_dim=4)
    tiny.update(lstm_dim=4, g_dim=8, f_dim=8, cnn_fc_dim=8, dropout=0.0)
    results = {}
    for kind in fo.MODELS:
        trainer = fo.make_trainer(rn.RNConfig(kind=kind, **tiny), 1e-3, 0)
        results[kind] = fo.train_model(kind, trainer, data, schedule, args)
    r = results["rn"]
    assert r["steps"] == 3 and [row["step"] for row in r["curve"]] == [1, 2, 3]
    # one selection batch scored after every update: the EMA of its accuracies, best kept
    a = [row["selection_ema"] for row in r["curve"]]
    assert r["selected_ema"] == max(a) and r["selected_step"] == 1 + a.index(max(a))
    assert r["selected"]["validation2"]["n"] == 8
    assert set(r["selected"]["validation2_by_group"]) == {"template", "figure_type"}
    assert sum(g["n"] for g in r["selected"]["validation2_by_group"]["figure_type"].values()) == 8
    decision = fo.ordering({m: results[m]["selected"]["validation2"] for m in fo.MODELS})
    assert set(decision) >= {"holds", "text_only_below_cnn_lstm", "cnn_lstm_below_rn"}
    png = fo.plot_curves(results, str(tmp_path / "curves.png"), "tiny")
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
