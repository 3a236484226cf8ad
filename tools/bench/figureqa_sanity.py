"""Can the FigureQA baselines learn an easy FigureQA corpus on CPU? A sanity benchmark (JSON).

    python -m chartjax.tools.bench.figureqa_sanity --work /tmp/chartjax_figureqa_sanity \
        --budget-s 600 --out figureqa_sanity.json
    # on a shared machine: 10 CPU minutes per model, however long that takes
    python -m chartjax.tools.bench.figureqa_sanity --budget-s 7200 --budget-cpu-s 600
    # diagnosis: the RN with the pre-fix g/f init, and with a question encoder a CNN+LSTM learned
    python -m chartjax.tools.bench.figureqa_sanity --models cnn_lstm,rn_lecun,rn_cnn_question
    # the minimal RN summing over pairs as the RN paper does (the co-author averages), and the
    # package RN with a cosine decay of the rate to 0 at --steps (BN running averages)
    python -m chartjax.tools.bench.figureqa_sanity --models mini_rn_sum
    python -m chartjax.tools.bench.figureqa_sanity --models rn --schedule cosine --steps 1200

1. Generates a sanity corpus with chartjax-synth's FigureQA generator: vertical bars only, 2-3
   bars, templates 0 and 1 ("Is X the minimum?", "Is X the maximum?"), four colours per colour
   set (`--train-images` train1 figures, `--val-images` per validation split), and builds it with
   `tfds build tfds_builders/figureqa` (both reused when `--work` already holds them).
2. Reads every split through the figureqa task's own preprocessing (64 px, antialiased) and
   checks the inputs: images uint8, not blank, within a few grey levels of an independent PIL
   resize of the PNG the question belongs to; no <UNK> question token; label == answer (1 yes).
3. Trains, on the very same batches (one seeded index sequence, the same for every model), with
   Adam (`--lr`, dropout off): `cnn_lstm` and `rn`, the package's baselines as `build` makes
   them; `mini_rn`, an independent RN in plain JAX + optax written below from the paper and the
   co-author's code (integer coordinates, g/f/conv weights truncated normal 0.1 and biases 0.1,
   BN after ReLU with running averages at eval, the LSTM's [c; h] at the last real token, mean
   over all ordered pairs, word embeddings N(0, 1) as the package's; `--mini-embed-std 0.1`,
   TF's default scale, leaves its logits nearly blind to the question at init and it stays at
   chance). For diagnosis: `rn_lecun`, the package RN with its g and f layers
   re-drawn as before the fix (LeCun normal per block, zero biases), and `rn_cnn_question`,
   the package RN whose question encoder (32-d embedding + LSTM) starts from the trained
   `cnn_lstm`'s; `mini_rn_sum`, the minimal RN summing g over the pairs (the RN paper) instead
   of averaging (the co-author's "avg"): with the reference init its logits start in the
   hundreds (yes-minus-no margin 531 +- 109 over a batch vs 2.3 +- 0.4 averaged; loss 276 vs
   1.3), as sum = 256 x mean over the 16 x 16 ordered pairs of a 4 x 4 grid. Each model trains
   for `--budget-s` seconds of training wall time or `--budget-cpu-s` seconds of process CPU
   time (evaluation excluded) or `--steps`, whichever ends first; `--schedule cosine` decays
   the rate to 0 at `--steps`.
4. Prints one JSON object (tools/bench/harness.py): per model the learning curve (train
   loss/accuracy; validation1 accuracy with eval-mode BatchNorm, i.e. the running averages, and
   with the batch's own statistics for comparison), the first step and training time at
   >= `--target` validation1 accuracy, and the final validation1/validation2 accuracy with 95%
   Wilson intervals, as trained and after re-estimating the BN running averages at the final
   weights (`--bn-passes` training-mode forward passes; a running average over the last ~10
   steps lags behind weights that Adam moves fast). validation1 holds held-out figures in the
   training colours; with one figure type, validation2's colours never occur in training, so
   it is reported but is not a target.

The machine may be shared: the JSON carries the load average at both ends, and every time is
training wall time and process CPU time measured under whatever load there was.

Measured (issue 15, 2 cores shared with other jobs, load average 0.1 -> 20; CPU seconds of
training, evaluation excluded; batch 32, lr 1e-3, no dropout, 64 px, 4x4 objects):
- cnn_lstm, constant rate: >= 90% validation1 first at step 1,700 (172 CPU s; 90.7%), 92.0% at
  2,200 (218 CPU s); about 0.1 CPU s per step.
- rn, constant rate: 861 steps in 600 s of wall time (228 CPU s, ~0.26 CPU s per step; the
  first 100 steps, at load < 3, took 0.2 s each): train 89.1%, validation1 73.6% [70.8, 76.2]
  with the running BN averages but 89.5% [87.5, 91.3] with them re-estimated at the final
  weights (89.4% on the batch's own statistics): the averages, ~10 steps behind weights that
  Adam at 1e-3 moves fast, cost 16 points. The curves of both models swing the same way
  (cnn_lstm at step 600: 55.0% vs 76.4% on batch statistics).
- rn, `--schedule cosine --steps 1200`: >= 90% validation1 first at step 1,100 (292 CPU s;
  90.3%), 90.0% [88.0, 91.7] at 1,200 (319 CPU s), the same with re-estimated averages (the
  lag is gone); 2 bars 95.7%, 3 bars 85.4%; validation2 (unseen colours) 72.4%. The package's
  train loop with the same schedule (`make demo`) ended at 92.30% [90.5, 93.8] at step 1,200
  when this was written; the README gives what the current code's demo measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import shutil
import time

import numpy as np

from chartjax.tools.bench import harness

INPUTS = ("image", "question_tokens", "question_length")
KEYS = (*INPUTS, "label", "answer", "image_index", "question_id")
SPLITS = ("train1", "validation1", "validation2")
EVAL_BATCH = 250
MODELS = ("cnn_lstm", "rn", "mini_rn", "mini_rn_sum", "rn_lecun", "rn_cnn_question")
DEFAULT_MODELS = ("cnn_lstm", "rn", "mini_rn")
TEMPLATE_NAMES = {0: "minimum", 1: "maximum"}
GAP_BINS = (0.1, 0.25)  # smallest gap between two bars / tallest bar
GAP_NAMES = ("<0.10", "0.10-0.25", ">=0.25")
# The sanity corpus: one figure type, 2-3 elements, two templates, four colours per set.
CORPUS = {
    "figure_types": ("vbar_categorical",),
    "max_elements": 3,
    "templates": (0, 1),
    "colors_per_set": 4,
}


# ------------------------------------------------------------------ corpus ----------------


def build_corpus(
    work: str, train_images: int, val_images: int, seed: int, settings: dict | None = None
) -> tuple[str, str]:
    """Generates the sanity corpus (or one of other synth.Options `settings`) and builds it
    with `tfds build`; returns (raw, data_dir). Reused when `work` holds a build of the same
    settings (its corpus.json stamp)."""
    from chartjax.tools.bench import corpora

    settings = CORPUS if settings is None else settings
    raw, data_dir = os.path.join(work, "raw"), os.path.join(work, "tfds")
    os.makedirs(work, exist_ok=True)
    generate = dict(train_images=train_images, val_images=val_images, seed=seed, workers=2)
    corpora.figureqa_stamped(
        raw,
        data_dir,
        os.path.join(work, "corpus.json"),
        {"train_images": train_images, "val_images": val_images, "seed": seed, **settings},
        {**generate, "options": settings},
        stale=[os.path.join(work, d) for d in os.listdir(work) if d.startswith("features_")],
    )
    return raw, data_dir


def load_features(data_dir: str, image_size: int, cache_root: str) -> dict[str, dict]:
    """Every split through the figureqa task's eval preprocessing (pipeline.eval_batches),
    padding dropped; `image_index` from the example id. Cached as .npy files in `cache_root`."""
    from chartjax.data import feature_cache, pipeline
    from chartjax.tasks import figureqa

    task = figureqa.make_task(data_dir=data_dir, image_size=image_size, antialias=True)
    out = {}
    for split in SPLITS:
        cache = os.path.join(cache_root, f"features_{image_size}px_{split}")
        files = {k: os.path.join(cache, k + ".npy") for k in KEYS}
        if all(os.path.exists(f) for f in files.values()):
            out[split] = {k: np.load(f) for k, f in files.items()}
            continue
        shutil.rmtree(cache, ignore_errors=True)
        feats = feature_cache.featurize(pipeline.eval_batches(task, split, EVAL_BATCH, 0, 1))
        ids = [x.decode() if isinstance(x, bytes) else str(x) for x in feats["id"]]
        feats["image_index"] = np.array([int(i.split("/")[0]) for i in ids], np.int32)
        out[split] = {k: np.asarray(feats[k]) for k in KEYS}
        os.makedirs(cache + ".partial", exist_ok=True)
        for k, v in out[split].items():
            np.save(os.path.join(cache + ".partial", k + ".npy"), v)
        os.replace(cache + ".partial", cache)
    return out


def add_groups(feats: dict, raw: str) -> None:
    """Per question, from the split's annotations.json: its figure's bar count and the smallest
    gap between two of its bars relative to the tallest (how fine a comparison it needs)."""
    for split in ("validation1", "validation2"):
        with open(os.path.join(raw, split, "annotations.json")) as f:
            bars = {a["image_index"]: np.sort(a["models"][0]["y"]) for a in json.load(f)}
        index = feats[split]["image_index"]
        feats[split]["bars"] = np.array([len(bars[int(i)]) for i in index])
        gaps = np.array([np.diff(bars[int(i)]).min() / bars[int(i)].max() for i in index])
        feats[split]["gap"] = np.digitize(gaps, GAP_BINS)


def breakdown(predictions: np.ndarray, d: dict) -> dict:
    """Accuracy (with 95% CI) per template, per bar count and per relative-gap bin."""
    groups = {
        "template": {f"{q} ({TEMPLATE_NAMES[q]})": d["question_id"] == q for q in (0, 1)},
        "bars": {str(n): d["bars"] == n for n in sorted(set(d["bars"].tolist()))},
        "smallest_gap_over_tallest": {
            name: d["gap"] == k for k, name in enumerate(GAP_NAMES) if (d["gap"] == k).any()
        },
    }
    return {
        kind: {
            name: accuracy_ci(predictions[mask], d["label"][mask]) for name, mask in masks.items()
        }
        for kind, masks in groups.items()
    }


def input_check(feats: dict, raw: str, split: str = "validation1", n: int = 8) -> dict:
    """Do the inputs reach the model? Range and content of the model's image input and its
    distance to an independent resize (PIL, aspect kept, centred on black) of the source PNG;
    unknown question tokens; the label against the split's answer."""
    from PIL import Image

    images = feats[split]["image"]
    size = images.shape[1]
    diffs = []
    for k in range(n):
        index = int(feats[split]["image_index"][k])
        png = Image.open(os.path.join(raw, split, "png", f"{index}.png")).convert("RGB")
        scale = size / max(png.size)
        w, h = round(png.size[0] * scale), round(png.size[1] * scale)
        small = np.asarray(png.resize((w, h), Image.BILINEAR), np.float32)
        ref = np.zeros((size, size, 3), np.float32)
        top, left = (size - h) // 2, (size - w) // 2
        ref[top : top + h, left : left + w] = small
        diffs.append(float(np.abs(ref - images[k].astype(np.float32)).mean()))
    x = images[:256].astype(np.float32)
    labels_ok = all(np.array_equal(f["label"], f["answer"]) for f in feats.values())
    return {
        "label_equals_answer": bool(labels_ok),
        "unk_tokens": int(sum((f["question_tokens"] == 3).sum() for f in feats.values())),
        "dtype": str(images.dtype),
        "shape": list(images.shape[1:]),
        "min": int(images.min()),
        "max": int(images.max()),
        "mean_over_255": round(float(x.mean() / 255), 4),
        "share_not_white_or_black": round(float(((x.min(-1) < 235) & (x.max(-1) > 20)).mean()), 4),
        "image_mean_abs_diff_to_pil_resize": round(float(np.mean(diffs)), 2),
    }


