"""Benchmark one model's training step, greedy decoding and patch extraction (JSON on stdout).

    python -m chartjax.tools.bench.step --model pix2struct --hidden 256 --layers 4 --heads 4 --mlp 1024 \
        --vocab 1024 --patches 512 --targets 64 --batch 8 [--compare-hf]

Synthetic inputs only. This process imports neither TensorFlow nor gin, so it runs on machines
without them (DESIGN.md §7); patch extraction (TF ops) is timed in a child process and reported
as unavailable where TensorFlow is missing. `--compare-hf` runs HF transformers (PyTorch) on the
same shapes in this process and prints the ratios chartjax / HF.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["pix2struct", "t5"], default="pix2struct")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4, help="encoder and decoder layers each")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--mlp", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--patches", type=int, default=512, help="encoder length (patches/tokens)")
    p.add_argument("--targets", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--dtype", default="bfloat16", help="chartjax activation dtype")
    p.add_argument("--steps", type=int, default=5, help="timed training steps")
    p.add_argument("--decode-tokens", type=int, default=32)
    p.add_argument("--decode-reps", type=int, default=3)
    p.add_argument("--patch-images", type=int, default=50)
    p.add_argument("--patch-max", type=int, default=2048)
    p.add_argument("--compare-hf", action="store_true")
    p.add_argument("--skip-patches", action="store_true")
    p.add_argument(
        "--malloc",
        choices=["keep", "default"],
        default="keep",
        help="keep: chartjax.host_memory.keep_freed_memory() in this process and the patch "
        "worker, so HF and chartjax both run with it; default: glibc's own thresholds",
    )
    p.add_argument("--patch-worker", help=argparse.SUPPRESS)  # internal: .npz of the charts
    return p.parse_args(argv)


# ----------------------------------------------------------------------------------- inputs


def _config(a):
    from chartjax.models.model_configs import Pix2StructConfig, T5Config

    kw = dict(
        vocab_size=a.vocab,
        emb_dim=a.hidden,
        num_heads=a.heads,
        head_dim=a.hidden // a.heads,
        mlp_dim=a.mlp,
        num_encoder_layers=a.layers,
        num_decoder_layers=a.layers,
        dtype=a.dtype,
    )
    return Pix2StructConfig(**kw) if a.model == "pix2struct" else T5Config(**kw)


def _batch(a, cfg):
    rng = np.random.default_rng(0)
    tgt = rng.integers(2, a.vocab, (a.batch, a.targets)).astype(np.int32)
    dec_in = np.concatenate([np.zeros((a.batch, 1), np.int32), tgt[:, :-1]], 1)
    if a.model == "pix2struct":
        enc = rng.normal(size=(a.batch, a.patches, 2 + cfg.patch_dim)).astype(np.float32)
        side = int(np.ceil(np.sqrt(a.patches)))
        idx = np.arange(a.patches)
        enc[:, :, 0], enc[:, :, 1] = 1 + idx // side, 1 + idx % side
    else:
        enc = rng.integers(2, a.vocab, (a.batch, a.patches)).astype(np.int32)
    return {
        "encoder_input_tokens": enc,
        "decoder_input_tokens": dec_in,
        "decoder_target_tokens": tgt,
    }


# Timed chart images, by the suffix of their result keys: the 800x600, which grows to
# 2048 patches, and a 1600x1200 one, which shrinks and so takes the antialiased resize.
PATCH_IMAGES = {"": 100, "_1600x1200": 200}
PATCH_WARMUP = 5  # both sides: the first calls after start-up run up to 2x slower (allocator)


def _chart_image(dpi: int = 100) -> np.ndarray:
    """An 8x6 inch RGB bar chart (matplotlib Agg): 800x600 pixels at 100 dpi."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 6), dpi=dpi)
    ax.bar(["2019", "2020", "2021", "2022", "2023"], [12.5, 17.0, 9.8, 21.3, 15.1])
    ax.set_title("Revenue by year (billion USD)")
    fig.canvas.draw()
    img = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return img


