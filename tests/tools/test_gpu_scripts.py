"""tools/gpu/t5_learning.py and tools/gpu/figureqa_learning.py: what they reimplement for a
machine without TensorFlow, gin or sentencepiece equals the package's own code, and a 2-step
CPU run of each, with those modules blocked, prints the JSON it promises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from tools.gpu import figureqa_learning as fq
from tools.gpu import t5_learning as t5g

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BLOCK = "import sys\nfor m in ('tensorflow', 'gin', 'sentencepiece'): sys.modules[m] = None\n"


@pytest.fixture(scope="module")
def t5_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("t5_data")
    t5g.generate(
        t5g.parse_args(
            [
                "generate",
                "--out",
                str(out),
                "--train_tables",
                "120",
                "--heldout_tables",
                "6",
                "--vocab_size",
                "400",
            ]
        )
    )
    return str(out)


@pytest.fixture(scope="module")
def fq_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("fq_data")
    fq.generate(
        fq.parse_args(
            [
                "generate",
                "--out",
                str(out),
                "--train_images",
                "6",
                "--val_images",
                "6",
                "--workers",
                "1",
            ]
        )
    )
    return str(out)


def _run(script: str, argv: list[str]) -> dict:
    code = BLOCK + (
        f"sys.argv = {[script, *argv]!r}\n"
        f"import runpy\nrunpy.run_path({os.path.join(ROOT, script)!r}, run_name='__main__')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout[proc.stdout.index("{") :])


# ------------------------------------------------------------------ T5 --------------------


def test_t5_rows_detokenize_and_shift_as_the_package(t5_data):
    from chartjax.data.vocab import Vocabulary
    from chartjax.tasks import seq2seq

    vocab = Vocabulary(os.path.join(t5_data, "spm.model"))
    with open(os.path.join(t5_data, "pieces.json")) as f:
        pieces = json.load(f)
    rows = t5g.read_jsonl(os.path.join(t5_data, "heldout.jsonl"))
    for r in rows:
        assert r["target_ids"] == vocab.encode(r["target"], add_eos=True)
        assert t5g.detokenize(r["target_ids"], pieces) == vocab.decode(r["target_ids"])
        assert t5g.detokenize(r["target_ids"], pieces) == r["target"]
    # byte pieces, pad and unknown ids as sentencepiece decodes them
    odd = [
        vocab.sp.piece_to_id("<0x41>"),
        0,
        vocab.sp.piece_to_id("<0xC3>"),
        vocab.sp.piece_to_id("<0xA9>"),
        2,
        5,
        1,
        7,
    ]
    assert t5g.detokenize(odd, pieces) == vocab.decode(odd)
    arrays = t5g.arrays(rows, 128, 16)  # 16 < some targets: truncated keeping the EOS
    for k, r in enumerate(rows):
        tgt, inp = seq2seq.target_arrays(vocab, r["target"], 16)
        np.testing.assert_array_equal(arrays["decoder_target_tokens"][k], tgt)
        np.testing.assert_array_equal(arrays["decoder_input_tokens"][k], inp)
        want = vocab.encode_batch([vocab.decode(r["input_ids"])], max_len=128)[0]
        np.testing.assert_array_equal(arrays["encoder_input_tokens"][k], want)
    with open(os.path.join(t5_data, "meta.json")) as f:
        meta = json.load(f)
    assert (
        meta["constant"]
        in [r["target"] for r in t5g.read_jsonl(os.path.join(t5_data, "train.jsonl"))][:100]
    )


def test_t5_sizes_match_the_gin_sizes():
    for name, size in t5g.SIZES.items():
        with open(os.path.join(ROOT, "gin_configs", "sizes", f"t5_1_1_{name}.gin")) as f:
            bound = {
                k.split(".")[1].strip(): int(v)
                for k, v in (line.split("=") for line in f if line.startswith("T5Config."))
            }
        assert bound == size


def test_vendored_sacrebleu_scores_as_the_installed_one(t5_data, tmp_path):
    """Only the vendored copy and no lxml can be imported: BLEU is unchanged."""
    from chartjax.metrics.text import bleu

    preds, refs = ["the sales rose to 5 units .", "a b c"], ["the sales rose to 6 units .", "a b"]
    code = (
        BLOCK
        + f"""
