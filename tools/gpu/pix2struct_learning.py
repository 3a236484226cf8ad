"""Pix2Struct chart -> table learning check on one GPU, without TensorFlow, gin or a chartjax
install (issue 15, item 7): trains a DePlot-style Pix2Struct from scratch on generated CHART-Info
charts and prints held-out RMS F1 with and without the title row against the best constant table.

Generate the corpus HERE (a full chartjax environment), as a tarball the device machine's
64 MiB upload can carry (~18 KB a chart packed: 2,600 charts ~47 MB; the pretty-printed JSON
packs 4x): plain bar charts with each value printed on its bar, the charts bench/learning.py
reads values off on CPU:

    for s in train:2400:1 heldout:200:2; do IFS=: read name num seed <<< "$s"
      chartjax-synth chart_info --out runs/gpu_data/$name --num $num --seed $seed \
        --types "Grouped vertical bar" --size 480x360 --max-categories 3 --max-series 1 \
        --max-topics 4 --value-labels 16 --png-compression 9 --workers 2; done
    cp "$(python -c 'from chartjax.data import render; print(render.default_font_path())')" \
        runs/gpu_data/   # the header font (the device machine may have no matplotlib)
    tar czf runs/gpu_data.tar.gz -C runs gpu_data

and run it THERE from the repository root (runs/ is git-ignored: the run tool carries the
tarball with carry=["runs/gpu_data.tar.gz"]):

    tar xzf runs/gpu_data.tar.gz -C /tmp && \
        PYTHONPATH=. python tools/gpu/pix2struct_learning.py --data /tmp/gpu_data --out $OUT/p2s

What it does, with the package's TF-free code only (models/pix2struct.py, models/losses.py,
models/decoding.py, tasks/chart_info_tables.py, metrics/tables.py, data/render.py,
data/images.py; the annotation parser tfds_builders/chart_info/annotations.py is loaded by path,
since its package imports tensorflow_datasets):
* targets: each chart's DePlot table derived from its task-6 JSON as the deplot task derives it
  (chart_info_tables.chart_table over annotations.parse);
* inputs: the PNG (PIL, alpha on white), DePlot's prompt rendered above it (data/render.py;
  `--prompt none`: the chart alone), then Pix2Struct patches computed on the device in jax
  (`patches`: the same steps as data/patches.py's TF ops, tested equal to them); every image of
  a corpus has one size, so the uint8 images sit on the device and patching is part of the step;
* tokens: characters (`CharVocab`): the device machine has no sentencepiece, and a character
  vocabulary needs no training files; ids 0 pad, 1 EOS (Pix2Struct's conventions), 2 unknown;
* training: AdamW with linear warmup and cosine decay, bf16 activations, fp32 parameters and
  loss (models/losses.py, z-loss 1e-4), one device; held-out greedy decoding every
  `--eval_every` steps and at the end;
* scores: RMS precision/recall/F1 and RNSS (metrics/tables.py), RMS F1 with the title rows
  removed, the constant baselines and the paired bootstrap margin of bench/learning_curve.py.
Prints one JSON object (also written to `<out>/result.json`, with `predictions.jsonl`).

Not yet run on a GPU: no device was lent when it was written (its 2-step CPU run is
tests/tools/test_gpu_pix2struct.py). The default model (384 wide, 4+4 layers, 1,024 patches,
batch 64, AdamW 1e-3, at most 3,000 steps or 300 s of training) is a guess at what learns in a
few minutes there, not a measured setting; with loading (~2,600 PNGs and headers on one host
core) and compilation it is meant to fit one 10-minute device call. On CPU the values of the
same charts were not read in 3,000 steps (18.8 CPU minutes) of a 2-million-parameter model
(bench/learning.py, "Reading values").
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAD, EOS, UNK = 0, 1, 2
PROMPT = "Generate underlying data table of the figure below:"  # chartjax.data.tables'


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="folder with train/ and heldout/ corpora")
    p.add_argument("--out", required=True, help="output folder (result.json, predictions)")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--time_budget_s", type=float, default=300.0, help="training wall limit")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--weight_decay", type=float, default=0.01)
    p.add_argument("--max_patches", type=int, default=1024)
    p.add_argument("--max_target_len", type=int, default=192, help="target characters + EOS")
    p.add_argument("--emb_dim", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--mlp_dim", type=int, default=1024)
    p.add_argument("--layers", type=int, default=4, help="encoder and decoder layers each")
    p.add_argument("--dtype", default="bfloat16", help="activation dtype")
    p.add_argument("--attention", default="dot_product", help="Pix2StructConfig.attention_impl")
    p.add_argument("--eval_every", type=int, default=1000)
    p.add_argument("--eval_batch", type=int, default=100)
    p.add_argument("--prompt", choices=("deplot", "none"), default="deplot")
    p.add_argument("--font", default=None, help="header font (default: <data>/DejaVuSans.ttf)")
    p.add_argument("--max_train", type=int, default=0, help="use the first N training charts")
    p.add_argument("--max_heldout", type=int, default=0, help="use the first N held-out charts")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


# ------------------------------------------------------------------ corpus -----------------


def _annotations_module():
    """tfds_builders/chart_info/annotations.py (pure Python + numpy) without its package,
    whose __init__ imports the TFDS builder and so tensorflow_datasets."""
    path = os.path.join(ROOT, "tfds_builders", "chart_info", "annotations.py")
    spec = importlib.util.spec_from_file_location("_chart_info_annotations", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_corpus(root: str, limit: int = 0) -> tuple[list[str], list[np.ndarray], list[str]]:
    """(ids, uint8 RGB images, DePlot targets) of a chart_info release-layout folder
    (`png/<stem>.png`, `json_gt/<stem>.json`), in stem order; charts without a data series
    (pies, donuts) are skipped."""
    from chartjax.tasks.chart_info_tables import chart_table

    ann = _annotations_module()
    json_dir = os.path.join(root, "json_gt")
    if not os.path.isdir(json_dir):
        raise FileNotFoundError(f"{json_dir}: no json_gt/ folder (a chart_info corpus?)")
    stems = sorted((f[:-5] for f in os.listdir(json_dir) if f.endswith(".json")), key=_stem_key)
    ids, images, targets = [], [], []
    for stem in stems:
        path = os.path.join(json_dir, stem + ".json")
        with open(path, encoding="utf-8") as f:
            try:
                parsed = ann.parse(json.load(f))
            except (ValueError, ann.AnnotationError) as e:
                raise ValueError(f"{path}: {e}") from e
        series = json.loads(parsed["data_series_json"]) if parsed["data_series_json"] else None
        table = chart_table(
            parsed["chart_type"],
            series,
            parsed["text_blocks"],
            parsed["text_roles"],
            parsed["axis_ticks"],
        )
        if table is None:
            continue
        images.append(read_png(os.path.join(root, "png", stem + ".png")))
        ids.append(stem)
        targets.append(table)
        if limit and len(ids) == limit:
            break
    if not ids:
        raise ValueError(f"{root}: no chart with a data series")
    return ids, images, targets


def read_png(path: str) -> np.ndarray:
    """uint8 RGB of a PNG: PIL when it is installed (as chartjax.data.images does), else
    `decode_png`."""
    try:
        from PIL import Image

        from chartjax.data.images import to_rgb
    except ImportError:
        return decode_png(path)
    with Image.open(path) as im:
        return np.asarray(to_rgb(im))


def decode_png(path: str) -> np.ndarray:
    """8-bit RGB/RGBA non-interlaced PNG -> uint8 RGB, alpha composited on white, with zlib and
    numpy only: the device machine need not have PIL (jax, flax and torch do not pull it in).
    Hand-written for the generator's files (chartjax.synth writes filter type Up on every row);
    the other filter types are undone row by row, slowly but exactly (tested against PIL)."""
    import struct
    import zlib

    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    pos, idat, head = 8, [], None
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if head is None:
        raise ValueError(f"{path}: no IHDR chunk")
    w, h, depth, color, _, _, interlace = head
    channels = {2: 3, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace:
        raise ValueError(f"{path}: only 8-bit RGB/RGBA non-interlaced PNGs (no PIL here)")
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(h, 1 + w * channels)
    filters, rows = raw[:, 0], raw[:, 1:].astype(np.int32)
    out = np.zeros((h, w * channels), np.int32)
    for y in range(h):
        up = out[y - 1] if y else np.zeros(w * channels, np.int32)
        line, kind = rows[y], int(filters[y])
        if kind == 0:
            out[y] = line
        elif kind == 2:
            out[y] = (line + up) & 255
        elif kind == 1:  # Sub: a running sum per channel
            out[y] = np.cumsum(line.reshape(w, channels), axis=0).reshape(-1) & 255
        elif kind in (3, 4):
            cur = out[y]
            for x in range(w * channels):
                left = cur[x - channels] if x >= channels else 0
                corner = up[x - channels] if x >= channels else 0
                if kind == 3:
                    pred = (left + up[x]) // 2
                else:  # Paeth
                    p = left + up[x] - corner
                    pa, pb, pc = abs(p - left), abs(p - up[x]), abs(p - corner)
                    pred = left if pa <= pb and pa <= pc else (up[x] if pb <= pc else corner)
                cur[x] = (line[x] + pred) & 255
        else:
            raise ValueError(f"{path}: row {y} has filter type {kind}")
    pixels = out.reshape(h, w, channels)
    if channels == 3:
        return pixels.astype(np.uint8)
    rgb, alpha = pixels[..., :3], pixels[..., 3:]
    return ((rgb * alpha + 255 * (255 - alpha) + 127) // 255).astype(np.uint8)


def _stem_key(stem: str):
    return (0, int(stem), "") if stem.isdigit() else (1, 0, stem)


def with_header(images: list[np.ndarray], prompt: str, font: str | None) -> np.ndarray:
    """The model's views stacked into one uint8 array [N, H, W, 3] (one size for all)."""
    if prompt:
        try:
            from chartjax.data.render import render_header
        except ImportError as e:
            raise ImportError(f"the header needs PIL ({e}): run with --prompt none") from e

        images = [render_header(im, prompt, font_path=font) for im in images]
    shapes = {im.shape for im in images}
    if len(shapes) != 1:
        raise ValueError(f"images of several sizes {sorted(shapes)[:3]}: generate with --size")
    return np.stack(images)


