"""FigureQA baselines learning check on one GPU, without TensorFlow, gin or a chartjax install
(issue 15, item 7): trains the Relation Network, CNN+LSTM and text-only baselines
(chartjax/models/relation_network.py) on a generated FigureQA corpus at the paper's settings
(batch 640, Adam 2.5e-4) and prints validation accuracy per model as JSON.

Generate the corpus HERE (a full chartjax environment; PNGs + qa_pairs.json in the release
layout, ~16 KB a figure of the easy corpus, ~23 KB of the release mix: the defaults, 2,000 +
2 x 200 figures, are ~40 MiB, which with the repository fits the device machine's 64 MiB
upload):

    .venv/bin/python tools/gpu/figureqa_learning.py generate --out runs/gpu_figureqa

and run it THERE (repository root; runs/ is git-ignored, so the run tool carries it with
carry=["runs/gpu_figureqa"]):

    PYTHONPATH=. python tools/gpu/figureqa_learning.py train --data runs/gpu_figureqa \\
        --out $OUT/figureqa

`generate` runs chartjax-synth's FigureQA generator (`--corpus easy`, the default: the
figureqa_sanity corpus, vertical bars only, 2-3 bars, "Is X the minimum / maximum?", four
colours per colour set: on CPU at 64 px the package's RN reaches 87-89% validation1 accuracy
in 1,200 steps, commit a940a28; `--corpus release`: the release's mix), keeps each split's
`png/` and `qa_pairs.json`, replaces the bulky `annotations.json` by `figure_types.json` (the figure type per image index) and writes
`vocab.json` (the figureqa task's question vocabulary, chartjax.tasks.figureqa.vocabulary()).
`train` reads the PNGs with PIL and preprocesses them as the figureqa task does in TF
(`preprocess_image`: bilinear resize keeping the aspect ratio to fit image_size, no antialias
(the task's default), centre crop/pad, rounded to uint8; `tokenize`: lower-cased, `.`/`?`
dropped, `,`/`;` kept, <START> ... <END>), both checked against the task's TF code in
tests/tools/test_gpu_scripts.py. Loss: chartjax.tasks.classification.softmax_xent_loss; step:
tools/gpu/jit_step.py (chartjax.train's). Selection as bench/figureqa_ordering.py: validation2
is split by figure into a selection part (the first `--select_images` figures) and the
reported rest; after every update (`--select_every`) one random selection batch is scored,
its accuracy enters a zero-debiased EMA (decay 0.9) and from update 100 on the weights at the
best EMA are kept: the co-author's rule as chartjax/selection.py implements it for the train
loop (that module imports gin, so `Selector` repeats its arithmetic; a test compares). The final
validation1 / reported-validation2 accuracy (95% Wilson CI, per template and figure type) is
given for the selected and the last weights. Prints one JSON object (also `<out>/result.json`).

Not yet run on a GPU: no device was lent when it was written (its 2-step CPU run is
tests/tools/test_gpu_scripts.py); the default steps are a guess at a few minutes on an H200.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

# The repository root, so that `tools.*` imports work however the script is started.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SPLITS = ("train1", "validation1", "validation2")
MODELS = ("text_only", "cnn_lstm", "rn")
# tools/bench/figureqa_sanity.py's CORPUS (the easy corpus); "release": the generator defaults.
CORPORA = {
    "easy": {
        "figure_types": ("vbar_categorical",),
        "max_elements": 3,
        "templates": (0, 1),
        "colors_per_set": 4,
    },
    "release": {},
}
# gin_configs/tasks/figureqa_{rn,cnn_lstm,text_only}.gin + models/relation_network.gin.
KIND_SETTINGS = {
    "rn": {},
    "cnn_lstm": {"embed_dim": 32, "f_dim": 512, "cnn_fc_dim": 512},
    "text_only": {"f_dim": 512},
}
EMA_DECAY, SELECT_FROM = 0.9, 100
LIBS = ("jax", "jaxlib", "flax", "optax", "numpy", "pillow")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="write the corpus (needs the full chartjax environment)")
    g.add_argument("--out", required=True)
    g.add_argument("--corpus", choices=sorted(CORPORA), default="easy")
    g.add_argument("--train_images", type=int, default=2000)
    g.add_argument("--val_images", type=int, default=200, help="per validation split")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--workers", type=int, default=2)
    t = sub.add_parser("train", help="train and score (TF- and gin-free)")
    t.add_argument("--data", required=True, help="the folder `generate` wrote")
    t.add_argument("--out", required=True)
    t.add_argument("--models", default=",".join(MODELS), help="comma-separated, of " + str(MODELS))
    t.add_argument("--image_size", type=int, default=256)
    t.add_argument("--conv_layers", type=int, default=5)
    t.add_argument("--steps", type=int, default=1500)
    t.add_argument("--budget_s", type=float, default=None, help="training seconds per model")
    t.add_argument("--batch", type=int, default=640)
    t.add_argument("--lr", type=float, default=2.5e-4)
    t.add_argument("--select_images", type=int, default=50, help="validation2 figures to select on")
    t.add_argument("--select_every", type=int, default=1, help="updates between checks")
    t.add_argument("--select_batch", type=int, default=640, help="questions per check")
    t.add_argument("--eval_batch", type=int, default=500)
    t.add_argument("--max_question_len", type=int, default=24)
    t.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


# ------------------------------------------------------------------ here: generate --------


def generate(args) -> dict:
    from chartjax.synth import figureqa as synth
    from chartjax.tasks import figureqa as task

    summary = synth.generate(
        args.out,
        train_images=args.train_images,
        val_images=args.val_images,
        seed=args.seed,
        workers=args.workers,
        overwrite=True,
        options=synth.Options(**CORPORA[args.corpus]),
    )
    for split in SPLITS:
        path = os.path.join(args.out, split, "annotations.json")
        with open(path) as f:
            types = {a["image_index"]: a["type"] for a in json.load(f)}
        with open(os.path.join(args.out, split, "figure_types.json"), "w") as f:
            json.dump([types[i] for i in range(len(types))], f)
        os.remove(path)
    for extra in os.listdir(args.out):  # test splits and their answers: not used
        if extra not in SPLITS:
            shutil.rmtree(os.path.join(args.out, extra))
    with open(os.path.join(args.out, "vocab.json"), "w") as f:
        json.dump(list(task.vocabulary()), f)
    return {"corpus": args.corpus, "splits": summary}


# ------------------------------------------------------------------ there: inputs ---------


def words(text: str) -> list[str]:
    """chartjax.tasks.figureqa's word split (lower case, `?`/`.` dropped, `,`/`;` tokens)."""
    text = text.lower().replace("?", "").replace(".", "")
    return text.replace(",", " , ").replace(";", " ; ").split()


