"""CHART-Info tasks 2, 4, 5 and 6a as text: the model writes the official output as lines.

Pix2Struct writes each task's output as text; `parse` turns it back into the official per-image
output (the schema `metrics.chart_info` and `chartjax-score --task chart_info_task<N>` read).
Hand-written: the line grammar is ours (no library or paper defines one).

Coordinates are quantized to a 1000-step grid of the image size: q = round(v * 999 / size),
x over the width, y over the height, clamped to 0..999 (annotation points outside the image
clamp); back: v = q * size / 999 (exact at 0 and at the size; at most size / 1998 px off).
Lines end with "\\n"; items are written in reading order of their top-left point (top to
bottom, then left to right):
* task2 (text blocks): `y0 x0 y1 x1 text` (text on one line: wrapped text joined by spaces,
  which the metric's sanitizing does as well).
* task4 (axes): `<axis> <text-block id> y x` with axis x, y, x2, y2 (x-axis, y-axis, x-axis-2,
  y-axis-2) and the tick point.
* task5 (legend): `<text-block id> y0 x0 y1 x1`, the legend patch's box.
* task6a (plot elements): `bar y0 x0 y1 x1`; `box` then y x of min, first_quartile, median,
  third_quartile, max; `line y x y x ...` (one line per series, its points in order);
  `point y x` (scatter).
Tasks 4 and 5 get, as the competition gives them (their input holds tasks 2-3's output), the
text blocks they may name, rendered as the header `id: text | ...` (task 4 the tick labels,
task 5 the legend labels; every block when the chart annotates no roles).

The grammar is strict: a line that is not exactly one item (wrong keyword, a non-integer, a
value over 999, y1 < y0 or x1 < x0, a box without 10 numbers, an odd count of line numbers) is
malformed. Malformed lines are left out of the prediction and counted: `num_malformed_items`
(lines), `num_partially_parsed` (images with good and malformed lines) and `num_unparseable`
(non-empty outputs without one good line: scored as an empty prediction). Empty lines are
skipped; `num_unknown_ids` counts task 4/5 items naming a block not in the header.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import gin

from chartjax.data import sources
from chartjax.tasks import chart_info, chart_info_tables, seq2seq
from chartjax.tasks.task import Task

MODES = ("task2", "task4", "task5", "task6a")
GRID = 1000
AXES = {"x-axis": "x", "y-axis": "y", "x-axis-2": "x2", "y-axis-2": "y2"}
_AXIS_NAMES = {v: k for k, v in AXES.items()}
BOX_ORDER = ("min", "first_quartile", "median", "third_quartile", "max")
ELEMENT_KINDS = ("bars", "boxplots", "lines", "scatter points")
_INT = re.compile(r"\d+")
_TASK2 = re.compile(r"(\d+) (\d+) (\d+) (\d+)(?: (.*))?")


def quantize(value: float, size: float) -> int:
    return min(GRID - 1, max(0, math.floor(float(value) * (GRID - 1) / size + 0.5)))


def dequantize(q: int, size: float) -> float:
    return q * size / (GRID - 1)


# ------------------------------------------------------------------ serializers ------------


def _box_corners(bb: Mapping[str, Any]) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) of an official `bb` or `polygon` (its bounding box)."""
    if "x1" in bb:  # polygon corners
        xs = [float(bb[f"x{i}"]) for i in range(4)]
        ys = [float(bb[f"y{i}"]) for i in range(4)]
        return min(xs), min(ys), max(xs), max(ys)
    x0, y0 = float(bb["x0"]), float(bb["y0"])
    return x0, y0, x0 + float(bb["width"]), y0 + float(bb["height"])


def _qbox(bb, size) -> list[int]:
    """[y0, x0, y1, x1] on the grid."""
    w, h = size
    x0, y0, x1, y1 = _box_corners(bb)
    return [quantize(y0, h), quantize(x0, w), quantize(y1, h), quantize(x1, w)]


