"""Learning check: a tiny T5 trained from scratch on generated tables learns their templated
summaries, TAB-T5 style, well above the best constant summary (issue 15, item 6).

    python -m chartjax.tools.bench.t5_summary --out runs/bench_t5_summary

What it runs (chartjax's parts throughout):
1. chartjax.synth.table_summaries generates training and held-out tables (different seeds):
   2-column Statista-like tables (years or countries), a title, and a summary from one of six
   templates naming the subject, the measure and facts of the table (maximum / minimum row,
   first / last value, trend, runner-up);
2. the chart_to_text task in `tab_t5` mode (chartjax.tasks.chart_to_text) turns each into its
   record with its own `expand`: "translate Chart to Text: <title> <s> <records>" -> summary,
   the table unrolled as the builder's `table.records`; the records are served from memory
   (`RecordSource`) instead of a TFDS build, everything after that is the task's: SentencePiece
   features, the loss, greedy decoding, and the Chart-to-Text scores (BLEU = sacrebleu 13a);
3. tools/train_vocab trains a small SentencePiece vocabulary on the training prompts and
   summaries;
4. chartjax.train.train runs the jitted loop for `--steps` (or `--budget_s` seconds after
   compilation), evaluating the held-out set every `--eval_every` steps and at the end;
5. the constant baseline: the training summary with the highest corpus BLEU against training
   summaries (`best_constant`, chosen on training data only), scored on the held-out set.
Prints the harness's JSON object and writes it to `<out>/t5_summary.json`: the BLEU curve
(and ROUGE-L, CS, train loss) against step and time, the constant's BLEU, steps, wall and CPU
seconds, and the load average at both ends (the machine may be shared).

Measured (the defaults, `make bench`'s line; 2 shared CPU cores under load 17-25 from other
jobs: 1,000 steps of batch 32 in 2,491 s wall, 451 s of process CPU time, 18 examples/s;
1.0M parameters, BPE vocabulary of 1,000 pieces, prompts <= 107 tokens, summaries <= 41).
Held-out, 200 tables; constant summary (the best of 100 training summaries against 400
others) BLEU 0.168:

    step  elapsed_s  BLEU   ROUGE-L  CS     train_loss
     200     615     0.398  0.568    0.702  0.54
     400    1240     0.359  0.525    0.728  0.38
     600    1647     0.458  0.579    0.760  0.22
     800    2090     0.451  0.577    0.761  0.17
    1000    2430     0.419  0.601    0.759  0.14

BLEU is 2.4x the constant's by step 200 and 2.5-2.7x from step 600. The model writes the
templates, the title's subject, measure and unit and the row names; its numbers are often
near-misses of the table's ("43.5" for 43.4) or the wrong row's. The template of a reference
is drawn at random, independent of its table, so no model can predict which one a held-out
summary uses: that part of the gap to 1.0 is irreducible.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import shutil
import time

from chartjax.synth import table_summaries as ts
from chartjax.tools.bench import harness

LIBS = ("jax", "flax", "optax", "tensorflow-cpu", "sentencepiece", "sacrebleu")
SPLIT = "validation"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output folder (vocabulary, run, JSON)")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--budget_s", type=float, default=None, help="training seconds cap")
    p.add_argument("--train_tables", type=int, default=3000)
    p.add_argument("--heldout_tables", type=int, default=200)
    p.add_argument("--eval_every", type=int, default=200)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-2, help="peak learning rate (Adafactor)")
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--vocab_size", type=int, default=1000)
    p.add_argument("--emb_dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=2, help="encoder and decoder layers each")
    p.add_argument("--max_input_len", type=int, default=112)
    p.add_argument("--max_target_len", type=int, default=48)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


# ------------------------------------------------------------------ corpus ----------------


def corpus(num_train: int, num_heldout: int, seed: int) -> tuple[list[dict], list[dict]]:
    """Training and held-out tables (seeds 2*seed+1 and 2*seed+2: disjoint streams)."""
    return ts.generate(num_train, 2 * seed + 1), ts.generate(num_heldout, 2 * seed + 2)


def task_records(examples: list[dict]) -> list[dict]:
    """The chart_to_text task's own TAB-T5 records of the generated tables (its `expand`)."""
    from chartjax.tasks import chart_to_text

    expand = chart_to_text.make_expand("tab_t5", "statista")
    return [r for ex in examples for r in expand(ts.statista_example(ex))]