def tokenize(question: str, index: dict[str, int], max_len: int) -> tuple[np.ndarray, int]:
    """<START>=1 words <END>=2, unknown words <UNK>=3, cut to max_len, padded with 0."""
    ids = ([1] + [index.get(w, 3) for w in words(question)] + [2])[:max_len]
    out = np.zeros(max_len, np.int32)
    out[: len(ids)] = ids
    return out, len(ids)


def _bilinear_weights(n_in: int, n_out: int) -> np.ndarray:
    """[n_out, n_in] interpolation matrix of TF's resize_bilinear (half-pixel centres, no
    antialias): source coordinate (i + 0.5) * n_in / n_out - 0.5, clamped to the edges.
    Hand-written: PIL's bilinear filter antialiases when it shrinks, TF's does not."""
    scale = np.float32(n_in) / np.float32(n_out)
    src = (np.arange(n_out, dtype=np.float32) + 0.5) * scale - 0.5
    lower = np.floor(src)
    frac = (src - lower).astype(np.float32)
    lo = np.clip(lower, 0, n_in - 1).astype(int)
    hi = np.clip(lower + 1, 0, n_in - 1).astype(int)
    w = np.zeros((n_out, n_in), np.float32)
    np.add.at(w, (np.arange(n_out), lo), 1 - frac)
    np.add.at(w, (np.arange(n_out), hi), frac)
    return w


