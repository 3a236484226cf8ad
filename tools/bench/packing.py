"""Sequence packing (chartjax/data/packing.py): padding fraction and real tokens per second of a
training step with and without packing (issue 29, item 3).

    python -m chartjax.tools.bench.packing --out bench_packing.json

Corpora (generated, no download):
- chart_to_text: chartjax.synth.table_summaries tables of 3-10 rows through the chart_to_text
  task's own `tab_t5` records ("translate Chart to Text: <title> <s> <records>" -> summary);
- chartcheck: ChartCheck-shaped Flan-T5 records: the task's FLAN_MULTI prompt (claim, caption,
  linearized table of a generated chart of 3-10 rows) -> "true. <explanation>" or "false. ...";
- pix2struct: noise charts of mixed aspect ratios (1:8 to 8:1, 200-1200 px) through the real
  patchifier (chartjax/data/patches.py), with the chart_to_text summaries as targets.
Text is tokenized with a 1,000-piece BPE SentencePiece vocabulary trained on the corpus
(tools/train_vocab.py), at the task's lengths (`Features.max_input_len` / `max_target_len`).

Step: a jitted train step of a small model on this CPU (`--emb_dim`, 2+2 layers, float32):
the seq2seq loss (chartjax.models.losses), its gradients and an SGD update. Unpacked batches
are `--batch` examples, packed batches `--batch` rows of the same lengths (Pix2Struct: rows of
`--pack_factor` x max_patches patches, `--batch / pack_factor` rows, the same patch capacity
per step). "real tokens" counts encoder tokens (patches) and target tokens that are not padding.
The rows hold whole examples, so packed and unpacked train on the same per-token loss.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

import numpy as np

from chartjax.tools.bench import harness

LIBS = ("jax", "flax", "sentencepiece")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--examples", type=int, default=384, help="text examples per corpus")
    p.add_argument("--charts", type=int, default=96)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=6, help="timed steps per variant")
    p.add_argument("--emb_dim", type=int, default=128)
    p.add_argument("--max_input_len", type=int, default=512)
    p.add_argument("--max_target_len", type=int, default=128)
    p.add_argument("--max_patches", type=int, default=256)
    p.add_argument("--pix_target_len", type=int, default=64)
    p.add_argument("--pack_factor", type=int, default=4)
    p.add_argument("--open_rows", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    harness.add_out_flag(p)
    return p.parse_args(argv)


# ------------------------------------------------------------------ corpora ---------------


def chart_to_text_records(n: int, seed: int) -> list[dict]:
    from chartjax.synth import table_summaries as ts
    from chartjax.tasks import chart_to_text

    expand = chart_to_text.make_expand("tab_t5", "statista")
    rng = random.Random(seed)
    out = []
    for i in range(n):
        rows = rng.randint(3, 10)  # the generator has 10 countries
        ex = ts.generate_one(i, seed, min_rows=rows, max_rows=rows)
        out.extend(expand(ts.statista_example(ex)))
    return out


def chartcheck_records(n: int, seed: int) -> list[dict]:
    from chartjax.data import tables
    from chartjax.synth import table_summaries as ts
    from chartjax.tasks import chartcheck

    rng = random.Random(seed + 1)
    out = []
    for i in range(n):
        rows = rng.randint(3, 10)  # the generator has 10 countries
        ex = ts.generate_one(i, seed + 1, min_rows=rows, max_rows=rows)
        other = ts.generate_one(i + n, seed + 1)
        label = rng.choice(("true", "false"))
        claim = (ex if label == "true" else other)["summary"]
        prompt = chartcheck.FLAN_MULTI.format(
            claim=claim, caption=ex["title"], table=tables.linearize(ex["header"], ex["rows"])
        )
        explanation = ex["summary"] if rng.random() < 0.5 else other["summary"]
        out.append({"prompt": prompt, "target": f"{label}. {explanation}"})
    return out


def chart_images(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    ratios = [1 / 8, 1 / 4, 1 / 2, 3 / 4, 1.0, 4 / 3, 2.0, 4.0, 8.0]  # width / height
    out = []
    for _ in range(n):
        r = ratios[int(rng.integers(len(ratios)))]
        long = int(rng.integers(200, 1201))
        h, w = (long, max(int(long * r), 16)) if r < 1 else (max(int(long / r), 16), long)
        out.append(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    return out


# ------------------------------------------------------------------ features --------------


def text_features(vocab, records, enc_len: int, dec_len: int) -> list[dict]:
    """The seq2seq task's text features (chartjax/tasks/seq2seq.py), per record."""
    from chartjax.tasks import seq2seq

    out = []
    for rec in records:
        tgt, inp = seq2seq.target_arrays(vocab, rec["target"], dec_len)
        enc = vocab.encode_batch([rec["prompt"]], max_len=enc_len, add_eos=True)[0]
        out.append(
            {
                "encoder_input_tokens": np.asarray(enc, np.int32),
                "decoder_target_tokens": tgt,
                "decoder_input_tokens": inp,
            }
        )
    return out