class CharVocab:
    """Characters of the training targets -> ids from 3 (hand-written: a table of characters is
    all this needs, and no tokenizer library is on the device machine)."""

    def __init__(self, texts):
        chars = sorted({c for t in texts for c in t})
        self.id_of = {c: i + 3 for i, c in enumerate(chars)}
        self.chars = ["", "", "\ufffd", *chars]
        self.vocab_size = len(self.chars)

    def encode(self, text: str, max_len: int) -> np.ndarray:
        """Ids + EOS, cut to `max_len` (EOS kept), padded with 0."""
        ids = [self.id_of.get(c, UNK) for c in text][: max_len - 1] + [EOS]
        return np.array(ids + [PAD] * (max_len - len(ids)), np.int32)

    def decode(self, ids) -> str:
        out = []
        for i in ids:
            if i == EOS:
                break
            if i != PAD:
                out.append(self.chars[int(i)] if int(i) < self.vocab_size else "\ufffd")
        return "".join(out)


# ------------------------------------------------------------------ patches (jax) ----------


def patch_grid(height: int, width: int, max_patches: int, patch: int = 16) -> tuple[int, int]:
    """data/patches.py's grid, in float32 as the official code computes it."""
    f = np.float32
    scale = np.sqrt(f(max_patches) * (f(patch) / f(height)) * (f(patch) / f(width)))
    rows = max(min(np.floor(scale * f(height) / f(patch)), f(max_patches)), f(1))
    cols = max(min(np.floor(scale * f(width) / f(patch)), f(max_patches)), f(1))
    return int(rows), int(cols)