# ------------------------------------------------------------------ the minimal RN --------


def mini_rn_init(
    key,
    *,
    vocab: int,
    conv_layers: int,
    ch: int,
    emb: int,
    hid: int,
    g: int,
    f: int,
    embed_std: float = 1.0,
):
    """Parameters and BatchNorm state of the independent RN: conv, g and f weights from a
    normal of std 0.1 truncated at 2 std, biases 0.1 (the co-author's models/rn.py); word
    embeddings normal with `embed_std`; LSTM weights uniform in +-1/sqrt(fan-in), forget-gate
    bias 1 (TF's LSTMCell). With embed_std ~0.1 (TF's default scale) the logits hardly depend
    on the question at init and the RN stays at chance (the `--mini-embed-std` flag)."""
    import jax
    import jax.numpy as jnp

    keys = iter(jax.random.split(key, 32))

    def tn(shape):
        return 0.1 * jax.random.truncated_normal(next(keys), -2.0, 2.0, shape)

    def uniform(shape, fan_in):
        limit = 1.0 / np.sqrt(fan_in)
        return jax.random.uniform(next(keys), shape, minval=-limit, maxval=limit)

    params = {"conv": [], "bn": []}
    state = {"bn": []}
    cin = 3
    for _ in range(conv_layers):
        params["conv"].append({"w": tn((3, 3, cin, ch)), "b": jnp.full(ch, 0.1)})
        params["bn"].append({"scale": jnp.ones(ch), "bias": jnp.zeros(ch)})
        state["bn"].append({"mean": jnp.zeros(ch), "var": jnp.ones(ch)})
        cin = ch
    params["embed"] = embed_std * jax.random.normal(next(keys), (vocab, emb))
    params["lstm"] = {
        "wx": uniform((emb, 4 * hid), emb + hid),
        "wh": uniform((hid, 4 * hid), emb + hid),
        "b": jnp.zeros(4 * hid).at[hid : 2 * hid].set(1.0),  # gates i, f, g, o
    }
    dims = [2 * (ch + 2) + 2 * hid, g, g, g, g]  # g acts on [o_j; o_i; q]
    params["g"] = [{"w": tn((a, b)), "b": jnp.full(b, 0.1)} for a, b in zip(dims, dims[1:])]
    dims = [g, f, f, 2]
    params["f"] = [{"w": tn((a, b)), "b": jnp.full(b, 0.1)} for a, b in zip(dims, dims[1:])]
    return params, state


