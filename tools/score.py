"""chartjax-score: score prediction files against references and write metrics.json (+ a PNG).

    chartjax-score --task chartqa --predictions predictions.jsonl --references refs.jsonl \\
        --out metrics.json
    chartjax-score --task chart_info_task4 --predictions pred_json/ --references gt_json/ \\
        --images images/ --compat icdar2019 --out metrics.json

Flags as DESIGN.md §8. Text tasks read ``predictions.jsonl`` (``{"id", "prediction", "target"?}``)
and ``references.jsonl`` (``{"id", "target", ...}``, extra fields ``figure_type``,
``question_id``, ``chart_type``, ``reasoning_types``, ``complexity``, ``split``, ``explanation``,
``records``, ``title`` feed breakdowns and metrics) or a TFDS split ``tfds:<name>[/<config>]:<split>``;
without ``--references`` the predictions' own targets are used. CHART-Info tasks read folders of
official per-image JSON (``<id>.json``, nested folders allowed: the id is the relative path
without ``.json``). Ids must match: a missing prediction is an error unless ``--allow_missing``
(then it is scored as wrong and counted in ``num_missing``); an extra prediction always is.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from chartjax.metrics import chart_info, chartqa, report, tables
from chartjax.metrics.chart_to_text import chart_to_text_scores
from chartjax.metrics.chartcheck import chartcheck_scores, explanation_scores, parse_matcha
from chartjax.metrics.figureqa import figureqa_scores
from chartjax.metrics.scores import Scores

TEXT_TASKS = ("figureqa", "chartcheck", "chart_to_text", "deplot", "chartqa")
CHART_INFO_TASKS = tuple(f"chart_info_task{k}" for k in ("1", "2", "3", "4", "5", "6a", "6b"))
TASKS = TEXT_TASKS + CHART_INFO_TASKS


class ScoreError(Exception):
    """Bad input: the message names the file, field or ids."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="chartjax-score", description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True, choices=TASKS)
    p.add_argument("--predictions", required=True, help="predictions.jsonl or a JSON folder")
    p.add_argument(
        "--references", help="references.jsonl, a JSON folder or tfds:<name>[/<config>]:<split>"
    )
    p.add_argument(
        "--out", required=True, help="metrics.json to write (a .png is written beside it)"
    )
    p.add_argument("--compat", default="spec", choices=chart_info.COMPAT_MODES)
    p.add_argument("--images", help="image folder (CHART-Info tasks 4 and 6a: image sizes)")
    p.add_argument(
        "--allow_missing", action="store_true", help="score missing predictions as wrong"
    )
    p.add_argument("--data_dir", help="TFDS data_dir for tfds: references")
    p.add_argument("--bertscore_model", help="local model directory for BERTScore")
    p.add_argument("--bleurt_checkpoint", help="local BLEURT checkpoint directory (PyTorch port)")
    p.add_argument(
        "--ppl_model", help="local causal LM directory for perplexity (e.g. gpt2-medium)"
    )
    return p.parse_args(argv)


def _sample(ids) -> str:
    ids = sorted(ids)
    return ", ".join(map(repr, ids[:5])) + (f" (and {len(ids) - 5} more)" if len(ids) > 5 else "")


def align_ids(ref_ids, pred_ids, *, allow_missing: bool, what: str) -> set:
    """Checks the id sets; returns the missing ids (allowed only with allow_missing)."""
    extra = set(pred_ids) - set(ref_ids)
    if extra:
        raise ScoreError(f"{len(extra)} {what} id(s) not in the references: {_sample(extra)}")
    missing = set(ref_ids) - set(pred_ids)
    if missing and not allow_missing:
        raise ScoreError(
            f"{len(missing)} reference id(s) have no prediction: {_sample(missing)} "
            "(--allow_missing scores them as wrong)"
        )
    return missing


# --------------------------------------------------------------------------------------------
# Reading inputs
# --------------------------------------------------------------------------------------------


def read_rows(path: str, what: str) -> dict[str, dict]:
    rows: dict[str, dict] = {}
    try:
        loaded = report.read_jsonl(path)
    except OSError as err:
        raise ScoreError(f"{what}: cannot read {path}: {err}") from err
    for lineno, row in enumerate(loaded, start=1):
        if "id" not in row:
            raise ScoreError(f"{path}: row {lineno}: no 'id' field")
        key = str(row["id"])
        if key in rows:
            raise ScoreError(f"{path}: duplicate id {key!r}")
        rows[key] = row
    return rows