def patches(images, max_patches: int, patch: int = 16):
    """uint8 [B, H, W, C] -> float32 `encoder_input_tokens` [B, max_patches, 2 + p*p*C], the
    steps of data/patches.py: per-image standardization at full resolution, antialiased
    bilinear resize to the grid (jax.image.resize is TF's ScaleAndTranslate), patches in
    (p, p, C) order row-major, 1-based row/col ids first, zero padding."""
    import jax
    import jax.numpy as jnp

    b, h, w, c = images.shape
    rows, cols = patch_grid(h, w, max_patches, patch)
    x = images.astype(jnp.float32)
    centred = x - x.mean(axis=(1, 2, 3), keepdims=True)
    norm = jnp.sqrt(jnp.sum(jnp.square(centred), axis=(1, 2, 3), keepdims=True))
    x = centred / (jnp.maximum(norm, 1.0) / np.sqrt(np.float32(h * w * c)))
    x = jax.image.resize(x, (b, rows * patch, cols * patch, c), "linear", antialias=True)
    grid = x.reshape(b, rows, patch, cols, patch * c).transpose(0, 1, 3, 2, 4)
    flat = grid.reshape(b, rows * cols, patch * patch * c)
    ids = np.stack(
        [np.repeat(np.arange(1, rows + 1), cols), np.tile(np.arange(1, cols + 1), rows)], 1
    ).astype(np.float32)
    out = jnp.concatenate([jnp.broadcast_to(ids, (b, rows * cols, 2)), flat], axis=-1)
    return jnp.pad(out, ((0, 0), (0, max_patches - rows * cols), (0, 0)))


# ------------------------------------------------------------------ model, training --------


