"""CHART-Info tasks 2, 4, 5 and 6a as text: Pix2Struct writes the official output as lines.

The grammar and the coordinate grid are lines.py's. Here: the records (one per chart
that annotates the task: the target lines, the header, the official ground truth and image size
in `meta`), scoring (every output parsed, scored with the official task metric of
`metrics.chart_info`, parse counts added), and the export of the official per-image prediction
JSON (`python -m chartjax.tasks.chart_info.text --predictions P.jsonl --out DIR`) that
`chartjax-score --task chart_info_task<N>` reads. Tasks 4 and 5 get, as the competition gives
them (their input holds tasks 2-3's output), the text blocks they may name, rendered as the
header `id: text | ...` (task 4 the tick labels, task 5 the legend labels; every block when the
chart annotates no roles).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import gin

from chartjax.data import sources
from chartjax.tasks import chart_info
from chartjax.tasks.chart_info import tables as chart_info_tables
from chartjax.tasks.chart_info.lines import MODES, official_key, parse, parse_counts, serialize
from chartjax.tasks.core import seq2seq
from chartjax.tasks.core.task import Task

# ------------------------------------------------------------------ records ----------------

KEYS = (
    "id",
    "image",
    "chart_type_raw",
    *(f"has_task{k}" for k in (2, 3, 4, 5, 6)),
    "text_blocks.id",
    "text_blocks.text",
    "text_blocks.bbox",
    "text_blocks.polygon",
    "text_roles.id",
    "text_roles.role",
    "axis_ticks.axis",
    "axis_ticks.id",
    "axis_ticks.tick_pt",
    "legend_pairs.id",
    "legend_pairs.bb",
    "visual_elements_json",
)
_HEADER_ROLE = {"task4": "tick_label", "task5": "legend_label"}


def _bbox_dict(b: Sequence[float]) -> dict:
    return dict(zip(("x0", "y0", "width", "height"), (float(v) for v in b)))


def ground_truth(example: dict, mode: str, polygons: bool) -> dict | None:
    """The official task output of a TFDS example (None when it does not annotate the task);
    text blocks as `polygon` (PMC, `polygons`) or `bb` (2019)."""
    task = "6" if mode == "task6a" else mode[-1]
    if not example[f"has_task{task}"]:
        return None
    if mode == "task2":
        blocks = []
        for i, t, b, p in zip(
            example["text_blocks.id"],
            example["text_blocks.text"],
            example["text_blocks.bbox"],
            example["text_blocks.polygon"],
        ):
            geo = (
                {
                    "polygon": {
                        f"{a}{j}": float(p[2 * j + (a == "y")]) for j in range(4) for a in "xy"
                    }
                }
                if polygons
                else {"bb": _bbox_dict(b)}
            )
            blocks.append({"id": int(i), "text": t, **geo})
        return {"text_blocks": blocks}
    if mode == "task4":
        axes: dict[str, list] = {}
        for a, i, pt in zip(
            example["axis_ticks.axis"], example["axis_ticks.id"], example["axis_ticks.tick_pt"]
        ):
            axes.setdefault(a, []).append(
                {"id": int(i), "tick_pt": {"x": float(pt[0]), "y": float(pt[1])}}
            )
        return {"axes": axes}
    if mode == "task5":
        return {
            "legend_pairs": [
                {"id": int(i), "bb": _bbox_dict(b)}
                for i, b in zip(example["legend_pairs.id"], example["legend_pairs.bb"])
            ]
        }
    ve = example["visual_elements_json"]
    return {"visual elements": json.loads(ve)} if ve else None


def header_blocks(example: dict, mode: str) -> list[tuple[int, str]]:
    """(id, text) of the blocks the header offers (tasks 4, 5), in reading order."""
    if mode not in _HEADER_ROLE:
        return []
    roles = dict(zip(example["text_roles.id"], example["text_roles.role"]))
    blocks = list(
        zip(example["text_blocks.id"], example["text_blocks.text"], example["text_blocks.bbox"])
    )
    if example["has_task3"] and roles:
        blocks = [b for b in blocks if roles.get(b[0]) == _HEADER_ROLE[mode]]
    blocks.sort(key=lambda b: (b[2][1], b[2][0]))
    return [(int(i), chart_info_tables.block_text(t)) for i, t, _ in blocks]


def header(blocks: Sequence[tuple[int, str]]) -> str:
    return " | ".join(f"{i}: {t}" for i, t in blocks)


def make_expand(mode: str, polygons: bool):
    def expand(example: dict) -> list[dict]:
        gt = ground_truth(example, mode, polygons)
        if gt is None:
            return []
        size = chart_info._image_size(example["image"])
        blocks = header_blocks(example, mode)
        try:
            target = serialize(mode, gt, size)
        except ValueError as e:
            raise ValueError(f"chart_info {example['id']!r}: {e}") from None
        return [
            {
                "id": example["id"],
                "prompt": header(blocks),
                "target": target,
                "meta": {
                    "size": list(size),
                    "gt": gt,
                    "chart_type_raw": example["chart_type_raw"],
                    "ids": [i for i, _ in blocks],
                },
            }
        ]

    return expand


def count_unannotated(builder_dir: str, split: str, mode: str) -> int:
    """Charts of `split` that do not annotate the task (6a: no visual elements)."""
    from chartjax.data import tfds_records

    task = "6" if mode == "task6a" else mode[-1]
    return sum(
        not ex[f"has_task{task}"] or (mode == "task6a" and not ex["visual_elements_json"])
        for ex in tfds_records.split_examples(builder_dir, split)
    )


# ------------------------------------------------------------------ scoring ----------------


def score(mode: str, texts: Sequence[str], records: Sequence[dict], compat: str):
    """Parses every output and scores it with the official task metric; (Scores, one extra
    dict per record: the official per-image prediction JSON and its malformed lines)."""
    from chartjax.metrics import chart_info as ci

    key = official_key(mode)
    parsed = [
        parse(mode, t, tuple(r["meta"]["size"]), r["meta"]["ids"]) for t, r in zip(texts, records)
    ]
    gt, pred, sizes = {}, {}, {}
    for p, r in zip(parsed, records):
        gt[r["id"]] = {
            "task1": {"output": {"chart_type": r["meta"]["chart_type_raw"]}},
            key: {"output": r["meta"]["gt"]},
        }
        pred[r["id"]] = {key: {"output": p.output}}
        sizes[r["id"]] = tuple(r["meta"]["size"])
    if mode in ("task4", "task6a"):
        scores = getattr(ci, mode)(gt, pred, sizes, compat=compat)
    else:
        scores = getattr(ci, mode)(gt, pred, compat=compat)
    scores.metrics.update(parse_counts(parsed, texts))
    scores.libraries["chart_info"] = f"compat={compat}"
    extra = [
        {"official": pred[r["id"]], "num_items": p.items, "malformed": p.malformed}
        for p, r in zip(parsed, records)
    ]
    return scores, extra


def write_json_dir(rows: Sequence[Mapping[str, Any]], out_dir: str) -> list[str]:
    """The official per-image prediction files `<out_dir>/<id>.json` of predictions.jsonl rows
    (their `official` field), for `chartjax-score --task chart_info_task<N> --predictions`."""
    paths = []
    for row in rows:
        path = os.path.join(out_dir, *f"{row['id']}.json".split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(row["official"], f)
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m chartjax.tasks.chart_info.text --predictions P.jsonl --out DIR`."""
    import argparse

    from chartjax.metrics import prediction_files

    ap = argparse.ArgumentParser(description=write_json_dir.__doc__)
    ap.add_argument("--predictions", required=True, help="an evaluation's predictions.jsonl")
    ap.add_argument("--out", required=True, help="folder for the <id>.json files")
    args = ap.parse_args(argv)
    numbered = list(prediction_files.iter_jsonl(args.predictions))
    bad = [n for n, r in numbered if not isinstance(r.get("official"), dict)]
    if bad:
        raise SystemExit(
            f"{args.predictions}: line {bad[0]} has no 'official' object (not a CHART-Info "
            "task 2/4/5/6a evaluation)"
        )
    print(f"{len(write_json_dir([r for _, r in numbered], args.out))} files in {args.out}")


