"""Do Chart2text and Field-Infuse learn from scratch on CPU? A learning check (JSON).

    python -m chartjax.tools.bench.chart2text_learning [--budget-cpu-s 180] [--train 2000] \
        [--heldout 200] [--models chart2text,field_infuse] [--out c2t.json]

Generated charts (a small generator of its own, below: a two-column table of 3-6 rows, years or
countries against a measure, a title, and a summary from one of four sentence patterns that name
the first / last / largest / smallest rows) go through the Chart-to-Text records task's own
Python parts (chartjax/tasks/chart_to_text_records.py: records, data-variable templating,
content-selection labels, packing, word vocabulary, back-substitution) into each model, trained
with Adam for `--budget-cpu-s` CPU seconds of this process (after compilation; the machine may be
shared, so CPU time, not wall time, is the budget; the held-out evaluations count in it) on one device with a plain
`nnx.jit` step, as tools/bench/rn_learning.py does: this measures learning, not the sharded loop
(tests/tasks/test_chart_to_text_records.py runs the recipes through chartjax.train).

Held-out figures: corpus BLEU (sacrebleu, as the task scores) and content selection of the
back-substituted greedy outputs, against the best constant summary (the training summary with
the highest held-out BLEU among `--constants` candidates) and, as a ceiling, the true summaries'
templating round trip. Progress lines to stderr; the harness JSON (steps, wall and CPU seconds,
load averages) to stdout and `--out`.

Measured (2026-12-02, 2 shared cores at load 17-26, defaults: 2,000 training / 200 held-out
charts, d_model 64, Chart2text 1+2 layers, Field-Infuse 2+2, batch 32, Adam 1e-3, 240 CPU s
each): held-out BLEU / CS of the best constant summary 0.151 / 0.202; templating round trip of
the true summaries 1.0 / 1.0. Chart2text 2,829 steps (1,370 s wall, 241 CPU s): BLEU 0.34 at
step 200, 0.50-0.55 from step 400 on, 0.485 at the end; CS 0.77-0.80. Field-Infuse 2,416 steps
(1,162 s wall, 241 CPU s): BLEU 0.29 at step 200, 0.17-0.50 over the run (noisy), 0.451 at the
end; CS 0.60-0.79.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from chartjax.tools.bench import harness

YEARS = list(range(2008, 2022))
COUNTRIES = ["Chile", "Peru", "Brazil", "Canada", "Mexico", "Japan", "India", "Kenya", "Spain"]
MEASURES = [
    ("Revenue", "million U.S. dollars"),
    ("Users", "millions"),
    ("Sales", "thousand units"),
    ("Visitors", "thousands"),
]
COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay"]


def make_chart(rng: np.random.Generator) -> dict:
    """One chart: header, rows, title, summary (Statista-like, pre-tokenized)."""
    measure, unit = MEASURES[rng.integers(len(MEASURES))]
    company = COMPANIES[rng.integers(len(COMPANIES))]
    n = int(rng.integers(3, 7))
    by_year = rng.random() < 0.5
    if by_year:
        start = int(rng.integers(0, len(YEARS) - n + 1))
        xs = [str(y) for y in YEARS[start : start + n]]
        header = ["Year", f"{measure} in {unit}"]
    else:
        xs = [COUNTRIES[i] for i in rng.choice(len(COUNTRIES), n, replace=False)]
        header = ["Country", f"{measure} in {unit}"]
    vals = [int(v) for v in rng.choice(np.arange(10, 1000), n, replace=False)]
    rows = [[x, str(v)] for x, v in zip(xs, vals)]
    hi, lo = int(np.argmax(vals)), int(np.argmin(vals))
    title = f"{measure} of {company} " + (f"from {xs[0]} to {xs[-1]}" if by_year else "by country")
    if by_year:
        trend = "up" if vals[-1] > vals[0] else "down"
        patterns = [
            f"In {xs[-1]} , {company} 's {measure.lower()} amounted to {vals[-1]} {unit} , "
            f"{trend} from {vals[0]} {unit} in {xs[0]} .",
            f"{company} 's {measure.lower()} peaked in {xs[hi]} at {vals[hi]} {unit} .",
        ]
    else:
        patterns = [
            f"{xs[hi]} had the highest {measure.lower()} of {company} with {vals[hi]} {unit} , "
            f"while {xs[lo]} had the lowest with {vals[lo]} {unit} .",
            f"With {vals[hi]} {unit} , {xs[hi]} led {company} 's {measure.lower()} .",
        ]
    summary = patterns[int(rng.integers(len(patterns)))]
    return {"header": header, "rows": rows, "title": title, "summary": summary}


def featurize(charts, vocab, shapes):
    from chartjax.tasks import chart_to_text_records as ctr

    out = {k: [] for k in ("encoder_input_tokens", "decoder_target_tokens", "decoder_input_tokens")}
    out["cs_labels"] = []
    for c in charts:
        records = ctr.table_records(c["header"], c["rows"])
        meta = {
            "title": c["title"],
            "records": [[r.header, r.value, r.column, r.row, None] for r in records],
        }
        enc, tgt, inp, cs = ctr.example_arrays(meta, c["summary"], vocab, shapes, True)
        for k, v in zip(out, (enc, tgt, inp, cs)):
            out[k].append(v)
    return {k: np.stack(v) for k, v in out.items()}


def cs_data(chart) -> str:
    from chartjax.data.table_records import records_from_table

    return records_from_table(chart["header"], chart["rows"])


def scores(texts, charts) -> dict:
    from chartjax.metrics.chart_to_text import chart_to_text_scores

    s = chart_to_text_scores(
        texts,
        [c["summary"] for c in charts],
        records=[cs_data(c) for c in charts],
        titles=[c["title"] for c in charts],
    )
    return {k: round(s.metrics[k], 4) for k in ("bleu", "content_selection", "rouge_l")}


def train_model(kind, train, heldout, vocab, shapes, a) -> dict:
    import jax
    import optax
    from flax import nnx

    from chartjax.models import chart2text, decoding
    from chartjax.models import record_seq2seq as model_lib
    from chartjax.tasks import chart_to_text_records as ctr

    cfg = model_lib.DataToTextConfig(
        vocab_size=len(vocab),
        kind=kind,
        d_model=a.d_model,
        num_heads=4,
        ffn_dim=2 * a.d_model,
        encoder_layers=1 if kind == "chart2text" else 2,
        decoder_layers=2,
        max_records=shapes.max_records,
        max_target_len=shapes.max_target_len,
        max_header_words=shapes.max_header_words,
        max_value_words=shapes.max_value_words,
        lstm_dim=a.d_model,
        cs_weight=1.0 if kind == "chart2text" else 0.0,
        dropout=0.1,
        attention_dropout=0.0,
    )
    model = chart2text.build(cfg, a.seed)
    opt = nnx.Optimizer(model, optax.adam(a.lr), wrt=nnx.Param)

    @nnx.jit
    def step(model, opt, batch):
        (loss, aux), grads = nnx.value_and_grad(
            lambda m: model_lib.loss(m, batch, deterministic=False), has_aux=True
        )(model)
        opt.update(model, grads)
        return loss, aux

    def evaluate():
        texts = []
        for s in range(0, len(heldout["charts"]), 100):
            batch = {k: v[s : s + 100] for k, v in heldout["arrays"].items()}
            toks = decoding.greedy_decode(model, batch, max_decode_len=shapes.max_target_len)[0]
            for t, c in zip(vocab.decode_batch(np.asarray(toks)), heldout["charts"][s : s + 100]):
                records = ctr.table_records(c["header"], c["rows"])
                texts.append(ctr.substitute(t, ctr.slots(records, c["title"])))
        return scores(texts, heldout["charts"]), texts[:3]

    rng = np.random.default_rng(a.seed)
    n = len(train["encoder_input_tokens"])
    curve, t_start, steps, cpu0 = [], None, 0, harness.cpu_seconds()
    while True:
        idx = rng.integers(0, n, a.batch)
        loss, aux = step(model, opt, {k: v[idx] for k, v in train.items()})
        steps += 1
        if t_start is None:
            jax.block_until_ready(loss)
            t_start, compile_cpu = time.perf_counter(), harness.cpu_seconds() - cpu0
        elapsed = time.perf_counter() - t_start
        cpu = harness.cpu_seconds() - cpu0 - compile_cpu
        over = cpu > a.budget_cpu_s
        if steps % a.eval_every == 0 or over:
            m, sample = evaluate()
            row = {
                "model": kind,
                "step": steps,
                "elapsed_s": round(elapsed, 1),
                "cpu_s": round(cpu, 1),
                "loss": round(float(loss), 4),
                "cs_loss": round(float(aux["cs_loss"]), 4),
                **m,
            }
            harness.progress(row)
            curve.append(row)
            if over:
                break
    return {
        "steps": steps,
        "train_wall_s": round(elapsed, 1),
        "train_cpu_s": round(harness.cpu_seconds() - cpu0 - compile_cpu, 1),
        "heldout": curve[-1],
        "curve": curve,
        "samples": sample,
        "config": {
            "d_model": cfg.d_model,
            "encoder_layers": cfg.encoder_layers,
            "decoder_layers": cfg.decoder_layers,
            "vocab_size": cfg.vocab_size,
        },
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", type=int, default=2000, help="generated training charts")
    p.add_argument("--heldout", type=int, default=200)
    p.add_argument("--models", default="chart2text,field_infuse")
    p.add_argument(
        "--budget-cpu-s", dest="budget_cpu_s", type=float, default=180.0,
        help="training CPU seconds per model",
    )  # fmt: skip
    p.add_argument("--eval-every", dest="eval_every", type=int, default=200)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--d-model", dest="d_model", type=int, default=64)
    p.add_argument("--constants", type=int, default=100, help="constant-summary candidates")
    p.add_argument("--seed", type=int, default=0)
    harness.add_out_flag(p)
    a = p.parse_args(argv)
    run = harness.Run("chart2text_learning", vars(a), ("jax", "flax", "optax", "sacrebleu"))

    from chartjax.tasks import chart_to_text_records as ctr

    rng = np.random.default_rng(a.seed)
    train_charts = [make_chart(rng) for _ in range(a.train)]
    held = [make_chart(rng) for _ in range(a.heldout)]
    shapes = ctr.Shapes(max_records=16, max_target_len=32, max_header_words=6, max_value_words=2)

    def tokens():
        for c in train_charts:
            records = ctr.table_records(c["header"], c["rows"])
            yield ctr.template(c["summary"], records, c["title"])[0].split()
            for r in records:
                yield ctr.record_tokens(r)

    vocab = ctr.build_vocab(tokens(), 2000)
    train = featurize(train_charts, vocab, shapes)
    heldout = {"charts": held, "arrays": featurize(held, vocab, shapes)}
    # Baselines: the best constant summary, and the true summaries through template/substitute.
    cands = [train_charts[i]["summary"] for i in rng.choice(a.train, a.constants, replace=False)]
    best = max(cands, key=lambda s: scores([s] * len(held), held)["bleu"])
    round_trip = [
        ctr.substitute(
            ctr.template(c["summary"], ctr.table_records(c["header"], c["rows"]), c["title"])[0],
            ctr.slots(ctr.table_records(c["header"], c["rows"]), c["title"]),
        )
        for c in held
    ]
    results = {
        "vocab_size": len(vocab),
        "constant_baseline": {"summary": best, **scores([best] * len(held), held)},
        "templating_round_trip": scores(round_trip, held),
    }
    harness.progress(
        {"constant": results["constant_baseline"], "round_trip": results["templating_round_trip"]}
    )
    for kind in a.models.split(","):
        results[kind] = train_model(kind, train, heldout, vocab, shapes, a)
    return harness.emit(run.report(results), a.out)


if __name__ == "__main__":
    main()