def read_json_dir(path: str, what: str) -> dict[str, Any]:
    root = Path(path)
    if not root.is_dir():
        raise ScoreError(f"{what}: {path} is not a folder of <id>.json files")
    out = {}
    for file in sorted(root.rglob("*.json")):
        try:
            out[file.relative_to(root).with_suffix("").as_posix()] = json.loads(
                file.read_text("utf-8")
            )
        except (OSError, ValueError) as err:
            raise ScoreError(f"{file}: invalid JSON: {err}") from err
    if not out:
        raise ScoreError(f"{what}: no .json file under {path}")
    return out


def image_sizes(folder: str, ids) -> dict[str, tuple[int, int]]:
    from PIL import Image

    root, sizes = Path(folder), {}
    for image_id in ids:
        for ext in (".png", ".jpg", ".jpeg"):
            file = root / f"{image_id}{ext}"
            if file.is_file():
                with Image.open(file) as im:  # reads the header only
                    sizes[image_id] = im.size
                break
    return sizes


def tfds_rows(examples, task: str, split: str) -> dict[str, dict]:
    """Reference rows from TFDS numpy examples of the chartjax builders."""

    def s(v):
        return v.decode("utf-8") if isinstance(v, bytes) else v

    rows = {}
    for ex in examples:
        key = s(ex["id"])
        if task == "figureqa":
            row = {
                "target": int(ex["answer"]),
                "figure_type": s(ex["figure_type"]),
                "question_id": int(ex["question_id"]),
            }
        elif task == "chartcheck":
            row = {
                "target": ("FALSE", "TRUE")[int(ex["label"])],  # label 1 = supports = TRUE
                "explanation": s(ex["explanation"]),
                "chart_type": s(ex["chart_type"]),
                "reasoning_types": [s(r) for r in ex["reasoning_types"]],
            }
        elif task == "chart_to_text":
            records = ex["table"]["records"] if "table" in ex else ex.get("ocr_data", b"")
            row = {
                "target": s(ex["summary"]),
                "title": s(ex["title"]),
                "records": s(records),
                "chart_type": s(ex["chart_type"]),
                "complexity": ("simple", "complex")[int(ex["complexity"])],
                "split": split,
            }
        else:
            raise ScoreError(f"--references tfds: is not supported for --task {task}")
        rows[key] = {"id": key, **row}
    return rows


def load_tfds(spec: str, task: str, data_dir: str | None) -> tuple[dict[str, dict], str]:
    body = spec[len("tfds:") :]
    if ":" not in body:
        raise ScoreError(f"--references {spec}: expected tfds:<name>[/<config>]:<split>")
    name, split = body.rsplit(":", 1)
    import importlib

    import tensorflow_datasets as tfds  # only on this path: chartjax.metrics never imports tf

    try:  # registers the chartjax builder under its name
        importlib.import_module(f"tfds_builders.{name.split('/')[0]}")
    except ImportError:
        pass
    builder = tfds.builder(name, data_dir=data_dir)
    ds = builder.as_dataset(split=split, decoders={"image": tfds.decode.SkipDecoding()})
    return tfds_rows(tfds.as_numpy(ds), task, split), split


# --------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------


def _field(refs: list[dict], name: str):
    return [r[name] for r in refs] if refs and all(name in r for r in refs) else None


def score_text(args, preds: dict[str, dict], refs: dict[str, dict]) -> tuple[Scores, int]:
    missing = align_ids(refs, preds, allow_missing=args.allow_missing, what="prediction")
    ids = list(refs)
    rows = [refs[i] for i in ids]
    for i, row in zip(ids, rows):
        if "target" not in row:
            raise ScoreError(f"reference {i!r}: no 'target' field")
    outputs = ["" if i in missing else str(preds[i].get("prediction", "")) for i in ids]
    targets = [r["target"] for r in rows]
    task = args.task
    if task == "figureqa":
        raw = [None if i in missing else preds[i].get("prediction") for i in ids]
        scores = figureqa_scores(
            raw,
            targets,
            figure_types=_field(rows, "figure_type"),
            question_ids=_field(rows, "question_id"),
        )
    elif task == "chartcheck":
        # MatCha's targets are Yes/No: use its parser when every output starts that way.
        matcha = all(parse_matcha(o) is not None for o in outputs if o) and any(outputs)
        parser = "matcha" if matcha else "flan_t5"
        scores = chartcheck_scores(
            outputs,
            targets,
            parser=parser,
            chart_types=_field(rows, "chart_type"),
            reasoning_types=_field(rows, "reasoning_types"),
        )
        gold_expl = _field(rows, "explanation")
        if gold_expl is not None:
            expl = [preds.get(i, {}).get("explanation", o) for i, o in zip(ids, outputs)]
            scores.update(
                explanation_scores(
                    expl,
                    gold_expl,
                    bertscore_model=args.bertscore_model,
                    bleurt_checkpoint=args.bleurt_checkpoint,
                )
            )
    elif task == "chart_to_text":
        groups = {k: v for k in ("split", "chart_type", "complexity") if (v := _field(rows, k))}
        scores = chart_to_text_scores(
            outputs,
            targets,
            records=_field(rows, "records"),
            titles=_field(rows, "title"),
            groups=groups,
            bleurt_checkpoint=args.bleurt_checkpoint,
            ppl_model=args.ppl_model,
        )
    elif task == "deplot":
        scores = tables.rms(outputs, targets).update(tables.rnss(outputs, targets))
    else:
        scores = chartqa.relaxed_accuracy(outputs, targets)
    scores.metrics["num_missing"] = len(missing)
    return scores, len(ids)