def make_model(args, vocab_size: int):
    from chartjax.models import pix2struct
    from chartjax.models.model_configs import Pix2StructConfig

    if args.emb_dim % args.heads:
        raise ValueError(f"--emb_dim {args.emb_dim} is not a multiple of --heads {args.heads}")
    cfg = Pix2StructConfig(
        vocab_size=vocab_size,
        emb_dim=args.emb_dim,
        num_heads=args.heads,
        head_dim=args.emb_dim // args.heads,
        mlp_dim=args.mlp_dim,
        num_encoder_layers=args.layers,
        num_decoder_layers=args.layers,
        dtype=args.dtype,
        attention_impl=args.attention,
    )
    return pix2struct.build(cfg, args.seed)


def make_fns(model, tx, max_patches: int):
    """Jitted train step and encoder inputs; the batch is gathered on the device by index."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from chartjax.models.losses import seq2seq_loss

    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    def batch_of(images, tokens, idx):
        targets = tokens[idx]
        inputs = jnp.pad(targets[:, :-1], ((0, 0), (1, 0)))  # start id 0, shifted right
        return {
            "encoder_input_tokens": patches(images[idx], max_patches),
            "decoder_input_tokens": inputs,
            "decoder_target_tokens": targets,
        }

    @jax.jit
    def train_step(params, opt_state, images, tokens, idx):
        batch = batch_of(images, tokens, idx)

        def loss_fn(p):
            return seq2seq_loss(nnx.merge(graphdef, p, rest), batch, deterministic=True)

        (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax_apply(params, updates), opt_state, loss, aux["accuracy"]

    encode_inputs = jax.jit(lambda images, idx: patches(images[idx], max_patches))
    return graphdef, params, rest, train_step, encode_inputs


def optax_apply(params, updates):
    import optax

    return optax.apply_updates(params, updates)


def predict(graphdef, params, rest, encode_inputs, images, idx_batches, vocab, max_len):
    from flax import nnx

    from chartjax.models.decoding import greedy_decode

    model = nnx.merge(graphdef, params, rest)
    texts = []
    for idx in idx_batches:
        batch = {"encoder_input_tokens": encode_inputs(images, idx)}
        tokens, _ = greedy_decode(model, batch, max_decode_len=max_len)
        texts += [vocab.decode(row) for row in np.asarray(tokens)]
    return texts


def levenshtein(a, b) -> int:
    """Edit distance (unit costs) of two sequences: `editdistance.eval`'s value, for a machine
    without that package (hand-written; tested equal to it)."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def ensure_editdistance() -> None:
    """metrics/tables.py imports editdistance; the device machine may not have it."""
    try:
        import editdistance  # noqa: F401
    except ImportError:
        import types

        sys.modules["editdistance"] = types.SimpleNamespace(eval=levenshtein)


def score(texts: list[str], targets: list[str]) -> dict:
    from chartjax.metrics import tables as table_metrics
    from tools.bench import learning_curve

    out = table_metrics.rms(texts, targets).update(table_metrics.rnss(texts, targets)).metrics
    out["rms_f1_no_title"] = float(learning_curve.rms_f1_per_chart(texts, targets, False).mean())
    return {k: float(v) for k, v in out.items()}


def _eval_batches(n: int, size: int) -> list[np.ndarray]:
    """Index batches covering 0..n-1, the last padded by repeating index 0 (cut after)."""
    out = []
    for s in range(0, n, size):
        idx = np.arange(s, min(s + size, n))
        out.append(np.concatenate([idx, np.zeros(size - len(idx), int)]).astype(np.int32))
    return out