def _timed(fn, reps: int, warmup: int = 1) -> float:
    """Seconds per call after `warmup` untimed calls (compile excluded)."""
    for _ in range(warmup):
        fn()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps


# ----------------------------------------------------------------------------------- chartjax


def bench_chartjax(a, cfg, batch) -> dict:
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from chartjax.models import decoding, flops, losses, pix2struct, t5

    model = (pix2struct if a.model == "pix2struct" else t5).build(cfg, 0)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    tx = optax.adafactor(1e-3)
    opt_state = tx.init(params)
    jbatch = jax.tree.map(jnp.asarray, batch)

    @jax.jit
    def step(params, opt_state, rest, b):
        def loss_fn(p):
            return losses.seq2seq_loss(nnx.merge(graphdef, p, rest), b, deterministic=False)[0]

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    state = {"p": params, "o": opt_state}

    def train_once():
        state["p"], state["o"], loss = step(state["p"], state["o"], rest, jbatch)
        loss.block_until_ready()

    t0 = time.perf_counter()
    train_once()
    compile_s = time.perf_counter() - t0
    train_s = _timed(train_once, a.steps)

    enc_batch = {"encoder_input_tokens": jbatch["encoder_input_tokens"]}

    def decode_once():
        toks, _ = decoding.greedy_decode(
            model, enc_batch, max_decode_len=a.decode_tokens, eos_id=-1
        )  # never stops early: fixed work
        toks.block_until_ready()

    decode_s = _timed(decode_once, a.decode_reps)
    fl = flops.train_flops_per_example(cfg, a.patches, a.targets)["total"]
    eps = a.batch / train_s
    dev = jax.devices()[0]
    tflops, mfu = flops.mfu(eps, fl, 1, dev.device_kind)
    return {
        "train_examples_per_s": eps,
        "train_step_s": train_s,
        "train_compile_s": compile_s,
        "decode_examples_per_s": a.batch / decode_s,
        "train_flops_per_example": fl,
        "tflops_per_s_per_device": tflops,
        "mfu": mfu,
        "device": dev.device_kind,
        "platform": dev.platform,
    }