def batches(examples: list[dict], size: int) -> list[dict]:
    return [
        {k: np.stack([e[k] for e in examples[i : i + size]]) for k in examples[0]}
        for i in range(0, len(examples) - size + 1, size)
    ]


def fill(batch: dict, image: bool, pad_id: int = 0) -> tuple[int, int, int, int]:
    """(real encoder tokens, encoder slots, real target tokens, target slots) of a batch."""
    enc = batch["encoder_input_tokens"]
    real_enc = (enc[..., 0] > 0) if image else (enc != pad_id)
    real_dec = batch["decoder_target_tokens"] != pad_id
    return int(real_enc.sum()), real_enc.size, int(real_dec.sum()), real_dec.size


# ------------------------------------------------------------------ step ------------------


def make_step(model):
    import jax
    from flax import nnx

    from chartjax.models import losses

    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    @jax.jit
    def step(params, batch):
        def loss_fn(p):
            return losses.seq2seq_loss(nnx.merge(graphdef, p, rest), batch, deterministic=True)[0]

        loss, grads = jax.value_and_grad(loss_fn)(params)
        return jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads), loss

    return step, params


def time_steps(models_batches: dict, steps: int) -> dict:
    """Compile each variant on its first batch, then time `steps` batches (cycled) of every
    variant in turn, step by step, so a change of the machine's load hits all of them."""
    import jax

    runs = {}
    for name, (model, bl) in models_batches.items():
        step, params = make_step(model)
        t = time.perf_counter()
        params, loss = step(params, bl[0])
        jax.block_until_ready(loss)
        runs[name] = {"step": step, "params": params, "compile_s": time.perf_counter() - t}
        runs[name]["batches"] = [bl[(i + 1) % len(bl)] for i in range(steps)]
        runs[name]["seconds"] = 0.0
    for i in range(steps):
        for r in runs.values():
            t = time.perf_counter()
            r["params"], loss = r["step"](r["params"], r["batches"][i])
            jax.block_until_ready(loss)
            r["seconds"] += time.perf_counter() - t
    return runs


def compare(name, model, plain: list[dict], packed: list[dict], steps: int, image: bool, pad_id):
    """Padding and real tokens per second of both variants."""
    from chartjax.data import packing

    variants = {"unpacked": plain, "packed": packed}
    timings = time_steps({k: (model, bl) for k, bl in variants.items()}, steps)
    out = {}
    for variant, bl in variants.items():
        timing = timings[variant]
        f = np.sum([fill(b, image, pad_id) for b in bl], axis=0)
        tf = np.sum([fill(b, image, pad_id) for b in timing["batches"]], axis=0)
        n_ex = sum(
            packing.num_examples(b)
            if "decoder_segment_ids" in b
            else len(b["decoder_target_tokens"])
            for b in timing["batches"]
        )
        rows, enc_len = bl[0]["encoder_input_tokens"].shape[:2]
        out[variant] = {
            "batch_rows": int(rows),
            "row_lengths": [int(enc_len), int(bl[0]["decoder_target_tokens"].shape[1])],
            "batches": len(bl),
            "encoder_padding": round(1 - f[0] / f[1], 4),
            "decoder_padding": round(1 - f[2] / f[3], 4),
            "examples_per_row": round(n_ex / (rows * steps), 3),
            "step_s": round(timing["seconds"] / steps, 4),
            "compile_s": round(timing["compile_s"], 2),
            "real_tokens_per_s": round((tf[0] + tf[2]) / timing["seconds"], 1),
            "examples_per_s": round(n_ex / timing["seconds"], 2),
        }
        harness.progress({"corpus": name, "variant": variant, **out[variant]})
    out["speedup_real_tokens_per_s"] = round(
        out["packed"]["real_tokens_per_s"] / out["unpacked"]["real_tokens_per_s"], 2
    )
    return out