def _qpoint(pt, size) -> list[int]:
    w, h = size
    return [quantize(pt["y"], h), quantize(pt["x"], w)]


def _lines(items: list[tuple[list[int], str]]) -> str:
    """Items (sort key: the first y, x on the grid) -> the target text, in reading order."""
    return "\n".join(text for _, text in sorted(items, key=lambda it: it[0]))


def _ints(values: Sequence[int]) -> str:
    return " ".join(str(v) for v in values)


def serialize(mode: str, output: Mapping[str, Any] | None, size: tuple[float, float]) -> str:
    """The target text of one chart's official task output (`size` = (width, height))."""
    output = output or {}
    items: list[tuple[list[int], str]] = []
    if mode == "task2":
        for b in output.get("text_blocks") or []:
            box = _qbox(b["polygon"] if "polygon" in b else b["bb"], size)
            text = chart_info_tables.block_text(b.get("text") or "")
            items.append((box, f"{_ints(box)} {text}" if text else _ints(box)))
    elif mode == "task4":
        for axis, ticks in (output.get("axes") or {}).items():
            if axis not in AXES:
                continue  # "_x-tick-type" and the like are not ticks
            for t in ticks or []:
                if t.get("id") is None:
                    continue  # the metric drops id-less ticks too
                pt = _qpoint(t["tick_pt"], size)
                items.append((pt, f"{AXES[axis]} {int(t['id'])} {_ints(pt)}"))
    elif mode == "task5":
        for p in output.get("legend_pairs") or []:
            box = _qbox(p["bb"], size)
            items.append((box, f"{int(p['id'])} {_ints(box)}"))
    elif mode == "task6a":
        ve = output.get("visual elements") or {}
        for b in ve.get("bars") or []:
            box = _qbox(b, size)
            items.append((box, f"bar {_ints(box)}"))
        for i, b in enumerate(ve.get("boxplots") or []):
            missing = [s for s in BOX_ORDER if s not in b]
            if missing:
                raise ValueError(f"task6 visual elements: boxplots[{i}] has no {missing}")
            pts = [v for s in BOX_ORDER for v in _qpoint(b[s], size)]
            items.append((pts, f"box {_ints(pts)}"))
        for line in ve.get("lines") or []:
            pts = [v for p in line for v in _qpoint(p, size)]
            if pts:
                items.append((pts, f"line {_ints(pts)}"))
        scatter = ve.get("scatter points") or []
        for p in (q for group in scatter for q in (group if isinstance(group, list) else [group])):
            pt = _qpoint(p, size)
            items.append((pt, f"point {_ints(pt)}"))
    else:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    return _lines(items)


# ------------------------------------------------------------------ parser -----------------


@dataclasses.dataclass
class Parsed:
    """One output text read back: the official task output, its good and malformed lines."""

    output: dict
    items: int = 0
    malformed: list[str] = dataclasses.field(default_factory=list)
    unknown_ids: int = 0


def _grid_ints(parts: Sequence[str]) -> list[int] | None:
    if not all(_INT.fullmatch(p) for p in parts):
        return None
    values = [int(p) for p in parts]
    return values if all(v < GRID for v in values) else None


def _bb(q: Sequence[int], size) -> dict | None:
    """Grid [y0, x0, y1, x1] -> an official bb; None when the box is inverted."""
    y0, x0, y1, x1 = q
    if y1 < y0 or x1 < x0:
        return None
    w, h = size
    px0, py0 = dequantize(x0, w), dequantize(y0, h)
    return {
        "x0": px0,
        "y0": py0,
        "width": dequantize(x1, w) - px0,
        "height": dequantize(y1, h) - py0,
    }


def _pt(q: Sequence[int], size) -> dict:
    return {"x": dequantize(q[1], size[0]), "y": dequantize(q[0], size[1])}


def _empty(mode: str) -> dict:
    if mode == "task2":
        return {"text_blocks": []}
    if mode == "task4":
        return {"axes": {"x-axis": [], "y-axis": []}}
    if mode == "task5":
        return {"legend_pairs": []}
    return {"visual elements": {k: [] for k in ELEMENT_KINDS}}