def bench_patches(a, imgs: dict[str, np.ndarray]) -> dict:
    """Patch extraction in a child process (TF stays out of this process)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "charts.npz")
        np.savez(path, **{f"img{k}": v for k, v in imgs.items()})
        cmd = [
            sys.executable,
            "-m",
            "chartjax.tools.bench.step",
            "--patch-worker",
            path,
            "--patch-images",
            str(a.patch_images),
            "--patch-max",
            str(a.patch_max),
            "--malloc",
            a.malloc,
        ]
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        return {"unavailable": (res.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def _patch_worker(a) -> None:
    import tensorflow as tf

    from chartjax.data import patches

    fn = tf.function(
        lambda x: patches.preprocess_image(x, a.patch_max),
        input_signature=[tf.TensorSpec([None, None, 3], tf.uint8)],
    )
    out = {}
    with np.load(a.patch_worker) as imgs:
        for key in PATCH_IMAGES:
            img = imgs[f"img{key}"]
            # np.asarray shares the result's buffer; .numpy() would add a copy TF need not make.
            s = _timed(lambda img=img: np.asarray(fn(img)), a.patch_images, PATCH_WARMUP)
            out[f"patch_images_per_s{key}"] = 1.0 / s
    print(json.dumps(out))


# ----------------------------------------------------------------------------------- HF


def bench_hf(a, batch, imgs: dict[str, np.ndarray]) -> dict:
    import torch
    import transformers
    from transformers.optimization import Adafactor

    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count() or 1)
    h, d_kv = a.hidden, a.hidden // a.heads
    if a.model == "pix2struct":
        cfg = transformers.Pix2StructConfig(
            text_config=dict(
                vocab_size=a.vocab,
                hidden_size=h,
                d_kv=d_kv,
                d_ff=a.mlp,
                num_layers=a.layers,
                num_heads=a.heads,
                dropout_rate=0.0,
            ),
            vision_config=dict(
                hidden_size=h,
                patch_embed_hidden_size=768,
                d_ff=a.mlp,
                d_kv=d_kv,
                num_hidden_layers=a.layers,
                num_attention_heads=a.heads,
                dropout_rate=0.0,
            ),
        )
        model = transformers.Pix2StructForConditionalGeneration(cfg)
        enc = torch.tensor(batch["encoder_input_tokens"])
        inputs = {"flattened_patches": enc, "attention_mask": enc[..., 0] > 0}
    else:
        cfg = transformers.T5Config(
            vocab_size=a.vocab,
            d_model=h,
            d_kv=d_kv,
            d_ff=a.mlp,
            num_layers=a.layers,
            num_heads=a.heads,
            dropout_rate=0.0,
            feed_forward_proj="gated-gelu",
            decoder_start_token_id=0,
        )
        model = transformers.T5ForConditionalGeneration(cfg)
        ids = torch.tensor(batch["encoder_input_tokens"], dtype=torch.long)
        inputs = {"input_ids": ids, "attention_mask": ids > 0}
    labels = torch.tensor(batch["decoder_target_tokens"], dtype=torch.long)
    opt = Adafactor(model.parameters(), lr=1e-3, scale_parameter=False, relative_step=False)
    model.train()

    def train_once():
        loss = model(**inputs, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()

    train_s = _timed(train_once, a.steps)
    model.eval()

    def decode_once():
        with torch.no_grad():
            model.generate(
                **inputs,
                max_new_tokens=a.decode_tokens,
                min_new_tokens=a.decode_tokens,
                do_sample=False,
                num_beams=1,
            )

    decode_s = _timed(decode_once, a.decode_reps)
    out = {
        "train_examples_per_s": a.batch / train_s,
        "train_step_s": train_s,
        "decode_examples_per_s": a.batch / decode_s,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    if not a.skip_patches:
        from transformers.models.pix2struct.image_processing_pil_pix2struct import (
            Pix2StructImageProcessorPil,
        )

        proc = Pix2StructImageProcessorPil()
        for key, img in imgs.items():
            s = _timed(
                lambda img=img: proc(images=img, max_patches=a.patch_max, return_tensors="np"),
                a.patch_images,
                PATCH_WARMUP,
            )
            out[f"patch_images_per_s{key}"] = 1.0 / s
    return out


def main(argv=None) -> None:
    a = _args(argv)
    if a.malloc == "keep":
        from chartjax import host_memory

        host_memory.keep_freed_memory()
    if a.patch_worker:
        _patch_worker(a)
        return
    cfg = _config(a)
    batch = _batch(a, cfg)
    imgs = {key: _chart_image(dpi) for key, dpi in PATCH_IMAGES.items()}
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    result = {
        "args": vars(a),
        "host": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_before": load,
        },
    }
    result["chartjax"] = bench_chartjax(a, cfg, batch)
    if not a.skip_patches:
        result["chartjax"].update(bench_patches(a, imgs))
    if a.compare_hf:
        result["hf"] = bench_hf(a, batch, imgs)
        ratios = {}
        keys = ["train_examples_per_s", "decode_examples_per_s"]
        for k in keys + [f"patch_images_per_s{key}" for key in PATCH_IMAGES]:
            ours, theirs = result["chartjax"].get(k), result["hf"].get(k)
            if ours and theirs:
                ratios[k] = ours / theirs
        result["ratios_chartjax_over_hf"] = ratios
    result["host"]["loadavg_after"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    if "tensorflow" in sys.modules or "gin" in sys.modules:
        raise RuntimeError("bench_step must not import tensorflow or gin")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