def train_vocab(records: list[dict], out_prefix: str, vocab_size: int) -> str:
    from chartjax.tools import train_vocab as tv

    texts = [t for r in records for t in (r["prompt"], r["target"])]
    # BPE: on this corpus the unigram trainer spends its pieces on number fragments and splits
    # common words ("▁th" "e", "▁m" "il" "li" "on"): 2.5-3x longer sequences at 1,000 pieces.
    return tv.train(
        texts, out_prefix, vocab_size=vocab_size, model_type="bpe", hard_vocab_limit=False
    )


def constant_baseline(train_recs: list[dict]) -> tuple[str, float]:
    """The constant summary, chosen on training data only: the best of the first 100 training
    summaries by corpus BLEU against the next 400 -> (summary, its training BLEU)."""
    cands = [r["target"] for r in train_recs[:100]]
    return ts.best_constant(cands, [r["target"] for r in train_recs[100:500]])


@dataclasses.dataclass
class RecordSource:
    """Seq2seq records (id, prompt, target, meta) from memory, in place of TfdsSource's
    expanded TFDS examples: the same columns, shuffled per epoch with the seed, resumable."""

    train: list[dict]
    heldout: list[dict]

    @staticmethod
    def _rows(records, process_index: int, process_count: int) -> list[dict]:
        rows = [
            {
                **{k: str(r[k]) for k in ("id", "prompt", "target")},
                "meta": json.dumps(r["meta"], sort_keys=True),
            }
            for r in records
        ]
        return rows[process_index::process_count]

    def train_examples(self, *, seed, start_step, local_batch_size, process_index, process_count):
        from chartjax.data import sources

        rows = self._rows(self.train, process_index, process_count)
        positions = sources.stream_positions(len(rows), seed, start_step * local_batch_size)
        return (rows[i] for i in positions)

    def eval_examples(self, split, *, process_index, process_count):
        return self._rows(self.heldout, process_index, process_count)


# ------------------------------------------------------------------ run -------------------