# ------------------------------------------------------------------ the task ---------------


@gin.configurable("chart_info_text_task", module="chartjax.tasks.chart_info_text")
def make_task(
    data_dir: str = "~/tensorflow_datasets",
    mode: str = "task2",
    config: str = "synthetic_2019",
    train_split: str = "train[:95%]",
    eval_splits: Sequence[str] = ("train[95%:]",),
    compat: str = "spec",
    shuffle_buffer: int = 10_000,
    features: seq2seq.Features | None = None,
    decoding: seq2seq.Decoding | None = None,
) -> Task:
    """CHART-Info task `mode` (task2, task4, task5, task6a) as text over `chart_info/<config>`
    (only `train` is built: the default holds out its last 5 %)."""
    from chartjax.metrics.chart_info import check_compat

    check_compat(compat)
    if mode not in MODES:
        raise ValueError(f"chart_info_text_task.mode must be one of {MODES}, not {mode!r}")
    if config not in chart_info.CLASSES:
        raise ValueError(f"chart_info_text_task.config must be one of {sorted(chart_info.CLASSES)}")
    dataset = f"chart_info/{config}"
    skipped: dict[str, int] = {}

    def score_fn(texts, records, split):
        if not records:
            raise ValueError(f"chart_info {mode}: split {split!r} has no annotated chart")
        scores, extra = score(mode, texts, records, compat)
        if split not in skipped:  # the data does not change between evaluations
            skipped[split] = count_unannotated(
                sources.tfds_builder_dir(dataset, data_dir), split, mode
            )
        scores.metrics["num_unannotated"] = skipped[split]
        return scores, extra

    return seq2seq.make_task(
        name=f"chart_info_{mode}",
        dataset=dataset,
        data_dir=data_dir,
        train_split=train_split,
        eval_splits=tuple(eval_splits),
        field_keys=KEYS,
        expand=make_expand(mode, polygons=config == "pmc_2020"),
        score_fn=score_fn,
        features=features or seq2seq.Features(),
        decoding=decoding or seq2seq.Decoding(),
        shuffle_buffer=shuffle_buffer,
        encoded_keys=("image",),
    )


if __name__ == "__main__":
    main()