import importlib.abc, importlib.machinery, json
VENDOR = {os.path.join(t5_data, "vendor")!r}
class OnlyVendored(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] == 'lxml':
            raise ModuleNotFoundError(name)
        if name in {t5g.VENDORED!r}:
            spec = importlib.machinery.PathFinder.find_spec(name, [VENDOR])
            if spec is None:
                raise ModuleNotFoundError(name)
            return spec
        return None
sys.meta_path.insert(0, OnlyVendored())
sys.path.insert(0, {ROOT!r})
from tools.gpu import t5_learning
t5_learning.use_vendored({t5_data!r})
from chartjax.metrics.text import bleu
import sacrebleu
assert sacrebleu.__file__.startswith(VENDOR), sacrebleu.__file__
print(json.dumps(bleu({preds!r}, {refs!r}, force=True).metrics))
"""
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout) == bleu(preds, refs, force=True).metrics


def test_t5_two_step_run_without_tf_gin_sentencepiece(t5_data, tmp_path):
    argv = [
        "train",
        "--data",
        t5_data,
        "--out",
        str(tmp_path),
        "--size",
        "tiny",
        "--dtype",
        "float32",
        "--steps",
        "2",
        "--batch",
        "4",
        "--eval_every",
        "2",
        "--eval_batch",
        "4",
        "--log_every",
        "1",
    ]
    out = _run("tools/gpu/t5_learning.py", argv)
    r = out["results"]
    assert out["name"] == "t5_learning" and r["steps"] == 2
    assert [p["step"] for p in r["curve"]] == [2] and 0.0 <= r["final_bleu"] <= 1.0
    assert 0.0 < r["constant_bleu"] < 1.0 and isinstance(r["beats_constant"], bool)
    assert [s for s, _ in r["train_loss"]] == [1, 2]
    assert r["settings"]["heldout_records"] == 6 and r["settings"]["config"]["emb_dim"] == 32
    assert set(out["machine"]) >= {"load_avg_start", "load_avg_end", "versions"}
    with open(tmp_path / "predictions.jsonl") as f:
        assert len(f.readlines()) == 6


# ------------------------------------------------------------------ shared step ------------


def test_jit_step_equals_the_train_loops_step():
    """One Adam step of a CNN+LSTM (BatchNorm statistics, dropout) from the same state."""
    import jax
    import optax

    from chartjax import state as state_lib
    from chartjax import train as train_lib
    from chartjax.mesh import axis_rules, make_mesh
    from chartjax.models import relation_network as rn
    from chartjax.tasks.classification import softmax_xent_loss
    from tools.gpu import jit_step

    cfg = rn.RNConfig(
        kind="cnn_lstm",
        image_size=16,
        conv_layers=2,
        conv_channels=4,
        vocab_size=10,
        embed_dim=4,
        lstm_dim=8,
        f_dim=8,
        cnn_fc_dim=8,
    )
    tx = optax.adam(1e-2)

    def model_fn(rngs):
        return rn.build(cfg, rngs)

    mesh = make_mesh((1, 1), devices=jax.devices()[:1])
    spec, init_fn = state_lib.create(model_fn, tx, mesh, axis_rules(), 3)
    ref_step = jax.jit(
        train_lib.make_train_step(
            spec.model_def,
            types.SimpleNamespace(loss=softmax_xent_loss),
            tx,
            optax.constant_schedule(1e-2),
        )
    )
    model_def, state = jit_step.init(model_fn, tx, 3)
    ref_state = init_fn()
    jax.tree.map(np.testing.assert_array_equal, state["params"], ref_state["params"])
    rng = np.random.default_rng(0)
    batch = {
        "image": rng.integers(0, 255, (4, 16, 16, 3), dtype=np.uint8),
        "question_tokens": rng.integers(1, 10, (4, 5)).astype(np.int32),
        "question_length": np.array([5, 3, 2, 4], np.int32),
        "label": np.array([0, 1, 1, 0], np.int32),
    }
    new_ref, m_ref = ref_step(ref_state, batch)
    new, m = jit_step.make_step(model_def, softmax_xent_loss, tx)(state, batch)
    for key in ("params", "model_state", "opt_state", "step"):
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7),
            new[key],
            new_ref[key],
        )
    np.testing.assert_allclose(m["loss"], m_ref["loss"], rtol=1e-6)
    assert float(m["loss"]) != float(
        jit_step.make_step(model_def, softmax_xent_loss, tx)(new, batch)[1]["loss"]
    )


# ------------------------------------------------------------------ FigureQA ---------------


def test_figureqa_inputs_equal_the_tasks_preprocessing(fq_data):
    from chartjax.tasks import figureqa as task

    with open(os.path.join(fq_data, "vocab.json")) as f:
        vocab = json.load(f)
    assert vocab == list(task.vocabulary())
    index = {w: i for i, w in enumerate(vocab)}
    folder = os.path.join(fq_data, "validation2")
    with open(os.path.join(folder, "qa_pairs.json")) as f:
        qa = json.load(f)["qa_pairs"]
    fns = {s: task._preprocess_fn(s, 24, False, keep_meta=False) for s in (256, 64, 700)}
    split = fq.load_split(fq_data, "validation2", 64, 24, index)
    for k, q in enumerate(qa):
        png = os.path.join(folder, "png", f"{q['image_index']}.png")
        with open(png, "rb") as f:
            data = f.read()
        ex = {"image": data, "question": q["question_string"], "answer": q["answer"]}
        want = fns[64](ex)
        np.testing.assert_array_equal(split["question_tokens"][k], want["question_tokens"])
        assert split["question_length"][k] == int(want["question_length"])
        assert split["label"][k] == int(want["label"])
        img = split["images"][split["figure"][k]]
        assert np.abs(img.astype(int) - want["image"]).max() <= 1
    from PIL import Image

    for i in range(3):
        rgb = np.asarray(Image.open(os.path.join(folder, "png", f"{i}.png")).convert("RGB"))
        with open(os.path.join(folder, "png", f"{i}.png"), "rb") as f:
            ex = {"image": f.read(), "question": "Is red the minimum?", "answer": 1}
        for size, fn in fns.items():  # shrink, shrink more, enlarge (and pad)
            diff = np.abs(fq.preprocess_image(rgb, size).astype(int) - fn(ex)["image"])
            assert diff.max() <= 1, (i, size, diff.max())


def test_selector_is_the_packages_rule():
    selection = pytest.importorskip("chartjax.selection")
    scores = [0.5, 0.9, 0.2, 0.7, 0.7, 0.95, 0.1]
    ours = fq.Selector(start=3)
    ref = selection.Tracker(decay=0.9, start=3)
    for step, s in enumerate(scores, 1):
        assert ours.update(step, s) == ref.observe(step, s)
        assert ours.ema == pytest.approx(ref.value)
    assert ours.best[1] == ref.best_step
    first = fq.Selector()
    first.update(1, 0.3)
    assert first.ema == pytest.approx(0.3)  # zero-debiased: the first score itself


def test_figureqa_two_step_run_without_tf_gin(fq_data, tmp_path):
    argv = [
        "train",
        "--data",
        fq_data,
        "--out",
        str(tmp_path),
        "--models",
        "rn",
        "--image_size",
        "32",
        "--conv_layers",
        "2",
        "--steps",
        "2",
        "--batch",
        "8",
        "--select_images",
        "3",
        "--select_batch",
        "8",
        "--eval_batch",
        "32",
    ]
    out = _run("tools/gpu/figureqa_learning.py", argv)
    r = out["results"]
    assert out["name"] == "figureqa_learning" and set(r["models"]) == {"rn"}
    for m in r["models"].values():
        assert m["steps"] == 2 and [p["step"] for p in m["curve"]] == [1, 2]
        assert m["selected_step"] is None  # selection starts at update 100
        v2 = m["last"]["validation2"]
        assert 0.0 <= v2["accuracy"] <= 1.0 and v2["n"] == r["settings"]["questions"]["validation2"]
        assert set(v2["per_template"]) == {"0", "1"}
    assert r["settings"]["vocab_size"] == 88
    assert r["rn_above_text_only"] is None  # text-only not run