def gin_bindings(args, vocab_file: str, vocab_size: int) -> list[str]:
    heads = max(args.emb_dim // 32, 1)
    return [
        f"T5Config.vocab_size = {vocab_size}",
        f"T5Config.emb_dim = {args.emb_dim}",
        f"T5Config.num_heads = {heads}",
        f"T5Config.head_dim = {args.emb_dim // heads}",
        f"T5Config.mlp_dim = {args.emb_dim * 2}",
        f"T5Config.num_encoder_layers = {args.layers}",
        f"T5Config.num_decoder_layers = {args.layers}",
        "T5Config.dtype = 'float32'",
        f"Features.vocab_file = '{vocab_file}'",
        "Features.modality = 'text'",
        f"Features.max_input_len = {args.max_input_len}",
        f"Features.max_target_len = {args.max_target_len}",
        f"Decoding.max_decode_len = {args.max_target_len}",
        "make_optimizer.name = 'adafactor'",
        "schedule.kind = 'constant'",
        f"schedule.peak = {args.lr}",
        f"schedule.warmup_steps = {args.warmup}",
        f"train.global_batch_size = {args.batch}",
        f"train.eval_batch_size = {min(args.heldout_tables, 100)}",
        "train.progress = False",
        "train.log_every = 25",
        "train.checkpoint_every = 100000",
        "train.keep_checkpoints = 1",
        f"train.seed = {args.seed}",
    ]


def read_curve(workdir: str) -> list[dict]:
    """Held-out scores per evaluated step (eval/<split>/step_<N>/metrics.json), with the train
    loss and time of the nearest logged step at or before it."""
    losses = {}
    with open(os.path.join(workdir, "train_metrics.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            losses[row["step"]] = row
    curve = []
    for path in glob.glob(os.path.join(workdir, "eval", SPLIT, "step_*", "metrics.json")):
        with open(path) as f:
            m = json.load(f)
        near = max((s for s in losses if s <= m["step"]), default=None)
        point = {"step": m["step"]}
        point.update({k: round(m["metrics"][k], 4) for k in ("bleu", "rouge_l")})
        point["content_selection"] = round(m["metrics"].get("content_selection", 0.0), 4)
        if near is not None:
            point["train_loss"] = round(losses[near]["loss"], 4)
            point["elapsed_s"] = round(losses[near]["elapsed_s"], 1)
        curve.append(point)
    return sorted(curve, key=lambda p: p["step"])


def run(args) -> dict:
    import gin

    from chartjax import config as config_lib
    from chartjax import train as train_lib
    from chartjax.data.vocab import Vocabulary
    from chartjax.metrics.text import bleu
    from chartjax.tasks import chart_to_text, seq2seq

    bench = harness.Run("t5_summary", vars(args), LIBS)
    cpu0, t_start = harness.cpu_seconds(), time.time()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    phases = {}
    t = time.time()
    train_ex, heldout_ex = corpus(args.train_tables, args.heldout_tables, args.seed)
    train_recs, heldout_recs = task_records(train_ex), task_records(heldout_ex)
    vocab_file = train_vocab(train_recs, os.path.join(out, "vocab", "spm"), args.vocab_size)
    vocab = Vocabulary(vocab_file)
    phases["corpus_vocab_s"] = time.time() - t

    t = time.time()
    constant, constant_train_bleu = constant_baseline(train_recs)
    heldout_targets = [r["target"] for r in heldout_recs]
    constant_bleu = bleu([constant] * len(heldout_targets), heldout_targets).metrics["bleu"]
    phases["constant_s"] = time.time() - t

    gin.clear_config()
    config_lib.parse_gin(["models/t5_1_1.gin"], gin_bindings(args, vocab_file, vocab.vocab_size))
    task = chart_to_text.make_task(
        config="statista",
        mode="tab_t5",
        eval_splits=(SPLIT,),
        features=seq2seq.Features(),
        decoding=seq2seq.Decoding(),
    )
    task = dataclasses.replace(task, source=RecordSource(train_recs, heldout_recs))
    workdir = os.path.join(out, "run")
    shutil.rmtree(workdir, ignore_errors=True)
    t = time.time()
    result = train_lib.train(
        workdir,
        task=task,
        num_train_steps=args.steps,
        max_train_time_s=args.budget_s,
        eval_every=args.eval_every,
    )
    phases["train_s"] = time.time() - t
    gin.clear_config()

    curve = read_curve(workdir)
    final = curve[-1]
    lengths = [len(vocab.encode(r["prompt"])) + 1 for r in train_recs + heldout_recs]
    target_lengths = [len(vocab.encode(r["target"])) + 1 for r in train_recs + heldout_recs]
    with open(
        os.path.join(workdir, "eval", SPLIT, f"step_{final['step']}", "predictions.jsonl")
    ) as f:
        examples = [json.loads(line) for _, line in zip(range(3), f)]
    summary = {
        "beats_constant": final["bleu"] > constant_bleu,
        "final_bleu": final["bleu"],
        "constant_bleu": round(constant_bleu, 4),
        "ratio_to_constant": round(final["bleu"] / max(constant_bleu, 1e-9), 2),
        "constant_summary": constant,
        "constant_train_bleu": round(constant_train_bleu, 4),
        "curve": curve,
        "steps": result["step"],
        "stop_reason": result["stop_reason"],
        "examples_per_s": result["train"].get("examples_per_s"),
        "wall_s": {k: round(v, 1) for k, v in {**phases, "total_s": time.time() - t_start}.items()},
        "cpu_s": round(harness.cpu_seconds() - cpu0, 1),
        "examples": [{k: e[k] for k in ("id", "prediction", "target")} for e in examples],
        "settings": {
            "vocab_pieces": vocab.vocab_size,
            "train_records": len(train_recs),
            "heldout_records": len(heldout_recs),
            "input_tokens_max": max(lengths),
            "target_tokens_max": max(target_lengths),
            "model": "T5 v1.1 (chartjax.models.t5) from scratch, float32, Adafactor",
        },
    }
    if max(lengths) > args.max_input_len or max(target_lengths) > args.max_target_len:
        summary["warning"] = "some prompts or targets are longer than the feature lengths"
    return harness.emit(bench.report(summary), os.path.join(out, "t5_summary.json"))


def main(argv=None) -> int:
    run(parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
