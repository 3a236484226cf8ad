"""Benchmark of chartjax-score on generated inputs; prints one JSON object.

    python -m chartjax.tools.bench.score [--examples 10000] [--images 1000]

- chart_to_text: ``--examples`` generated summaries (BLEU, ROUGE, METEOR, CIDEr, CS and the
  per-split/type/complexity breakdowns); goal < 60 s on 2 cores.
- chart_info_task2 and chart_info_task6b (and 6a): ``--images`` generated per-image JSON pairs;
  goal < 30 s.
Each run is a fresh ``python -m chartjax.tools.score`` process, so start-up time is included.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from chartjax.tools.bench import harness

WORDS = (
    "sales revenue share users market growth country year percent million billion rose "
    "fell increased decreased reached highest lowest between compared average total the of "
    "in to and by from about more than"
).split()


def _summary(rng: random.Random, year: int, value: float) -> str:
    words = rng.choices(WORDS, k=rng.randint(20, 45))
    words[rng.randrange(len(words))] = str(year)
    words[rng.randrange(len(words))] = f"{value:.1f}"
    return " ".join(words) + " ."


def write_chart_to_text(folder: Path, n: int, seed: int = 0) -> tuple[Path, Path]:
    rng = random.Random(seed)
    preds, refs = [], []
    for i in range(n):
        year, value = rng.randint(1990, 2021), rng.uniform(1, 500)
        records = " ".join(
            f"Year|{year - k}|x|line_chart Sales|{value + k:.1f}|y|line_chart" for k in range(6)
        )
        refs.append(
            {
                "id": f"statista/{i}",
                "target": _summary(rng, year, value),
                "records": records,
                "title": f"Sales of product {i % 97} from {year - 5} to {year}",
                "chart_type": rng.choice(["line", "bar", "pie"]),
                "complexity": rng.choice(["simple", "complex"]),
                "split": "test",
            }
        )
        preds.append({"id": f"statista/{i}", "prediction": _summary(rng, year, value)})
    p, r = folder / "c2t_pred.jsonl", folder / "c2t_ref.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in preds))
    r.write_text("".join(json.dumps(x) + "\n" for x in refs))
    return p, r


def _chart(rng: random.Random, jitter: float) -> dict:
    blocks = []
    for k in range(rng.randint(8, 20)):
        x, y = rng.randint(0, 600), rng.randint(0, 400)
        text = rng.choice(WORDS)
        if jitter:
            x, y = x + rng.randint(-3, 3), y + rng.randint(-2, 2)
            text = text[:-1] if rng.random() < 0.2 else text
        blocks.append({"id": k, "bb": {"x0": x, "y0": y, "width": 40, "height": 12}, "text": text})
    names = ["A", "B", "C"][: rng.randint(1, 3)]
    cats = [f"cat {c}" for c in range(rng.randint(3, 12))]
    series = [
        {
            "name": n,
            "data": [
                {"x": c, "y": round(rng.uniform(1, 100) * (1 + jitter * rng.uniform(-0.1, 0.1)), 2)}
                for c in cats
            ],
        }
        for n in names
    ]
    bars = [
        {"x0": 20 * i, "y0": 100, "width": 15, "height": 50 + i}
        for i in range(len(cats) * len(names))
    ]
    return {
        "task1": {"output": {"chart_type": "Grouped vertical bar"}},
        "task2": {"output": {"text_blocks": blocks}},
        "task6": {"output": {"data series": series, "visual elements": {"bars": bars}}},
    }


def write_chart_info(folder: Path, n: int, seed: int = 0) -> tuple[Path, Path]:
    gt, pred = folder / "gt", folder / "pred"
    gt.mkdir()
    pred.mkdir()
    for i in range(n):
        truth = _chart(random.Random(seed * 100003 + i), 0.0)
        guess = _chart(random.Random(seed * 100003 + i), 1.0)  # same layout, jittered
        (gt / f"{i}.json").write_text(json.dumps(truth))
        (pred / f"{i}.json").write_text(json.dumps(guess))
    return pred, gt


def timed_score(args: list[str]) -> dict:
    start, cpu0 = time.perf_counter(), harness.cpu_seconds()
    try:
        metrics = harness.child_json("chartjax.tools.score", args)
    except harness.ChildError as e:
        raise SystemExit(f"chartjax.tools.score failed: {e.stderr}") from e
    return {
        "wall_s": round(time.perf_counter() - start, 2),
        "cpu_s": round(harness.cpu_seconds() - cpu0, 2),  # the scoring child's
        "metrics": metrics,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--images", type=int, default=1_000)
    harness.add_out_flag(parser)
    args = parser.parse_args(argv)
    run = harness.Run("score", vars(args), ("sacrebleu", "rouge-score", "nltk", "scipy"))
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        p, r = write_chart_to_text(tmp, args.examples)
        res = timed_score(
            [
                "--task",
                "chart_to_text",
                "--predictions",
                str(p),
                "--references",
                str(r),
                "--out",
                str(tmp / "c2t.json"),
            ]
        )
        out["chart_to_text"] = {
            "wall_s": res["wall_s"],
            "goal_s": 60,
            "metrics": {k: round(v, 4) for k, v in res["metrics"].items()},
        }
        pred, gt = write_chart_info(tmp, args.images)
        for task in ("chart_info_task2", "chart_info_task6b", "chart_info_task6a"):
            extra = ["--compat", "chartinfo2020"] if task.endswith("6a") else []  # no image sizes
            res = timed_score(
                [
                    "--task",
                    task,
                    "--predictions",
                    str(pred),
                    "--references",
                    str(gt),
                    "--out",
                    str(tmp / f"{task}.json"),
                    *extra,
                ]
            )
            out[task] = {
                "wall_s": res["wall_s"],
                "goal_s": 30,
                "metrics": {k: round(v, 4) for k, v in res["metrics"].items()},
            }
    harness.emit(run.report(out), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
