"""T5 summary learning check on one GPU, without TensorFlow, gin or a chartjax install (issue 15,
item 7): trains T5 from scratch in bf16 on generated tables with templated summaries (the
corpus of tools/bench/t5_summary.py, TAB-T5 prompts) and prints held-out BLEU against the best
constant summary.

Generate the data HERE (a full chartjax environment; ~9 MiB for the defaults):

    .venv/bin/python tools/gpu/t5_learning.py generate --out runs/gpu_t5

and run it THERE (repository root; runs/ is git-ignored, so the run tool carries it with
carry=["runs/gpu_t5"]):

    PYTHONPATH=. python tools/gpu/t5_learning.py train --data runs/gpu_t5 --out $OUT/t5

`generate` writes `train.jsonl` / `heldout.jsonl` (id, target, and the SentencePiece ids with
EOS of prompt and target: the chart_to_text task's own "translate Chart to Text: <title> <s> <records>"
prompts of chartjax.synth.table_summaries tables, tokenized by a vocabulary trained on the
training texts), `pieces.json` (the vocabulary's pieces by id), `meta.json` (the constant
summary, chosen on training data by bench/t5_summary.py's rule) and `vendor/`: copies of the
installed pure-Python sacrebleu and the packages it imports (portalocker, colorama, tabulate),
because the device machine has neither sacrebleu nor sentencepiece.
`train` uses the package's TF- and gin-free code only: models/t5.py (T5 v1.1, `--size`, bf16
activations, fp32 parameters and loss), models/losses.py (cross-entropy + z-loss),
models/decoding.py (greedy), metrics/text.py (sacrebleu 13a corpus BLEU, Chart-to-Text's) and
tools/gpu/jit_step.py (chartjax.train's step). Adafactor with chartjax.optim's T5X settings,
linear warmup then constant. Held-out BLEU every `--eval_every` steps and at the end.
Prints one JSON object (also `<out>/result.json`, with the final `predictions.jsonl`).

Not yet run on a GPU: no device was lent when it was written (its 2-step CPU run is
tests/tools/test_gpu_scripts.py); the default size and steps are a guess at a few minutes on
an H200, not a measured setting.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
import types

import numpy as np

# The repository root, so that `tools.*` imports work however the script is started.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

PAD, EOS, START = 0, 1, 0  # T5 conventions (chartjax/data/vocab.py)
# T5 v1.1 sizes as gin_configs/sizes/t5_1_1_{tiny,small}.gin bind them (a test compares).
SIZES = {
    "tiny": dict(
        emb_dim=32, num_heads=4, head_dim=8, mlp_dim=64, num_encoder_layers=2, num_decoder_layers=2
    ),
    "small": dict(
        emb_dim=512,
        num_heads=6,
        head_dim=64,
        mlp_dim=1024,
        num_encoder_layers=8,
        num_decoder_layers=8,
    ),
}
VENDORED = ("sacrebleu", "portalocker", "colorama", "tabulate")
LIBS = ("jax", "jaxlib", "flax", "optax", "numpy", "sacrebleu")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="write the corpus (needs the full chartjax environment)")
    g.add_argument("--out", required=True)
    g.add_argument("--train_tables", type=int, default=10_000)
    g.add_argument("--heldout_tables", type=int, default=500)
    g.add_argument("--vocab_size", type=int, default=1000)
    g.add_argument("--seed", type=int, default=0)
    t = sub.add_parser("train", help="train and score (TF- and gin-free)")
    t.add_argument("--data", required=True, help="the folder `generate` wrote")
    t.add_argument("--out", required=True)
    t.add_argument("--size", choices=sorted(SIZES), default="small")
    t.add_argument("--dtype", default="bfloat16")
    t.add_argument("--steps", type=int, default=3000)
    t.add_argument("--budget_s", type=float, default=None, help="training seconds cap")
    t.add_argument("--batch", type=int, default=128)
    t.add_argument("--lr", type=float, default=1e-2, help="peak learning rate (Adafactor)")
    t.add_argument("--warmup", type=int, default=200)
    t.add_argument("--eval_every", type=int, default=500)
    t.add_argument("--eval_batch", type=int, default=250)
    t.add_argument("--log_every", type=int, default=100)
    t.add_argument("--max_heldout", type=int, default=0, help="score only the first N (0: all)")
    t.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


# ------------------------------------------------------------------ here: generate --------


def generate(args) -> dict:
    from chartjax.data.vocab import Vocabulary
    from tools.bench import t5_summary as bench

    os.makedirs(args.out, exist_ok=True)
    train_ex, heldout_ex = bench.corpus(args.train_tables, args.heldout_tables, args.seed)
    train_recs, heldout_recs = bench.task_records(train_ex), bench.task_records(heldout_ex)
    vocab = Vocabulary(
        bench.train_vocab(train_recs, os.path.join(args.out, "spm"), args.vocab_size)
    )
    for name, recs in (("train", train_recs), ("heldout", heldout_recs)):
        with open(os.path.join(args.out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
            for r in recs:
                row = {k: r[k] for k in ("id", "target")}  # the prompt is in its ids
                row["input_ids"] = vocab.encode(r["prompt"], add_eos=True)
                row["target_ids"] = vocab.encode(r["target"], add_eos=True)
                f.write(json.dumps(row) + "\n")
    with open(os.path.join(args.out, "pieces.json"), "w", encoding="utf-8") as f:
        json.dump([vocab.sp.id_to_piece(i) for i in range(vocab.vocab_size)], f)
    constant, constant_train_bleu = bench.constant_baseline(train_recs)
    meta = {
        "constant": constant,
        "constant_train_bleu": constant_train_bleu,
        "vocab_size": vocab.vocab_size,
        "train": len(train_recs),
        "heldout": len(heldout_recs),
        "seed": args.seed,
    }
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    vendor(os.path.join(args.out, "vendor"))
    return meta


def vendor(dest: str) -> None:
    """Copies of the installed VENDORED packages (pure Python; licences in their dist-info)."""
    from importlib import metadata

    os.makedirs(dest, exist_ok=True)
    for name in VENDORED:
        spec = importlib.util.find_spec(name)
        if spec is None:
            raise ModuleNotFoundError(f"{name} is not installed here: cannot vendor it")
        if spec.submodule_search_locations:
            src = list(spec.submodule_search_locations)[0]
            shutil.copytree(
                src,
                os.path.join(dest, name),
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        else:
            shutil.copy(spec.origin, dest)
        dist = metadata.distribution(name)
        for f in dist.files or ():
            if "LICENSE" in f.name.upper() or f.name.upper().startswith("COPYING"):
                shutil.copy(dist.locate_file(f), os.path.join(dest, f"{name}-{f.name}"))


# ------------------------------------------------------------------ there: train ----------


def use_vendored(data: str) -> None:
    """sacrebleu from `<data>/vendor` when it is not installed. sacrebleu 2.6 imports lxml at
    package import, for its WMT XML dataset reader only (BLEU never calls it): where lxml is
    missing too, a stub module that raises on use stands in for it."""
    if not _importable("sacrebleu"):
        sys.path.insert(0, os.path.join(data, "vendor"))
    if not _importable("lxml"):

        def missing(name):
            raise ImportError("lxml is not installed (only sacrebleu's WMT XML reader uses it)")

        lxml, etree = types.ModuleType("lxml"), types.ModuleType("lxml.etree")
        etree.__getattr__ = missing
        lxml.etree = etree
        sys.modules.setdefault("lxml", lxml)
        sys.modules.setdefault("lxml.etree", etree)


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a blocking finder, or sys.modules[name] = None
        return False


def read_jsonl(path: str) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e})") from None
            missing = [k for k in ("id", "target", "input_ids", "target_ids") if k not in row]
            if missing:
                raise ValueError(f"{path}:{n}: missing field(s) {missing}")
            rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def detokenize(ids, pieces: list[str]) -> str:
    """SentencePiece decoding of `ids` up to the first EOS (pad dropped), from the pieces alone:
    pieces joined, "▁" -> space, the leading space dropped, byte pieces <0xNN> as UTF-8 bytes.
    Hand-written because the device machine has no sentencepiece; tests/tools/
    test_gpu_scripts.py checks it equals chartjax.data.vocab's decoding."""
    out = bytearray()
    for i in ids:
        i = int(i)
        if i == EOS:
            break
        if i == PAD:
            continue
        piece = pieces[i] if 0 <= i < len(pieces) else "<unk>"
        if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            out.append(int(piece[3:5], 16))
        elif piece == "<unk>":
            out += " \u2047 ".encode()
        else:
            out += piece.replace("\u2581", " ").encode()
    text = out.decode("utf-8", errors="replace")
    return text[1:] if text.startswith(" ") else text