def mini_question(params, tokens, lengths):
    """[c; h] of the LSTM after the last real token (padding steps leave the state alone)."""
    import jax
    import jax.numpy as jnp

    lstm = params["lstm"]
    hid = lstm["wh"].shape[0]
    emb = params["embed"][tokens]

    def cell(carry, inp):
        c_, h_ = carry
        xt, t = inp
        i, f_, g_, o = jnp.split(xt @ lstm["wx"] + h_ @ lstm["wh"] + lstm["b"], 4, -1)
        c2 = jax.nn.sigmoid(f_) * c_ + jax.nn.sigmoid(i) * jnp.tanh(g_)
        h2 = jax.nn.sigmoid(o) * jnp.tanh(c2)
        live = (t < lengths)[:, None]
        return (jnp.where(live, c2, c_), jnp.where(live, h2, h_)), None

    zeros = jnp.zeros((tokens.shape[0], hid))
    steps = (jnp.swapaxes(emb, 0, 1), jnp.arange(emb.shape[1]))
    (c_last, h_last), _ = jax.lax.scan(cell, (zeros, zeros), steps)
    return jnp.concatenate([c_last, h_last], -1)


def mini_rn_apply(params, state, batch, train: bool, momentum: float = 0.9, agg: str = "mean"):
    """(logits, new BatchNorm state). conv 3x3/2 -> ReLU -> BN; objects + integer (row, col)
    (paper eq. 2); LSTM [c; h] at the last real token; g on every ordered pair; f."""
    import jax
    import jax.numpy as jnp

    x = batch["image"].astype(jnp.float32) / 255.0
    new_bn = []
    for conv, bn, st in zip(params["conv"], params["bn"], state["bn"]):
        x = jax.lax.conv_general_dilated(
            x, conv["w"], (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        x = jax.nn.relu(x + conv["b"])
        if train:
            mean, var = x.mean((0, 1, 2)), x.var((0, 1, 2))
            new_bn.append(
                {
                    "mean": momentum * st["mean"] + (1 - momentum) * mean,
                    "var": momentum * st["var"] + (1 - momentum) * var,
                }
            )
        else:
            mean, var = st["mean"], st["var"]
            new_bn.append(st)
        x = (x - mean) / jnp.sqrt(var + 1e-3) * bn["scale"] + bn["bias"]
    b, h, w, c = x.shape
    rows, cols = jnp.meshgrid(jnp.arange(h), jnp.arange(w), indexing="ij")
    coords = jnp.stack([rows, cols], -1).reshape(1, h * w, 2).astype(jnp.float32)
    objs = jnp.concatenate([x.reshape(b, h * w, c), jnp.broadcast_to(coords, (b, h * w, 2))], -1)

    q = mini_question(params, batch["question_tokens"], batch["question_length"])

    n = h * w
    pairs = jnp.concatenate(
        [
            jnp.broadcast_to(objs[:, None, :, :], (b, n, n, c + 2)),  # o_j
            jnp.broadcast_to(objs[:, :, None, :], (b, n, n, c + 2)),  # o_i
            jnp.broadcast_to(q[:, None, None, :], (b, n, n, q.shape[-1])),
        ],
        -1,
    )
    z = pairs
    for layer in params["g"]:
        z = jax.nn.relu(z @ layer["w"] + layer["b"])
    z = z.sum((1, 2)) if agg == "sum" else z.mean((1, 2))
    for k, layer in enumerate(params["f"]):
        z = z @ layer["w"] + layer["b"]
        if k < len(params["f"]) - 1:
            z = jax.nn.relu(z)
    return z, {"bn": new_bn}


# ------------------------------------------------------------------ trainers --------------


@dataclasses.dataclass
class Trainer:
    """One model behind three calls: a training step on a batch, and eval-mode predictions
    (running-average BatchNorm) and batch-statistics predictions on a batch."""

    step: object  # batch -> (loss, accuracy)
    predict: object  # batch -> predicted class (eval mode)
    predict_batch_stats: object  # batch -> predicted class with BN on the batch's statistics
    recalibrated: object  # training batches -> eval-mode predict fn after BN re-estimation
    model: object = None  # the nnx module, for the package models


def lecun_g_and_f(model, seed: int) -> None:
    """Re-draws the RN's g and f layers as before the fix: LeCun normal with each block's own
    fan-in (66, 66, 512 for the first g layer), zero biases."""
    import jax
    import jax.numpy as jnp

    init = jax.nn.initializers.lecun_normal()
    layers = [model.g_obj_j, model.g_obj_i, model.g_q, *model.g_rest]
    layers += [model.f.fc1, model.f.fc2, model.f.out]
    for k, layer in enumerate(layers):
        key = jax.random.fold_in(jax.random.key(seed), 1000 + k)
        layer.kernel[...] = init(key, layer.kernel.shape)
        if layer.bias is not None:
            layer.bias[...] = jnp.zeros(layer.bias.shape)


def adam_fns(model, rate):
    """(step, predict) of a package FigureQA model under Adam at `rate` (a float or an optax
    schedule): step(batch) -> (mean loss, accuracy), one update; predict(model, batch) -> the
    eval-mode classes (jitted, taking the model so that copies of it can be scored)."""
    import optax
    from flax import nnx

    opt = nnx.Optimizer(model, optax.adam(rate), wrt=nnx.Param)

    @nnx.jit
    def step(model, opt, batch):
        def loss_fn(m):
            logits = m({k: batch[k] for k in INPUTS}, train=True)
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"])
            return loss.mean(), (logits.argmax(-1) == batch["label"]).mean()

        (loss, acc), grads = nnx.value_and_grad(loss_fn, has_aux=True)(model)
        opt.update(model, grads)
        return loss, acc

    @nnx.jit
    def predict(model, batch):
        return model(batch, train=False).argmax(-1)

    return (lambda b: step(model, opt, b)), predict


def package_trainer(cfg, lr, seed: int, init_question=None, lecun=False) -> Trainer:
    from flax import nnx

    from chartjax.models import relation_network as rn

    model = rn.build(cfg, nnx.Rngs(seed))
    if lecun:
        lecun_g_and_f(model, seed)
    if init_question is not None:
        nnx.update(model.question, nnx.state(init_question))
    step, predict = adam_fns(model, lr)

    @nnx.jit
    def predict_batch_stats(model, batch):
        # train=True normalizes with the batch's statistics (and would update the running
        # ones): run it on a copy so evaluation leaves the model as it was.
        return model(batch, train=True).argmax(-1)

    def batch_stats(batch):
        return predict_batch_stats(nnx.clone(model), batch)

    @nnx.jit
    def bn_pass(model, batch):
        model(batch, train=True)  # updates the running averages only: no optimizer step

    def recalibrated(batches):
        copy = nnx.clone(model)
        for b in batches:
            bn_pass(copy, b)
        return lambda b: predict(copy, b)

    return Trainer(
        step=step,
        predict=lambda b: predict(model, b),
        predict_batch_stats=batch_stats,
        recalibrated=recalibrated,
        model=model,
    )


def mini_trainer(cfg, lr, seed: int, embed_std: float = 1.0, agg: str = "mean") -> Trainer:
    import jax
    import optax

    params, state = mini_rn_init(
        jax.random.key(seed),
        vocab=cfg.vocab_size,
        conv_layers=cfg.conv_layers,
        ch=cfg.conv_channels,
        emb=cfg.embed_dim,
        hid=cfg.lstm_dim,
        g=cfg.g_dim,
        f=cfg.f_dim,
        embed_std=embed_std,
    )
    tx = optax.adam(lr)
    box = {"params": params, "state": state, "opt": tx.init(params)}

    @jax.jit
    def step(params, state, opt, batch):
        def loss_fn(p):
            logits, new_state = mini_rn_apply(p, state, batch, True, agg=agg)
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"])
            return loss.mean(), (new_state, (logits.argmax(-1) == batch["label"]).mean())

        (loss, (new_state, acc)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt = tx.update(grads, opt, params)
        return optax.apply_updates(params, updates), new_state, opt, loss, acc

    @functools.partial(jax.jit, static_argnames="train")
    def predict(params, state, batch, train):
        return mini_rn_apply(params, state, batch, train, agg=agg)[0].argmax(-1)

    def do_step(batch):
        box["params"], box["state"], box["opt"], loss, acc = step(
            box["params"], box["state"], box["opt"], batch
        )
        return loss, acc

    @jax.jit
    def bn_pass(params, state, batch):
        return mini_rn_apply(params, state, batch, True, agg=agg)[1]

    def recalibrated(batches):
        state = box["state"]
        for b in batches:
            state = bn_pass(box["params"], state, b)
        return lambda b: predict(box["params"], state, b, False)

    return Trainer(
        step=do_step,
        predict=lambda b: predict(box["params"], box["state"], b, False),
        predict_batch_stats=lambda b: predict(box["params"], box["state"], b, True),
        recalibrated=recalibrated,
    )


# ------------------------------------------------------------------ training --------------


def learning_rate(lr: float, schedule: str, steps: int):
    """Adam's learning rate: constant, or a cosine decay to 0 at `steps`, so that the last
    steps barely move the weights and BatchNorm's running averages (~10 steps behind at
    momentum 0.9) describe the final ones."""
    import optax

    if schedule == "cosine":
        return optax.cosine_decay_schedule(lr, steps)
    return lr


def batch_schedule(n: int, batch: int, steps: int, seed: int) -> list[np.ndarray]:
    """The index arrays every model trains on: epochs of a seeded permutation."""
    rng = np.random.default_rng(seed)
    out, order, pos = [], rng.permutation(n), 0
    for _ in range(steps):
        if pos + batch > n:
            order, pos = rng.permutation(n), 0
        out.append(order[pos : pos + batch])
        pos += batch
    return out


def accuracy_ci(predictions: np.ndarray, labels: np.ndarray) -> dict:
    from chartjax.metrics.classification import wilson_interval

    correct, n = int((predictions == labels).sum()), len(labels)
    low, high = wilson_interval(correct, n)
    return {
        "accuracy": round(100 * correct / n, 2),
        "ci95": [round(100 * low, 2), round(100 * high, 2)],
        "n": n,
        "predicted_yes_pct": round(100 * float(predictions.mean()), 1),
    }


def predict_all(fn, d: dict) -> np.ndarray:
    """Predictions over a split in EVAL_BATCH rows (the last batch padded: one shape)."""
    out = []
    n = len(d["label"])
    for i in range(0, n, EVAL_BATCH):
        b = {k: d[k][i : i + EVAL_BATCH] for k in INPUTS}
        m = len(b["image"])
        if m < EVAL_BATCH:
            b = {k: np.concatenate([v, np.repeat(v[:1], EVAL_BATCH - m, 0)]) for k, v in b.items()}
        out.append(np.asarray(fn(b))[:m])
    return np.concatenate(out)


def train_model(name, trainer, feats, schedule, args) -> dict:
    train, val1 = feats["train1"], feats["validation1"]
    curve, losses, accs = [], [], []
    train_s = cpu_s = 0.0
    reached = None
    step = 0
    for step, idx in enumerate(schedule, 1):
        batch = {k: train[k][idx] for k in (*INPUTS, "label")}
        t, c = time.perf_counter(), harness.cpu_seconds()
        loss, acc = trainer.step(batch)
        losses.append(float(loss))  # blocks until the step is done
        accs.append(float(acc))
        train_s += time.perf_counter() - t
        cpu_s += harness.cpu_seconds() - c
        if step == 1:
            first_step_s = train_s  # compilation included
        over_cpu = args.budget_cpu_s is not None and cpu_s >= args.budget_cpu_s
        last = train_s >= args.budget_s or over_cpu or step == len(schedule)
        if step % args.eval_every == 0 or last:
            v = predict_all(trainer.predict, val1)
            row = {
                "step": step,
                "train_s": round(train_s, 1),
                "train_cpu_s": round(cpu_s, 1),
                "train_loss": round(float(np.mean(losses[-args.eval_every :])), 4),
                "train_accuracy": round(100 * float(np.mean(accs[-args.eval_every :])), 1),
                "validation1_accuracy": round(100 * float((v == val1["label"]).mean()), 2),
                "validation1_predicted_yes_pct": round(100 * float(v.mean()), 1),
            }
            vb = predict_all(trainer.predict_batch_stats, val1)
            row["validation1_accuracy_batch_stats_bn"] = round(
                100 * float((vb == val1["label"]).mean()), 2
            )
            curve.append(row)
            harness.progress({"model": name, **row})
            if reached is None and row["validation1_accuracy"] >= args.target:
                reached = {k: row[k] for k in ("step", "train_s", "train_cpu_s")}
        if last:
            break
    predictions = {
        s: predict_all(trainer.predict, feats[s]) for s in ("validation1", "validation2")
    }
    final = {s: accuracy_ci(p, feats[s]["label"]) for s, p in predictions.items()}
    final["validation1_by_group"] = breakdown(predictions["validation1"], feats["validation1"])
    # BN re-estimated at the final weights on training batches the model saw last.
    passes = [
        {k: train[k][idx] for k in INPUTS} for idx in schedule[max(step - args.bn_passes, 0) : step]
    ]
    predict = trainer.recalibrated(passes)
    final_bn = {
        s: accuracy_ci(predict_all(predict, feats[s]), feats[s]["label"])
        for s in ("validation1", "validation2")
    }
    return {
        "steps": step,
        "train_s": round(train_s, 1),
        "train_cpu_s": round(cpu_s, 1),
        "first_step_s": round(first_step_s, 1),
        "steps_per_s": round((step - 1) / (train_s - first_step_s), 2) if step > 1 else None,
        f"first_at_target_{args.target:g}": reached,
        "final": final,
        "final_bn_reestimated": final_bn,
        "curve": curve,
    }


def model_configs(args, vocab_size: int) -> dict:
    from chartjax.models import relation_network as rn

    common = dict(
        image_size=args.image_size,
        conv_layers=args.conv_layers,
        vocab_size=vocab_size,
        dropout=args.dropout,
    )
    return {
        # The paper's CNN+LSTM: Glorot convs, 32-d embedding, MLP 512.
        "cnn_lstm": rn.RNConfig(kind="cnn_lstm", embed_dim=32, f_dim=512, **common),
        "rn": rn.RNConfig(kind="rn", **common),
        "mini_rn": rn.RNConfig(kind="rn", **common),  # its sizes; the code is mini_rn_apply
        "mini_rn_sum": rn.RNConfig(kind="rn", **common),
        "rn_lecun": rn.RNConfig(kind="rn", **common),
        # the CNN+LSTM's 32-d embedding, so that its question encoder fits
        "rn_cnn_question": rn.RNConfig(kind="rn", embed_dim=32, **common),
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", default="/tmp/chartjax_figureqa_sanity", help="corpus + cache")
    p.add_argument("--train-images", type=int, default=2000)
    p.add_argument("--val-images", type=int, default=250)
    p.add_argument("--models", default=",".join(DEFAULT_MODELS), help=f"any of {MODELS}")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--conv-layers", type=int, default=4, help="64 px / 2^4 = 4x4 objects")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--schedule", choices=("constant", "cosine"), default="constant")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--steps", type=int, default=5000, help="at most this many steps per model")
    p.add_argument("--budget-s", type=float, default=600, help="training seconds per model")
    p.add_argument(
        "--budget-cpu-s",
        type=float,
        default=None,
        help="also stop at this much process CPU time per model (steady under a shared load)",
    )
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--target", type=float, default=90.0, help="validation1 accuracy, %%")
    p.add_argument("--bn-passes", type=int, default=50, help="BN re-estimation passes")
    p.add_argument(
        "--mini-embed-std",
        type=float,
        default=1.0,
        help="mini_rn's word-embedding std (the package's N(0, 1); 0.1 stalls it)",
    )
    p.add_argument("--seed", type=int, default=0)
    harness.add_out_flag(p)
    args = p.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        p.error(f"unknown models {unknown}; choose from {MODELS}")
    if "rn_cnn_question" in models and "cnn_lstm" not in models:
        p.error("rn_cnn_question starts from the trained cnn_lstm: list cnn_lstm too")
    run = harness.Run(
        "figureqa_sanity",
        vars(args),
        ("jax", "flax", "optax", "tensorflow", "tensorflow-cpu", "tensorflow-datasets"),
    )
    from chartjax import host_memory

    host_memory.keep_freed_memory()
    from chartjax.tasks import figureqa

    os.makedirs(args.work, exist_ok=True)
    t = time.perf_counter()
    raw, data_dir = build_corpus(args.work, args.train_images, args.val_images, args.seed)
    feats = load_features(data_dir, args.image_size, args.work)
    add_groups(feats, raw)
    prep_s = time.perf_counter() - t
    check = input_check(feats, raw)
    harness.progress({"corpus": {s: len(f["label"]) for s, f in feats.items()}, "inputs": check})

    schedule = batch_schedule(len(feats["train1"]["label"]), args.batch, args.steps, args.seed)
    cfgs = model_configs(args, len(figureqa.vocabulary()))
    lr = learning_rate(args.lr, args.schedule, args.steps)
    results = {}
    trained = {}
    for name in [m for m in MODELS if m in models]:  # cnn_lstm before rn_cnn_question
        if name in ("mini_rn", "mini_rn_sum"):
            agg = "sum" if name == "mini_rn_sum" else "mean"
            trainer = mini_trainer(cfgs[name], lr, args.seed, args.mini_embed_std, agg)
        elif name == "rn_cnn_question":
            question = trained["cnn_lstm"].question
            trainer = package_trainer(cfgs[name], lr, args.seed, init_question=question)
        else:
            trainer = package_trainer(cfgs[name], lr, args.seed, lecun=name == "rn_lecun")
        results[name] = train_model(name, trainer, feats, schedule, args)
        trained[name] = trainer.model
    answers = {s: float(np.mean(f["label"])) for s, f in feats.items()}
    report = run.report(
        {
            "corpus": {
                **CORPUS,
                "questions": {s: len(f["label"]) for s, f in feats.items()},
                "share_yes": answers,
                "prepare_s": round(prep_s, 1),
            },
            "input_check": check,
            "models": results,
        }
    )
    return harness.emit(report, args.out)


if __name__ == "__main__":
    main()