def _item(mode: str, line: str, size, n: int) -> tuple[str, Any] | None:
    """(where it goes, the official item) of one line, or None when it is malformed."""
    if mode == "task2":
        m = _TASK2.fullmatch(line)
        q = m and _grid_ints(m.groups()[:4])
        bb = q and _bb(q, size)
        return bb and ("text_blocks", {"id": n, "bb": bb, "text": m.group(5) or ""})
    parts = line.split(" ")
    if mode == "task4":
        axis = _AXIS_NAMES.get(parts[0])
        q = axis and len(parts) == 4 and _INT.fullmatch(parts[1]) and _grid_ints(parts[2:])
        return q and (axis, {"id": int(parts[1]), "tick_pt": _pt(q, size)})
    if mode == "task5":
        q = len(parts) == 5 and _INT.fullmatch(parts[0]) and _grid_ints(parts[1:])
        bb = q and _bb(q, size)
        return bb and ("legend_pairs", {"id": int(parts[0]), "bb": bb})
    kind, q = parts[0], _grid_ints(parts[1:])
    if not q:
        return None
    if kind == "bar" and len(q) == 4:
        bb = _bb(q, size)
        return bb and ("bars", bb)
    if kind == "box" and len(q) == 10:
        return "boxplots", {s: _pt(q[2 * i : 2 * i + 2], size) for i, s in enumerate(BOX_ORDER)}
    if kind == "line" and len(q) % 2 == 0:
        return "lines", [_pt(q[i : i + 2], size) for i in range(0, len(q), 2)]
    if kind == "point" and len(q) == 2:
        return "scatter points", _pt(q, size)
    return None


def parse(mode: str, text: str, size: tuple[float, float], ids: Sequence[int] = ()) -> Parsed:
    """A model output -> the official task output (module docstring: the grammar). `ids`: the
    text-block ids the header offered (tasks 4, 5), for `unknown_ids`."""
    out = Parsed(_empty(mode))
    known = set(ids)
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        got = _item(mode, line, size, out.items)
        if not got:
            out.malformed.append(line)
            continue
        key, item = got
        out.items += 1
        if mode == "task4":
            out.output["axes"].setdefault(key, []).append(item)
        elif mode == "task6a":
            out.output["visual elements"][key].append(item)
        else:
            out.output[key].append(item)
        if mode in ("task4", "task5") and item["id"] not in known:
            out.unknown_ids += 1
    return out


def parse_counts(parsed: Sequence[Parsed], texts: Sequence[str]) -> dict[str, int]:
    return {
        "num_items": sum(p.items for p in parsed),
        "num_malformed_items": sum(len(p.malformed) for p in parsed),
        "num_partially_parsed": sum(bool(p.items and p.malformed) for p in parsed),
        "num_unparseable": sum(not p.items and bool(t.strip()) for p, t in zip(parsed, texts)),
        "num_unknown_ids": sum(p.unknown_ids for p in parsed),
    }


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
        return [
            {
                "id": example["id"],
                "prompt": header(blocks),
                "target": serialize(mode, gt, size),
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
    import tensorflow_datasets as tfds

    task = "6" if mode == "task6a" else mode[-1]
    ds = tfds.builder_from_directory(builder_dir).as_dataset(
        split=split, shuffle_files=False, decoders={"image": tfds.decode.SkipDecoding()}
    )
    ds = ds.map(lambda ex: {"has": ex[f"has_task{task}"], "ve": ex["visual_elements_json"]})
    return sum(
        not ex["has"] or (mode == "task6a" and not ex["ve"]) for ex in ds.as_numpy_iterator()
    )


# ------------------------------------------------------------------ scoring ----------------


def official_key(mode: str) -> str:
    return "task6" if mode == "task6a" else mode


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
    """`python -m chartjax.tasks.chart_info_text --predictions P.jsonl --out DIR`."""
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


@gin.configurable("chart_info_text_task")
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