def run(args) -> dict:
    from chartjax.data import packing, patches
    from chartjax.data.vocab import Vocabulary
    from chartjax.models import pix2struct, t5
    from chartjax.models.model_configs import Pix2StructConfig, T5Config
    from chartjax.tools import train_vocab

    bench = harness.Run("packing", vars(args), LIBS)
    ctt = chart_to_text_records(args.examples, args.seed)
    chk = chartcheck_records(args.examples, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        texts = [t for r in ctt + chk for t in (r["prompt"], r["target"])]
        vocab_file = train_vocab.train(
            texts,
            os.path.join(tmp, "spm"),
            vocab_size=1000,
            model_type="bpe",
            hard_vocab_limit=False,
        )
        vocab = Vocabulary(vocab_file)
    heads = max(args.emb_dim // 32, 1)
    size = dict(
        vocab_size=vocab.vocab_size, emb_dim=args.emb_dim, num_heads=heads,
        head_dim=args.emb_dim // heads, mlp_dim=2 * args.emb_dim, num_encoder_layers=2,
        num_decoder_layers=2, dtype="float32",
    )  # fmt: skip
    results = {"model": f"T5 v1.1 / Pix2Struct, emb {args.emb_dim}, 2+2 layers, fp32, CPU"}
    lengths = (args.max_input_len, args.max_target_len)
    for name, recs in (("chart_to_text", ctt), ("chartcheck", chk)):
        feats = text_features(vocab, recs, *lengths)
        spec = packing.PackSpec(*lengths, pad_id=vocab.pad_id, max_open_rows=args.open_rows)
        t = time.perf_counter()
        rows = list(packing.pack(feats, spec))
        pack_s = time.perf_counter() - t
        model = t5.build(T5Config(**size), args.seed)
        res = compare(
            name, model, batches(feats, args.batch), batches(rows, args.batch), args.steps,
            False, vocab.pad_id,
        )  # fmt: skip
        res["packer_examples_per_s"] = round(len(feats) / pack_s)
        results[name] = res

    images = chart_images(args.charts, args.seed)
    c2t = chart_to_text_records(args.charts, args.seed + 7)
    mp, k = args.max_patches, args.pack_factor
    targets = text_features(vocab, c2t, 8, args.pix_target_len)
    feats = [
        {**tg, "encoder_input_tokens": patches.preprocess_image(img, mp)}
        for img, tg in zip(images, targets)
    ]
    # Rows of k charts' patches; the decoder row is half of k targets' (targets are short).
    spec = packing.PackSpec(mp * k, args.pix_target_len * k // 2, image=True, max_open_rows=8)
    rows = list(packing.pack(feats, spec))
    model = pix2struct.build(Pix2StructConfig(**size, max_position_embeddings=512), args.seed)
    res = compare(
        "pix2struct", model, batches(feats, args.batch), batches(rows, max(args.batch // k, 1)),
        args.steps, True, 0,
    )  # fmt: skip
    grids = [int((f["encoder_input_tokens"][:, 0] > 0).sum()) for f in feats]
    res["real_patches_per_chart"] = {"min": min(grids), "mean": round(float(np.mean(grids)), 1)}
    results["pix2struct"] = res
    return harness.emit(bench.report(results), args.out)


def main(argv=None) -> int:
    run(parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
