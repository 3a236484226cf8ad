"""Greedy decoding, beam search and patch extraction of one model, beside HF (JSON on stdout).

    python -m chartjax.tools.bench.step --model pix2struct --hidden 256 --layers 4 --heads 4 --mlp 1024 \
        --vocab 1024 --patches 512 --targets 64 --batch 8 [--compare-hf]

The training step is not timed here: it is the product's, timed by its own loop
(`python -m chartjax.tools.bench.runner step`, train_metrics.jsonl's `step_s`; XLA's memory and
FLOPs from `chartjax-train --compile_only`). Synthetic inputs only. This process imports neither
TensorFlow nor gin, so it runs on machines without them (docs/design.md §7); patch extraction
(NumPy, chartjax/data/patches.py) is timed in a child process (its own allocator setting) and
reported as unavailable if that child fails. `--compare-hf` builds HF transformers (PyTorch) on
the same shapes in this process and times each chartjax call and its HF counterpart side by side
(harness.interleaved: chartjax, HF, chartjax, HF, ...; the child process does the same for patch
extraction); `ratios_chartjax_over_hf` holds the median speed-up over the alternations, with its
min and max. Rates are examples (images) per second from the mean call time. `--only-patches`
times patch extraction alone (seconds; no model is built), `--resize-threads N` sets the
threads of chartjax's resize there (default: every usable core, chartjax/data/resize.py). Both
libraries run in this one process, so they share the allocator setting (`--malloc`) and every
core (XLA's CPU client and `torch.set_num_threads(os.cpu_count())`).

`--model paligemma` (PaliGemma 1: a Gemma decoder, one key/value head, over a SigLIP as wide
and deep; `--image-size`, `--patch`, `--prefix` text tokens, `--targets` suffix tokens) times
models/paligemma/decoding.generate against HF's `generate` (its KV cache), prompts of image
tokens + `<bos>` + prefix, and with `--hf-train-steps N` HF's train step (forward with the suffix
as labels, backward, clipping, AdamW: step_hf.paligemma_train_fn; median of N after 3 warm-ups)
for the product's own step on the same shapes, the runner's `paligemma_step` (train_metrics.jsonl's
step_s). Measured (issue 42 item 7; 2-core AMD EPYC, shared, load average 10-12.7; jax 0.10.2,
torch 2.13.0, transformers 5.25.0; fp32, 22.3M parameters, batch 8, 256 image tokens, prefix 32,
suffix / output 16), two rounds of one runner run then one step.py run:
    python -m chartjax.tools.bench.runner paligemma_step --rerun
    python -m chartjax.tools.bench.step --model paligemma --hidden 384 --layers 4 --heads 6 \
        --mlp 1536 --vocab 16384 --dtype float32 --prefix 32 --targets 16 --decode-tokens 16 \
        --beams 0 --compare-hf --hf-train-steps 5
train step chartjax 16.4 / 15.3 s (median of the logged rows) against HF 40.6 / 20.3 s: 2.47x /
1.32x (not interleaved: the processes one after the other); greedy decoding 5.2x / 4.2x HF
(interleaved, min 3.2x / 2.3x). docs/benchmarks.md has the table.

The notes below are of the former version, which also timed a training step of its own beside
HF's (train ratios, GEMM ceiling); its decode, beam and patch figures are this file's.

Measured (issue 29 item 6; 2-core AMD EPYC with avx512_bf16, shared, load average 3.4 -> 1.8
during the run, default shapes, jax 0.10.2 / torch 2.13 / transformers 5.24): chartjax over HF
train bf16 1.17x (0.98-1.33), fp32 1.04x (1.00-1.24); chartjax fp32 84 GFLOP/s, 83% of the
run's f32 GEMM rate (~100 GFLOP/s); decode 5.0x, beam 10.1x; patches 3.8x at 800x600, 2.5x at
1600x1200. Compare only ratios of one run: under load HF's two torch threads degrade far more
than XLA's (an earlier run at load 5-7 gave HF 19.8 s/step, this one 2.1 s; a second run at
load 4.5-5.4 gave train 2.03x / 1.83x, patches 1.62x / 1.08x: torch's two-thread resize got
both cores there while NumPy uses one). What changed,
from XLA:CPU traces (jax.profiler + the optimized HLO, thunk time by op): the fp32 step spent
25% in transposes, mostly the MLP's output gradient transposed (fused with the GELU backward,
element by element) ahead of each weight-gradient GEMM and the `[B, H, Q, K]` probabilities
transposed around JAX's vmapped attention composite; `layers._dot_2d` (2-D GEMMs) and
`layers.xla_attention_4d` (the composite un-vmapped, CPU only) removed them: fp32 step 1.30x
faster (interleaved A/B), transposes 25% -> 4%, GEMMs 58% -> 75% of thunk time. bf16 gains
nothing from them, and cannot beat fp32 on XLA:CPU: every bf16 dot is compiled as
convert-to-f32 + an f32 GEMM (the HLO of `jnp.matmul` on bf16 operands shows it; this CPU's
avx512_bf16 is not used), so bf16 costs fp32's GEMMs plus conversion passes (15% of thunk
time). Patches: in-place standardization and a 4-byte-item column gather, bit-identical output,
1600x1200 1.8x faster; HF's resize is torch's multithreaded kernel, so on many cores its side
gained and ours (NumPy, one thread) did not (threads since, outside loader workers: below).

Rerun on idle cores after these changes (load 0.2 -> 1.9, the same session, ceiling 165 GFLOP/s):
train bf16 0.99x HF (0.92-1.05), fp32 0.94x (0.84-1.06): chartjax 1.84 s (bf16) / 1.94 s
(fp32) per step, HF 1.80 s, both at 52-55% of the ceiling; decode 4.1x, beam 6.8x; patches 1.55x
at 800x600, 1.18x at 1600x1200 (HF's resize had both idle cores). So at rest the step ties HF in
bf16 and trails it by 6% in fp32, where the issue's machine had 0.88x / 0.66x. What is left is
the attention: HF runs torch's fused CPU flash-attention kernel (about 0.65 s of its step),
XLA:CPU has no fused attention and materializes the `[8, 4, 512, 512]` logits and their
float32 softmax in both passes.

Patches on threads (issue 29 item 6; `--only-patches --compare-hf --patch-images 30`, one run
before and one after, twice, on the 2 idle cores: load 0.6-1.1 with the benchmark itself): the
antialiased resize computes its output in row blocks, each block's rows pass and then its
columns pass while in cache, on every usable core for large images (loader workers keep one
thread), and the patch layout is copied once instead of twice; the output is bit-identical.
chartjax over HF, before -> after: 800x600 1.67-2.12x -> 2.83-2.86x, 1600x1200 1.24-1.26x ->
2.03-2.04x (chartjax 13.7-16.5 ms, HF 28-36 ms per 1600x1200 chart); on one thread
(`--resize-threads 1`) 1600x1200 gives 1.42-1.70x. The patch child now runs with
OMP_WAIT_POLICY=PASSIVE: torch's OpenMP threads otherwise spin for ~10 ms of CPU after each HF
call (measured), on the core that the next chartjax call's second thread needs, and the
interleaved timing charged HF's spin to chartjax (then 1600x1200 before 1.09-1.18x, after
1.57-1.89x); HF's own times did not change. With the other core busy (a training run beside,
load 2.6-3.0) a second thread gains nothing and costs 3-10% a resize, and the ratios are
larger anyway (1600x1200 3.05x before these changes): HF's two torch threads degrade more.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np

from chartjax.tools.bench import harness, step_hf


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["pix2struct", "t5", "paligemma"], default="pix2struct")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4, help="encoder and decoder layers each")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--mlp", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--patches", type=int, default=512, help="encoder length (patches/tokens)")
    p.add_argument("--targets", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--image-size", type=int, default=224, help="paligemma: image side")
    p.add_argument("--patch", type=int, default=14, help="paligemma: SigLIP patch side")
    p.add_argument("--prefix", type=int, default=32, help="paligemma: prompt text tokens")
    p.add_argument(
        "--hf-train-steps",
        type=int,
        default=0,
        help="paligemma: also time this many HF train steps (AdamW; `--targets` suffix tokens)",
    )
    p.add_argument("--dtype", default="bfloat16", help="chartjax activation dtype")
    p.add_argument("--decode-tokens", type=int, default=32)
    p.add_argument("--decode-reps", type=int, default=3)
    p.add_argument("--beams", type=int, default=4, help="beam search width timed (0: none)")
    p.add_argument("--patch-images", type=int, default=50)
    p.add_argument("--patch-max", type=int, default=2048)
    p.add_argument("--compare-hf", action="store_true")
    p.add_argument("--skip-patches", action="store_true")
    p.add_argument(
        "--only-patches",
        action="store_true",
        help="time patch extraction alone (HF beside it with --compare-hf): no model is built",
    )
    p.add_argument(
        "--resize-threads",
        type=int,
        help="threads of chartjax's resize in the patch worker (default: every usable core)",
    )
    p.add_argument(
        "--malloc",
        choices=["keep", "default"],
        default="keep",
        help="keep: chartjax.host_memory.keep_freed_memory() in this process and the patch "
        "worker, so HF and chartjax both run with it; default: glibc's own thresholds",
    )
    p.add_argument("--patch-worker", help=argparse.SUPPRESS)  # internal: .npz of the charts
    harness.add_out_flag(p)
    a = p.parse_args(argv)
    if a.model == "paligemma":
        a.skip_patches = True  # patch extraction is Pix2Struct's
    return a


# ----------------------------------------------------------------------------------- inputs


def _config(a):
    from chartjax.models.model_configs import Pix2StructConfig, T5Config

    if a.model == "paligemma":  # step_hf.paligemma_model's: SigLIP as wide and deep as Gemma
        from chartjax.models.paligemma import PaliGemmaConfig

        return PaliGemmaConfig(
            vocab_size=a.vocab,
            emb_dim=a.hidden,
            num_heads=a.heads,
            num_kv_heads=1,
            head_dim=a.hidden // a.heads,
            mlp_dim=a.mlp,
            num_layers=a.layers,
            vision_emb_dim=a.hidden,
            vision_num_heads=a.heads,
            vision_mlp_dim=a.mlp,
            vision_num_layers=a.layers,
            image_size=a.image_size,
            patch_size=a.patch,
            image_token_id=a.vocab - 1,
            dtype=a.dtype,
        )

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


def _paligemma_batch(a, cfg, rng) -> dict:
    """The processor's layout: `pixel_values` NCHW in [-1, 1]; the prompt `input_ids` (image
    tokens, `<bos>`, prefix ids, newline); `train_ids` / `train_types`: it with the suffix."""
    n, b = cfg.num_image_tokens, a.batch
    text = rng.integers(3, a.vocab - 1, (b, a.prefix + a.targets)).astype(np.int32)
    text[:, 0], text[:, a.prefix - 1] = cfg.bos_id, 108  # <bos> ... "\n"
    ids = np.concatenate([np.full((b, n), cfg.image_token_id, np.int32), text], 1)
    types = (np.arange(ids.shape[1]) >= n + a.prefix).astype(np.int32)
    pixels = rng.uniform(-1, 1, (b, 3, a.image_size, a.image_size)).astype(np.float32)
    return {
        "pixel_values": pixels,
        "input_ids": ids[:, : n + a.prefix],
        "train_ids": ids,
        "train_types": np.broadcast_to(types, ids.shape).copy(),
    }


def _batch(a, cfg):
    rng = np.random.default_rng(0)
    if a.model == "paligemma":
        return _paligemma_batch(a, cfg, rng)
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


# Timed chart images, by the suffix of their result keys: the issue's 800x600, which grows to
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


# ----------------------------------------------------------------------------------- chartjax


def _alternations(reps: int) -> int:
    return max(reps, harness.MIN_ALTERNATIONS)


# ----------------------------------------------------------------------------------- chartjax


def chartjax_fns(a, cfg, batch):
    """(decode_once, info): one greedy decode, blocking until done. `info["beam_once"]` is one
    beam search of `a.beams` beams (None when `a.beams` is 0). The train step is the product's,
    timed by the runner (`python -m chartjax.tools.bench.runner step`: train_metrics.jsonl's
    step_s), not here."""
    import jax
    import jax.numpy as jnp

    from chartjax.models import decoding, t5
    from chartjax.models.t5 import pix2struct

    dev = jax.devices()[0]
    info = {"device": dev.device_kind, "platform": dev.platform}
    if a.model == "paligemma":
        return _paligemma_fns(a, cfg, batch, info)
    model = (pix2struct if a.model == "pix2struct" else t5).build(cfg, 0)
    enc_batch = {"encoder_input_tokens": jnp.asarray(batch["encoder_input_tokens"])}

    def decode_once():
        toks, _ = decoding.greedy_decode(
            model, enc_batch, max_decode_len=a.decode_tokens, eos_id=-1
        )  # never stops early: fixed work
        toks.block_until_ready()

    def beam_once():
        toks, _ = decoding.beam_search(
            model, enc_batch, max_decode_len=a.decode_tokens, num_beams=a.beams, eos_id=-1
        )  # no beam ever finishes: fixed work, as HF's min_new_tokens
        toks.block_until_ready()

    return decode_once, {**info, "beam_once": beam_once if a.beams else None}


def _paligemma_fns(a, cfg, batch, info):
    """chartjax_fns of `--model paligemma`: models/paligemma/decoding.generate (its KV cache),
    no early stop (eos_id -1: fixed work, as HF's min_new_tokens)."""
    from chartjax.models import paligemma
    from chartjax.models.paligemma import decoding

    model = paligemma.build(cfg, 0)
    args = (batch["pixel_values"], batch["input_ids"], np.ones_like(batch["input_ids"]))

    def run(method: str, beams: int = 1):
        return lambda: decoding.generate(
            model, *args, max_new_tokens=a.decode_tokens, method=method, num_beams=beams, eos_id=-1
        )  # numpy out: blocks until done

    return run("greedy"), {**info, "beam_once": run("beam", a.beams) if a.beams else None}


# ----------------------------------------------------------------------------------- patches


def _run_patch_worker(a, imgs: dict[str, np.ndarray], compare: bool) -> dict:
    """Patch extraction in a child process (its allocator apart from the step's)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "charts.npz")
        np.savez(path, **{f"img{k}": v for k, v in imgs.items()})
        argv = ["--patch-worker", path, "--patch-images", str(a.patch_images)]
        argv += ["--patch-max", str(a.patch_max), "--malloc", a.malloc]
        argv += ["--compare-hf"] if compare else []
        argv += ["--resize-threads", str(a.resize_threads)] if a.resize_threads else []
        # Passive OpenMP waits: torch's threads otherwise spin after each HF call (~10 ms of
        # CPU, measured), on the core the next (chartjax) call's second thread needs; HF's own
        # times do not change with it.
        env = {"TF_CPP_MIN_LOG_LEVEL": "3"}
        env["OMP_WAIT_POLICY"] = os.environ.get("OMP_WAIT_POLICY", "PASSIVE")
        try:
            return harness.child_json("chartjax.tools.bench.step", argv, env=env)
        except harness.ChildError as e:
            return {"unavailable": str(e)}


def bench_patches(a, imgs: dict[str, np.ndarray]) -> dict:
    """chartjax's patch images per second, by image key (or why they are unavailable)."""
    out = _run_patch_worker(a, imgs, compare=False)
    return out.get("chartjax", out)


def _hf_patches(a, imgs: dict[str, np.ndarray]) -> dict:
    """HF's patch images per second in this process (when the patch child cannot run)."""
    fn = step_hf.patch_fn(a.patch_max)
    out = {}
    for key, img in imgs.items():
        t = harness.timeit(lambda img=img: fn(img), a.patch_images, PATCH_WARMUP)
        out[f"patch_images_per_s{key}"] = 1.0 / t["mean_s"]
    return out


def _patch_worker(a) -> None:
    from chartjax.data import patches, resize

    def fn(x):
        return patches.preprocess_image(x, a.patch_max)

    if a.resize_threads:
        resize.set_threads(a.resize_threads)
    hf = step_hf.patch_fn(a.patch_max) if a.compare_hf else None
    out = {"chartjax": {}, "hf": {}, "ratios": {}, "resize_threads": resize.get_threads()}
    with np.load(a.patch_worker) as imgs:
        for key in PATCH_IMAGES:
            img = imgs[f"img{key}"]
            ours = lambda img=img: fn(img)  # noqa: E731
            k = f"patch_images_per_s{key}"
            if hf is None:
                t = harness.timeit(ours, a.patch_images, PATCH_WARMUP)
                out["chartjax"][k] = 1.0 / t["mean_s"]
                continue
            r = harness.interleaved(
                ours, lambda img=img: hf(img), _alternations(a.patch_images), PATCH_WARMUP
            )
            out["chartjax"][k] = 1.0 / r["a"]["mean_s"]
            out["hf"][k] = 1.0 / r["b"]["mean_s"]
            out["ratios"][k] = r["speedup_a_over_b"]
    print(json.dumps(out))


def _run_config(a) -> dict:
    """The flags a report records (the internal --patch_worker is how a run starts, not what)."""
    return {k: v for k, v in vars(a).items() if k != "patch_worker"}


def _only_patches(a) -> dict:
    """`--only-patches`: the patch worker's results alone (seconds; the step takes minutes)."""
    libs = ("numpy",) + (("torch", "transformers") if a.compare_hf else ())
    run = harness.Run("step_patches", _run_config(a), libs)
    imgs = {key: _chart_image(dpi) for key, dpi in PATCH_IMAGES.items()}
    worker = _run_patch_worker(a, imgs, compare=a.compare_hf)
    ratios = worker.pop("ratios", None)
    if ratios:
        worker["ratios_chartjax_over_hf"] = ratios
    return harness.emit(run.report(worker), a.out)


def main(argv=None) -> dict | None:
    a = _args(argv)
    if a.malloc == "keep":
        from chartjax import host_memory

        host_memory.keep_freed_memory()
    if a.patch_worker:
        _patch_worker(a)
        return None
    if a.only_patches:
        return _only_patches(a)
    libs = ("jax", "jaxlib", "flax") + (("torch", "transformers") if a.compare_hf else ())
    run = harness.Run("step", _run_config(a), libs)
    cfg = _config(a)
    batch = _batch(a, cfg)
    imgs = {key: _chart_image(dpi) for key, dpi in PATCH_IMAGES.items()}
    cj_decode, info = chartjax_fns(a, cfg, batch)
    cj_beam = info.pop("beam_once")
    results = {}
    if not a.compare_hf:
        decode = harness.timeit(cj_decode, a.decode_reps)
        results["chartjax"] = {**info, "decode_examples_per_s": a.batch / decode["mean_s"]}
        results["chartjax"]["decode"] = decode
        if cj_beam is not None:
            beam = harness.timeit(cj_beam, a.decode_reps)
            results["chartjax"]["beam_examples_per_s"] = a.batch / beam["mean_s"]
            results["chartjax"]["beam"] = beam
        if not a.skip_patches:
            results["chartjax"].update(bench_patches(a, imgs))
    else:
        hf_decode, hf_info = step_hf.decode_fns(a, batch)
        hf_beam = hf_info.pop("beam_once")  # timed where chartjax's is (a.beams > 0)
        decode = harness.interleaved(cj_decode, hf_decode, _alternations(a.decode_reps))
        results["chartjax"] = {**info, "decode_examples_per_s": a.batch / decode["a"]["mean_s"]}
        results["hf"] = {**hf_info, "decode_examples_per_s": a.batch / decode["b"]["mean_s"]}
        results["chartjax"]["decode"], results["hf"]["decode"] = decode["a"], decode["b"]
        ratios = {"decode_examples_per_s": decode["speedup_a_over_b"]}
        if cj_beam is not None:
            beam = harness.interleaved(cj_beam, hf_beam, _alternations(a.decode_reps))
            results["chartjax"]["beam_examples_per_s"] = a.batch / beam["a"]["mean_s"]
            results["hf"]["beam_examples_per_s"] = a.batch / beam["b"]["mean_s"]
            results["chartjax"]["beam"], results["hf"]["beam"] = beam["a"], beam["b"]
            ratios["beam_examples_per_s"] = beam["speedup_a_over_b"]
        if not a.skip_patches:
            worker = _run_patch_worker(a, imgs, compare=True)
            if "unavailable" in worker:  # the child failed: HF's side alone, as it can run
                results["chartjax"]["unavailable"] = worker["unavailable"]
                results["hf"].update(_hf_patches(a, imgs))
            else:
                results["chartjax"].update(worker["chartjax"])
                results["chartjax"]["patch_resize_threads"] = worker["resize_threads"]
                results["hf"].update(worker["hf"])
                ratios.update(worker["ratios"])
        results["ratios_chartjax_over_hf"] = ratios
    if a.hf_train_steps and a.model == "paligemma":  # median over the steps after 3 warm-ups
        fn = step_hf.paligemma_train_fn(a, batch)
        results.setdefault("hf", {})["train"] = harness.timeit(fn, a.hf_train_steps, warmup=3)
    if "tensorflow" in sys.modules or "gin" in sys.modules:
        raise RuntimeError("bench/step.py must not import tensorflow or gin")
    return harness.emit(run.report(results), a.out)


if __name__ == "__main__":
    main()