def arrays(rows: list[dict], in_len: int, tgt_len: int) -> dict[str, np.ndarray]:
    """Padded model inputs; the decoder input is the target shifted right behind START, with
    nothing after the final EOS (as chartjax.tasks.seq2seq.target_arrays)."""
    n = len(rows)
    enc = np.full((n, in_len), PAD, np.int32)
    tgt = np.full((n, tgt_len), PAD, np.int32)
    for k, r in enumerate(rows):
        a, b = r["input_ids"][:in_len], r["target_ids"][:tgt_len]
        if len(r["input_ids"]) > in_len:
            a = a[:-1] + [EOS]
        if len(r["target_ids"]) > tgt_len:
            b = b[:-1] + [EOS]
        enc[k, : len(a)], tgt[k, : len(b)] = a, b
    dec = np.concatenate([np.full((n, 1), START, np.int32), tgt[:, :-1]], axis=1)
    dec[:, 1:][tgt[:, :-1] == PAD] = PAD
    return {"encoder_input_tokens": enc, "decoder_input_tokens": dec, "decoder_target_tokens": tgt}


def _round_up(n: int, k: int = 8) -> int:
    return -(-n // k) * k


def adafactor(lr: float, warmup: int):
    """chartjax.optim's Adafactor (T5X adafactor.gin settings), linear warmup then constant."""
    import optax

    sched = optax.join_schedules(
        [optax.linear_schedule(0.0, lr, max(warmup, 1)), optax.constant_schedule(lr)],
        [max(warmup, 1)],
    )
    return optax.adafactor(
        sched,
        decay_rate=0.8,
        clipping_threshold=1.0,
        eps=1e-30,
        min_dim_size_to_factor=128,
        multiply_by_parameter_scale=True,
    )


def train(args) -> dict:
    use_vendored(args.data)
    import jax
    import jax.numpy as jnp

    from chartjax.metrics.text import bleu
    from chartjax.models import decoding, losses, t5
    from chartjax.models.model_configs import T5Config
    from tools.bench import harness
    from tools.gpu import jit_step

    bench = harness.Run("t5_learning", dict(vars(args)), LIBS)
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.data, "pieces.json"), encoding="utf-8") as f:
        pieces = json.load(f)
    with open(os.path.join(args.data, "meta.json")) as f:
        meta = json.load(f)
    train_rows = read_jsonl(os.path.join(args.data, "train.jsonl"))
    heldout = read_jsonl(os.path.join(args.data, "heldout.jsonl"))
    if args.max_heldout:
        heldout = heldout[: args.max_heldout]
    rows = train_rows + heldout
    in_len = _round_up(max(len(r["input_ids"]) for r in rows))
    tgt_len = _round_up(max(len(r["target_ids"]) for r in rows))
    train_arr, held_arr = arrays(train_rows, in_len, tgt_len), arrays(heldout, in_len, tgt_len)
    refs = [r["target"] for r in heldout]

    cfg = T5Config(vocab_size=_round_up(len(pieces), 128), dtype=args.dtype, **SIZES[args.size])
    tx = adafactor(args.lr, args.warmup)
    model_def, state = jit_step.init(lambda rngs: t5.build(cfg, rngs), tx, args.seed)
    num_params = sum(int(x.size) for x in jax.tree.leaves(state["params"]))

    def loss(model, batch, *, train):
        return losses.seq2seq_loss(model, batch, deterministic=not train)

    step_fn = jit_step.make_step(model_def, loss, tx)

    def score(state) -> tuple[float, list[str]]:
        model = jit_step.model_at(model_def, state)
        texts = []
        n, b = len(heldout), args.eval_batch
        for lo in range(0, n, b):
            enc = held_arr["encoder_input_tokens"][lo : lo + b]
            real = len(enc)
            if real < b:  # one shape: one compilation
                enc = np.concatenate([enc, np.zeros((b - real, in_len), np.int32)])
            tokens, _ = decoding.greedy_decode(
                model, {"encoder_input_tokens": jnp.asarray(enc)}, max_decode_len=tgt_len
            )
            texts += [detokenize(t, pieces) for t in np.asarray(tokens)[:real]]
        # force: Statista-style summaries are pre-tokenized ("... dollars ."); same score.
        return bleu(texts, refs, force=True).metrics["bleu"], texts

    constant_bleu = bleu([meta["constant"]] * len(refs), refs, force=True).metrics["bleu"]
    n_train = len(train_rows)
    curve, losses_log, texts = [], [], []
    t_train, t_compiled, eval_s, step = time.time(), None, 0.0, 0
    last_loss = None
    while step < args.steps:
        epoch, pos = divmod(step * args.batch, n_train)
        order = np.random.default_rng([args.seed, epoch]).permutation(n_train)
        idx = order[pos : pos + args.batch]
        if len(idx) < args.batch:  # the epoch's tail: top up from the next epoch's order
            nxt = np.random.default_rng([args.seed, epoch + 1]).permutation(n_train)
            idx = np.concatenate([idx, nxt[: args.batch - len(idx)]])
        batch = {k: jnp.asarray(v[idx]) for k, v in train_arr.items()}
        state, metrics = step_fn(state, batch)
        step += 1
        if t_compiled is None:
            jax.block_until_ready(metrics["loss"])
            t_compiled = time.time()
        over = args.budget_s is not None and time.time() - t_compiled - eval_s > args.budget_s
        end = step == args.steps or over  # the final log and evaluation
        if step % args.log_every == 0 or end:
            last_loss = float(metrics["loss"])
            losses_log.append([step, round(last_loss, 4)])
            print(f"step {step} loss {last_loss:.4f}", file=sys.stderr, flush=True)
        if step % args.eval_every == 0 or end:
            t = time.time()
            value, texts = score(state)
            eval_s += time.time() - t
            curve.append(
                {
                    "step": step,
                    "bleu": round(value, 4),
                    "elapsed_s": round(time.time() - t_train, 1),
                }
            )
            print(f"step {step} held-out BLEU {value:.4f}", file=sys.stderr, flush=True)
        if over:
            break
    train_s = time.time() - (t_compiled or t_train) - eval_s
    with open(os.path.join(args.out, "predictions.jsonl"), "w", encoding="utf-8") as f:
        for r, text in zip(heldout, texts):
            f.write(json.dumps({"id": r["id"], "prediction": text, "target": r["target"]}) + "\n")
    final = curve[-1]["bleu"]
    results = {
        "beats_constant": final > constant_bleu,
        "final_bleu": final,
        "constant_bleu": round(constant_bleu, 4),
        "ratio_to_constant": round(final / max(constant_bleu, 1e-9), 2),
        "constant_summary": meta["constant"],
        "curve": curve,
        "train_loss": losses_log,
        "steps": step,
        "examples_per_s": round(max(step - 1, 0) * args.batch / max(train_s, 1e-9), 1),
        "wall_s": {
            "compile_first_step_s": round((t_compiled or t_train) - t_train, 1),
            "train_s": round(train_s, 1),
            "eval_s": round(eval_s, 1),
            "total_s": round(time.time() - t_start, 1),
        },
        "settings": {
            "size": args.size,
            "config": {k: getattr(cfg, k) for k in ("vocab_size", "dtype", *SIZES[args.size])},
            "parameters": num_params,
            "input_len": in_len,
            "target_len": tgt_len,
            "train_records": n_train,
            "heldout_records": len(heldout),
            "device": str(jax.devices()[0].device_kind),
            "sacrebleu": importlib.util.find_spec("sacrebleu").origin,
        },
    }
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