def run(args) -> dict:
    import jax
    import jax.numpy as jnp
    import optax

    from tools.bench import learning_curve

    t_start = time.time()
    load_start = list(os.getloadavg())
    font = args.font or os.path.join(args.data, "DejaVuSans.ttf")
    if args.prompt == "deplot" and not os.path.exists(font):
        raise FileNotFoundError(f"--font {font}: no header font (copy one, or --prompt none)")
    prompt = PROMPT if args.prompt == "deplot" else ""
    t = time.time()
    train_ids, train_imgs, train_targets = load_corpus(
        os.path.join(args.data, "train"), args.max_train
    )
    held_ids, held_imgs, held_targets = load_corpus(
        os.path.join(args.data, "heldout"), args.max_heldout
    )
    vocab = CharVocab(train_targets)
    train_images = jnp.asarray(with_header(train_imgs, prompt, font))
    held_images = jnp.asarray(with_header(held_imgs, prompt, font))
    if train_images.shape[1:] != held_images.shape[1:]:
        raise ValueError(f"train {train_images.shape[1:]} vs held-out {held_images.shape[1:]}")
    tokens = jnp.asarray(np.stack([vocab.encode(x, args.max_target_len) for x in train_targets]))
    load_s = time.time() - t

    model = make_model(args, vocab.vocab_size)
    warmup = max(min(args.warmup, args.steps - 1), 0)  # cosine decay needs steps > warmup
    schedule = optax.warmup_cosine_decay_schedule(0.0, args.lr, warmup, max(args.steps, warmup + 1))
    tx = optax.chain(
        optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=args.weight_decay)
    )
    graphdef, params, rest, train_step, encode_inputs = make_fns(model, tx, args.max_patches)
    opt_state = tx.init(params)
    held_batches = _eval_batches(len(held_ids), args.eval_batch)
    n_held = len(held_ids)

    def evaluate(step: int) -> tuple[dict, list[str]]:
        texts = predict(
            graphdef,
            params,
            rest,
            encode_inputs,
            held_images,
            held_batches,
            vocab,
            args.max_target_len,
        )[:n_held]
        return {"step": step, **score(texts, held_targets)}, texts

    rng = np.random.default_rng(args.seed)
    order, pos = rng.permutation(len(train_ids)), 0
    curve, losses = [], []
    train_s, step, compile_s = 0.0, 0, None
    while step < args.steps and train_s < args.time_budget_s:
        if pos + args.batch > len(order):
            order, pos = rng.permutation(len(train_ids)), 0
        idx = jnp.asarray(order[pos : pos + args.batch])
        pos += args.batch
        t = time.time()
        params, opt_state, loss, acc = train_step(params, opt_state, train_images, tokens, idx)
        step += 1
        if step == 1 or step % 50 == 0 or step == args.steps:
            loss = float(loss)  # syncs
            losses.append([step, loss, float(acc)])
            if not np.isfinite(loss):
                raise FloatingPointError(f"step {step}: loss {loss}")
        if compile_s is None:
            jax.block_until_ready(params)
            compile_s = time.time() - t
        else:
            train_s += time.time() - t
        if args.eval_every and step % args.eval_every == 0 and step < args.steps:
            curve.append(evaluate(step)[0])
    jax.block_until_ready(params)
    final, texts = evaluate(step)
    curve.append(final)
    baselines = learning_curve.constant_baselines(
        os.path.join(args.data, "train"), held_targets, args.seed
    )
    model_f1 = learning_curve.rms_f1_per_chart(texts, held_targets, False)
    name, best = max(baselines.items(), key=lambda kv: kv[1]["rms_f1_no_title"])
    const_f1 = learning_curve.rms_f1_per_chart([best["prediction"]] * n_held, held_targets, False)
    boot = learning_curve.paired_bootstrap(model_f1, const_f1, args.seed)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "predictions.jsonl"), "w", encoding="utf-8") as f:
        for i, p, tgt in zip(held_ids, texts, held_targets):
            f.write(json.dumps({"id": i, "prediction": p, "target": tgt}) + "\n")
    timed = max(step - 1, 1)
    result = {
        "benchmark": "gpu/pix2struct_learning",
        "final": final,
        "reads_values": {
            "rms_f1_no_title": float(model_f1.mean()),
            "best_constant": name,
            "best_constant_rms_f1_no_title": float(const_f1.mean()),
            "margin": boot["mean"],
            "margin_ci95": boot["ci95"],
            "beats_constant": boot["ci95"][0] > 0,
        },
        "beats_constant_baselines": all(final["rms_f1"] > b["rms_f1"] for b in baselines.values()),
        "constant_baselines": baselines,
        "curve": curve,
        "train_loss": losses,
        "steps": step,
        "examples_per_s": timed * args.batch / max(train_s, 1e-9),
        "wall_s": {
            "load_s": load_s,
            "compile_s": compile_s,
            "train_s": train_s,
            "total_s": time.time() - t_start,
        },
        "data": {
            "train_charts": len(train_ids),
            "heldout_charts": n_held,
            "image_shape": list(train_images.shape[1:]),
            "vocab_size": vocab.vocab_size,
            "target_chars_max": max(len(x) for x in train_targets + held_targets),
        },
        "config": vars(args),
        "device": str(jax.devices()[0]),
        "jax": jax.__version__,
        "load_avg_start": load_start,
        "load_avg_end": list(os.getloadavg()),
    }
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result))
    return result


def main(argv=None) -> int:
    sys.path.insert(0, ROOT)  # chartjax and tools from this checkout (no install there)
    ensure_editdistance()
    run(parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