def score_chart_info(args) -> tuple[Scores, int]:
    if args.references is None or args.references.startswith("tfds:"):
        raise ScoreError("CHART-Info tasks need --references: the folder of ground-truth JSON")
    gt = read_json_dir(args.references, "--references")
    pred = read_json_dir(args.predictions, "--predictions")
    missing = align_ids(gt, pred, allow_missing=args.allow_missing, what="prediction")
    k = args.task.removeprefix("chart_info_task")
    sizes = image_sizes(args.images, gt) if args.images else None
    if k in ("4",) and sizes is None:
        raise ScoreError("chart_info_task4 needs --images (image sizes set the thresholds)")
    fn = {
        "1": chart_info.task1,
        "2": chart_info.task2,
        "3": chart_info.task3,
        "5": chart_info.task5,
        "6b": chart_info.task6b,
    }
    try:
        if k == "4":
            scores = chart_info.task4(gt, pred, sizes, compat=args.compat)
        elif k == "6a":
            scores = chart_info.task6a(gt, pred, sizes, compat=args.compat)
        else:
            scores = fn[k](gt, pred, compat=args.compat)
    except ValueError as err:
        raise ScoreError(f"{args.task}: {err}") from err
    scores.metrics["num_missing"] = len(missing)
    scores.libraries["chart_info"] = f"compat={args.compat}"
    return scores, len(gt)


def _plot(metrics_obj: Mapping[str, Any], png: Path) -> None:
    breakdowns = dict(metrics_obj["breakdowns"])
    metric = next(
        (
            m
            for m in ("accuracy", "f1", "score", "bleu")
            for g in breakdowns.values()
            for e in g.values()
            if m in e
        ),
        None,
    )
    if metric is None:  # no per-group results: plot the bounded headline metrics instead
        values = {k: v for k, v in metrics_obj["metrics"].items() if report.is_bounded(k)}
        if not values:
            return
        breakdowns, metric = {"metrics": {k: {"value": v} for k, v in values.items()}}, "value"
    report.plot_breakdown(breakdowns, png, metric=metric, title=metrics_obj["task"])


def _libraries(scores: Scores) -> dict[str, str]:
    libs = dict(scores.libraries)
    for pkg in ("numpy", "scipy", "nltk", "sacrebleu", "rouge-score", "editdistance"):
        try:
            libs.setdefault(pkg, version(pkg))
        except PackageNotFoundError:
            pass
    return libs


def run(args: argparse.Namespace) -> dict:
    split = "all"
    if args.task in CHART_INFO_TASKS:
        scores, n = score_chart_info(args)
    else:
        preds = read_rows(args.predictions, "--predictions")
        if args.references is None:
            refs = {
                k: {"id": k, **({"target": r["target"]} if "target" in r else {})}
                for k, r in preds.items()
            }
        elif args.references.startswith("tfds:"):
            refs, split = load_tfds(args.references, args.task, args.data_dir)
        else:
            refs = read_rows(args.references, "--references")
        splits = {str(r["split"]) for r in refs.values() if "split" in r}
        split = next(iter(splits)) if len(splits) == 1 else split
        scores, n = score_text(args, preds, refs)
    obj = report.build_metrics(
        task=args.task,
        split=split,
        step=None,
        num_examples=n,
        metrics=scores.metrics,
        breakdowns=scores.breakdowns,
        unavailable=scores.unavailable,
        provenance=report.provenance(libraries=_libraries(scores)),
    )
    report.write_metrics(args.out, obj)
    _plot(obj, Path(args.out).with_suffix(".png"))
    return obj


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        obj = run(args)
    except (ScoreError, ValueError) as err:
        print(f"chartjax-score: error: {err}", file=sys.stderr)
        return 2
    if obj["metrics"].get("num_missing"):
        print(
            f"chartjax-score: {obj['metrics']['num_missing']} missing prediction(s) scored as wrong",
            file=sys.stderr,
        )
    print(json.dumps(obj["metrics"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
