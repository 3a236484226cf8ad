"""`chartjax-infer --task classify` against HF PyTorch on the same CPU, batch and inputs.

    python -m chartjax.tools.bench.classify [--family deberta] [--examples 256] [--batch 16]
        [--seq_len 128] [--hidden 256] [--layers 4] [--heads 4] [--out bench_classify.json]

A random DeBERTa-v3-style (or TAPAS) classifier of the given size is written as a HF checkpoint
with its own tokenizer files (chartjax/testing/tiny_hf.py); `--examples` claim/table rows go to a
JSONL file. Side A is `chartjax-infer --task classify` in this process (chartjax.tools.infer.run with the
CLI's parsed flags: checkpoint and tokenizer loading, featurization, batched jitted forward,
predictions.jsonl), side B the same job in HF PyTorch (`from_pretrained`, the same HF tokenizer
per row, `model(**batch)` under `torch.no_grad()` per batch of `--batch` rows padded to
`--seq_len`, argmax to the id2label name, the rows written as JSONL). Both are timed whole,
interleaved (harness.interleaved: A, B, A, B, ...); the first call of each is the warm-up (it
holds chartjax's compilation). Results: examples/s of each side (from the median time), the
speed-up of A over B, and each side's rate after loading (chartjax-infer's own `examples_per_s`;
B's forward loop alone), with the machine's load average beside them.

jax and torch each get every core of the machine (`--threads` sets torch's).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from chartjax.tools.bench import harness

CLAIMS = (
    "The chart shows that {n}% of users in 2019 were under 25 years old.",
    "Coal is the second-lowest source of energy with {n}% in Romania.",
    "Revenue fell by {n} billion euros in Q4 compared with the year before.",
    "Hydro contributes {n}% and is the primary source of electricity.",
)
TABLE = "TITLE | Share of sources\nSource | Share\nCoal | {n}%\nHydro | 36%\nGas | 10%\nOther | "


def rows(n: int) -> list[dict]:
    return [
        {
            "id": f"r{i}",
            "claim": CLAIMS[i % len(CLAIMS)].format(n=i % 97),
            "table": TABLE.format(n=i),
        }
        for i in range(n)
    ]


def hf_side(family: str, path: str, data: list[dict], batch: int, seq_len: int, out: str):
    """The same job in HF PyTorch -> (callable, its last post-load rate holder)."""
    import numpy as np
    import torch
    import transformers

    from chartjax.data import classifier_inputs

    last = {}

    def run():
        if family == "deberta":
            tok = transformers.DebertaV2Tokenizer.from_pretrained(path)
            model = transformers.DebertaV2ForSequenceClassification.from_pretrained(path)
        else:
            tok = transformers.TapasTokenizer.from_pretrained(path)
            model = transformers.TapasForSequenceClassification.from_pretrained(path)
        model.eval()
        names = [model.config.id2label[i] for i in range(model.config.num_labels)]
        t0 = time.perf_counter()
        written = []
        for s in range(0, len(data), batch):
            group = data[s : s + batch]
            enc = []
            for r in group:
                if family == "deberta":
                    e = tok(
                        r["claim"],
                        r["table"],
                        truncation=True,
                        max_length=seq_len,
                        padding="max_length",
                        return_token_type_ids=True,
                    )
                else:
                    e = tok(
                        table=classifier_inputs.table_frame(r["table"]),
                        queries=[r["claim"]],
                        truncation=True,
                        max_length=seq_len,
                        padding="max_length",
                    )
                    e = {k: v[0] for k, v in e.items()}
                enc.append(e)
            feats = {k: torch.tensor(np.asarray([e[k] for e in enc])) for k in enc[0]}
            with torch.no_grad():
                logits = model(**feats).logits.numpy()
            written += [
                {"id": r["id"], "prediction": names[int(np.argmax(lg))], "scores": lg.tolist()}
                for r, lg in zip(group, logits)
            ]
        with open(out, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(w) + "\n" for w in written)
        last["examples_per_s"] = len(data) / (time.perf_counter() - t0)

    return run, last


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", default="deberta", choices=["deberta", "tapas"])
    p.add_argument("--examples", type=int, default=256)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq_len", type=int, default=128)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--alternations", type=int, default=harness.MIN_ALTERNATIONS)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    harness.add_out_flag(p)
    a = p.parse_args(argv)
    run = harness.Run("classify", vars(a), libs=("jax", "flax", "torch", "transformers"))

    import torch

    from chartjax.testing import tiny_hf
    from chartjax.tools import infer as infer_cli

    torch.set_num_threads(a.threads)
    work = tempfile.mkdtemp(prefix="bench_classify_")
    size = dict(
        hidden_size=a.hidden,
        num_hidden_layers=a.layers,
        num_attention_heads=a.heads,
        intermediate_size=4 * a.hidden,
        max_position_embeddings=max(512, a.seq_len),
    )
    if a.family == "deberta":
        size.update(position_buckets=256)  # DeBERTa-v3's
    ckpt = tiny_hf.tiny_checkpoint(a.family, os.path.join(work, "ckpt"), dtype="float32", **size)
    data = rows(a.examples)
    src = os.path.join(work, "rows.jsonl")
    with open(src, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in data)
    extra = ["--pair_template", "{table}"] if a.family == "deberta" else ["--table_field", "table"]
    flags = [
        "--task", "classify", "--checkpoint", ckpt, "--inputs", src, "--template", "{claim}",
        *extra, "--max_input_len", str(a.seq_len), "--batch_size", str(a.batch),
        "--dtype", "float32", "--out", os.path.join(work, "chartjax"), "--overwrite",
    ]  # fmt: skip
    summaries = []

    def chartjax_side():
        summaries.append(infer_cli.run(infer_cli.parse_args(flags)))

    hf_run, hf_last = hf_side(
        a.family, ckpt, data, a.batch, a.seq_len, os.path.join(work, "hf.jsonl")
    )
    t = harness.interleaved(chartjax_side, hf_run, alternations=a.alternations)
    # Same predictions on both sides (fp32).
    with open(os.path.join(work, "chartjax", "predictions.jsonl")) as f:
        ours = [json.loads(line) for line in f]
    with open(os.path.join(work, "hf.jsonl")) as f:
        theirs = [json.loads(line) for line in f]
    agree = sum(x["prediction"] == y["prediction"] for x, y in zip(ours, theirs)) / len(ours)
    max_diff = max(
        abs(u - v) for x, y in zip(ours, theirs) for u, v in zip(x["scores"], y["scores"])
    )
    results = {
        "examples": a.examples,
        "chartjax_infer_examples_per_s": a.examples / t["a"]["median_s"],
        "hf_pytorch_examples_per_s": a.examples / t["b"]["median_s"],
        "speedup_chartjax_over_hf": t["speedup_a_over_b"],
        "after_loading": {
            "chartjax_infer_examples_per_s": summaries[-1]["examples_per_s"],
            "hf_pytorch_examples_per_s": hf_last["examples_per_s"],
        },
        "predictions_agree": agree,
        "max_abs_logit_diff": max_diff,
        "timing": t,
    }
    return harness.emit(run.report(results), a.out)


if __name__ == "__main__":
    main()