def preprocess_image(image: np.ndarray, size: int) -> np.ndarray:
    """uint8 [H, W, 3] -> uint8 [size, size, 3] as the figureqa task's TF preprocessing:
    tf.image.resize(bilinear, preserve_aspect_ratio=True, antialias=False), then
    resize_with_crop_or_pad (centred, zeros), rounded half to even and clipped."""
    h, w = image.shape[:2]
    # TF's target size: float32 scale min(size/h, size/w), round(scale * dim) half to even.
    scale = min(np.float32(size) / np.float32(h), np.float32(size) / np.float32(w))
    nh, nw = (int(np.round(np.float32(scale) * np.float32(d))) for d in (h, w))
    x = image.astype(np.float32)
    if (nh, nw) != (h, w):
        x = np.einsum("oh,hwc->owc", _bilinear_weights(h, nh), x)
        x = np.einsum("pw,owc->opc", _bilinear_weights(w, nw), x)
    out = np.zeros((size, size, 3), np.float32)
    top, left = max((nh - size) // 2, 0), max((nw - size) // 2, 0)  # crop offsets
    pt, pl = max((size - nh) // 2, 0), max((size - nw) // 2, 0)  # pad offsets
    ch, cw = min(nh, size), min(nw, size)
    out[pt : pt + ch, pl : pl + cw] = x[top : top + ch, left : left + cw]
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def load_split(data: str, split: str, image_size: int, max_len: int, index: dict) -> dict:
    """One split as arrays: images (one per figure), per question its figure, tokens, length,
    label (1 = yes), template id; figure types per figure."""
    from PIL import Image

    folder = os.path.join(data, split)
    path = os.path.join(folder, "qa_pairs.json")
    with open(path) as f:
        qa = json.load(f)["qa_pairs"]
    with open(os.path.join(folder, "figure_types.json")) as f:
        types = json.load(f)
    images = []
    for i in range(len(types)):
        png = os.path.join(folder, "png", f"{i}.png")
        try:
            with Image.open(png) as im:
                rgb = np.asarray(im.convert("RGB"))
        except OSError as e:
            raise ValueError(f"{png}: unreadable PNG ({e})") from None
        images.append(preprocess_image(rgb, image_size))
    toks, lens = zip(*(tokenize(q["question_string"], index, max_len) for q in qa))
    for k, q in enumerate(qa):
        if q.get("answer") not in (0, 1):
            raise ValueError(f"{path}: qa_pairs[{k}] has answer {q.get('answer')!r}, not 0/1")
    return {
        "images": np.stack(images),
        "figure": np.array([q["image_index"] for q in qa], np.int32),
        "question_tokens": np.stack(toks),
        "question_length": np.array(lens, np.int32),
        "label": np.array([q["answer"] for q in qa], np.int32),
        "template": np.array([q["question_id"] for q in qa], np.int32),
        "figure_types": types,
    }


def subset(split: dict, keep: np.ndarray) -> dict:
    out = {k: v[keep] for k, v in split.items() if k not in ("images", "figure_types")}
    return {**out, "images": split["images"], "figure_types": split["figure_types"]}


# ------------------------------------------------------------------ there: train ----------


class Selector:
    """The co-author's selection rule as chartjax/selection.py's Tracker computes it (that
    module imports gin): an exponential moving average (decay 0.9) of one random selection
    batch's accuracy per check, zero-debiased as tf.train.ExponentialMovingAverage(decay=.9,
    zero_debias=True) (started at 0, divided by 1 - decay^t); from update 100 on, a strictly
    higher average than any before selects the weights."""

    def __init__(self, decay: float = EMA_DECAY, start: int = SELECT_FROM):
        self.decay, self.start = decay, start
        self.biased, self.count, self.ema, self.best = 0.0, 0, None, None

    def update(self, step: int, accuracy: float) -> bool:
        self.biased = self.decay * self.biased + (1 - self.decay) * accuracy
        self.count += 1
        self.ema = self.biased / (1 - self.decay**self.count)
        if step >= self.start and (self.best is None or self.ema > self.best[0]):
            self.best = (self.ema, step)
            return True
        return False


def train_model(kind: str, args, data: dict, vocab_size: int) -> dict:
    import jax
    import jax.numpy as jnp
    import optax

    from chartjax.metrics.figureqa import figureqa_scores
    from chartjax.models import relation_network as rn
    from chartjax.tasks.classification import softmax_xent_loss
    from tools.gpu import jit_step

    cfg = rn.RNConfig(
        kind=kind,
        image_size=args.image_size,
        conv_layers=args.conv_layers,
        vocab_size=vocab_size,
        **KIND_SETTINGS[kind],
    )
    tx = optax.adam(args.lr)
    model_def, state = jit_step.init(lambda rngs: rn.build(cfg, rngs), tx, args.seed)
    step_fn = jit_step.make_step(model_def, softmax_xent_loss, tx)
    images = {s: jnp.asarray(d["images"]) for s, d in data.items()}  # uint8, on the device

    @jax.jit
    def predict(params, model_state, imgs, tokens, lengths, figure):
        model = model_def.merge(params, model_state)
        batch = {"image": imgs[figure], "question_tokens": tokens, "question_length": lengths}
        return jnp.argmax(model(batch, train=False), -1)

    def batch_of(split: str, idx: np.ndarray) -> dict:
        d = data[split]
        return {
            "image": images[split][jnp.asarray(d["figure"][idx])],
            "question_tokens": jnp.asarray(d["question_tokens"][idx]),
            "question_length": jnp.asarray(d["question_length"][idx]),
            "label": jnp.asarray(d["label"][idx]),
        }

    def preds(params, model_state, split: str, idx: np.ndarray) -> np.ndarray:
        d, out, b = data[split], [], args.eval_batch
        for lo in range(0, len(idx), b):
            part = idx[lo : lo + b]
            real = len(part)
            part = np.concatenate([part, np.repeat(part[:1], b - real)])  # one shape
            p = predict(
                params,
                model_state,
                images[split],
                jnp.asarray(d["question_tokens"][part]),
                jnp.asarray(d["question_length"][part]),
                jnp.asarray(d["figure"][part]),
            )
            out.append(np.asarray(p)[:real])
        return np.concatenate(out)

    def scores(params, model_state, split: str) -> dict:
        d = data[split]
        idx = np.arange(len(d["label"]))
        s = figureqa_scores(
            [int(p) for p in preds(params, model_state, split, idx)],
            [int(t) for t in d["label"]],
            figure_types=[d["figure_types"][f] for f in d["figure"]],
            question_ids=[str(int(q)) for q in d["template"]],
        )
        keep = ("accuracy", "accuracy_ci95_low", "accuracy_ci95_high")
        return {
            **{k: round(s.metrics[k], 4) for k in keep},
            "n": len(idx),
            "per_template": {
                k: round(v["accuracy"], 4) for k, v in s.breakdowns["question_template"].items()
            },
            "per_figure_type": {
                k: round(v["accuracy"], 4) for k, v in s.breakdowns["figure_type"].items()
            },
        }

    n_train, sel_n = len(data["train1"]["label"]), len(data["select"]["label"])
    sel_b = min(args.select_batch, sel_n)
    selector, selected, curve = Selector(), None, []
    t0, t_compiled, select_s = time.time(), None, 0.0
    for step in range(1, args.steps + 1):
        epoch, pos = divmod((step - 1) * args.batch, n_train)
        order = np.random.default_rng([args.seed, epoch]).permutation(n_train)
        idx = order[pos : pos + args.batch]
        if len(idx) < args.batch:
            nxt = np.random.default_rng([args.seed, epoch + 1]).permutation(n_train)
            idx = np.concatenate([idx, nxt[: args.batch - len(idx)]])
        state, metrics = step_fn(state, batch_of("train1", idx))
        if t_compiled is None:
            jax.block_until_ready(metrics["loss"])
            t_compiled = time.time()
        over = args.budget_s is not None and time.time() - t_compiled > args.budget_s
        if step % args.select_every == 0 or step == args.steps or over:
            t = time.time()
            part = np.random.default_rng([args.seed, 1, step]).choice(sel_n, sel_b, replace=False)
            acc = float(
                np.mean(
                    preds(state["params"], state["model_state"], "select", part)
                    == data["select"]["label"][part]
                )
            )
            if selector.update(step, acc):
                selected = jax.tree.map(jnp.copy, (state["params"], state["model_state"]))
            curve.append(
                {
                    "step": step,
                    "loss": round(float(metrics["loss"]), 4),
                    "train_accuracy": round(float(metrics["accuracy"]), 4),
                    "select_accuracy": round(acc, 4),
                    "ema": round(selector.ema, 4),
                }
            )
            select_s += time.time() - t
        if over:
            break
    train_s = time.time() - (t_compiled or t0) - select_s
    last = (state["params"], state["model_state"])
    out = {
        "steps": step,
        "compile_first_step_s": round((t_compiled or t0) - t0, 1),
        "train_s": round(train_s, 1),
        "select_s": round(select_s, 1),
        "examples_per_s": round(max(step - 1, 0) * args.batch / max(train_s, 1e-9), 1),
        "selected_step": None if selector.best is None else selector.best[1],
        "selected_ema": None if selector.best is None else round(selector.best[0], 4),
        "curve": curve,
    }
    for name, weights in (("selected", selected), ("last", last)):
        if weights is not None:
            out[name] = {s: scores(*weights, s) for s in ("validation1", "validation2")}
    return out


def train(args) -> dict:
    import jax

    from tools.bench import harness

    kinds = [k for k in args.models.split(",") if k]
    unknown = [k for k in kinds if k not in MODELS]
    if unknown or not kinds:
        raise SystemExit(f"--models: unknown {unknown}; choose from {MODELS}")
    bench = harness.Run("figureqa_learning", dict(vars(args)), LIBS)
    t0 = time.time()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.data, "vocab.json")) as f:
        vocab = json.load(f)
    index = {w: i for i, w in enumerate(vocab)}
    data = {
        s: load_split(args.data, s, args.image_size, args.max_question_len, index) for s in SPLITS
    }
    v2 = data["validation2"]
    select = v2["figure"] < args.select_images  # selection part: the first figures
    if select.all() or not select.any():
        raise SystemExit(f"--select_images={args.select_images} leaves no selection or report part")
    data["select"], data["validation2"] = subset(v2, select), subset(v2, ~select)
    load_s = time.time() - t0
    results = {
        "models": {k: train_model(k, args, data, len(vocab)) for k in kinds},
        "settings": {
            "questions": {s: int(len(d["label"])) for s, d in data.items()},
            "yes_fraction": {s: round(float(d["label"].mean()), 4) for s, d in data.items()},
            "vocab_size": len(vocab),
            "device": str(jax.devices()[0].device_kind),
            "load_preprocess_s": round(load_s, 1),
        },
    }
    final = {
        k: m.get("selected", m["last"])["validation2"]["accuracy"]
        for k, m in results["models"].items()
    }
    results["validation2_accuracy"] = final
    results["rn_above_text_only"] = (
        final["rn"] > final["text_only"] if {"rn", "text_only"} <= set(final) else None
    )
    return harness.emit(bench.report(results), os.path.join(args.out, "result.json"))


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.command == "generate":
        print(json.dumps(generate(args)))
    else:
        train(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
