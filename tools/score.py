"""chartjax-score: score prediction files against references and write metrics.json (+ a PNG).

    chartjax-score --task chartqa --predictions predictions.jsonl --references refs.jsonl \\
        --out metrics.json
    chartjax-score --task chart_info_task4 --predictions pred_json/ --references gt_json/ \\
        --images images/ --compat icdar2019 --out metrics.json

Flags as docs/design.md §8. Text tasks read ``predictions.jsonl`` (``{"id", "prediction",
"target"?}``) and ``references.jsonl`` (``{"id", "target", ...}``, extra fields ``figure_type``,
``question_id``, ``chart_type``, ``reasoning_types``, ``complexity``, ``split``, ``explanation``,
``records``, ``title`` feed breakdowns and metrics) or a TFDS split ``tfds:<name>[/<config>]:<split>``;
without ``--references`` the predictions' own targets are used. CHART-Info tasks read folders of
official per-image JSON (``<id>.json``, nested folders allowed: the id is the relative path
without ``.json``). Ids must match: a missing prediction is an error unless ``--allow_missing``
(then it is scored as wrong in every metric and counted in ``num_missing``); an extra prediction
always is. A prediction that is not of the task's type (each task's FileScorer says what is: a
FigureQA ``1.0``, a JSONL row without ``prediction``) is an error naming the file and line,
unless ``--lenient`` (then it is scored as wrong, counted in ``num_invalid`` and listed in a
warning).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from chartjax import output_place, quiet
from chartjax.metrics import html_report, prediction_files, report
from chartjax.metrics.prediction_files import IdRows, PredictionFileError, located
from chartjax.metrics.scores import Scores
from chartjax.tasks import catalog
from chartjax.tasks.core import report_views
from chartjax.tasks.core.task import ScoreInputs

TASKS = tuple(catalog.SCORERS)


class ScoreError(Exception):
    """Bad input: the message names the file, field or ids."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="chartjax-score", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--task", required=True, choices=TASKS, help="whose metrics, as the task's paper defines"
    )
    p.add_argument("--predictions", required=True, help="predictions.jsonl or a JSON folder")
    p.add_argument(
        "--references", help="references.jsonl, a JSON folder or tfds:<name>[/<config>]:<split>"
    )
    p.add_argument(
        "--out", required=True, help="metrics.json to write (a .png is written beside it)"
    )
    p.add_argument(
        "--compat",
        default="spec",
        choices=sorted({m for s in catalog.SCORERS.values() for m in s.compat}),
        help="metric flavour of the tasks that have several (default spec)",
    )
    p.add_argument("--images", help="image folder (CHART-Info tasks 4 and 6a: image sizes)")
    p.add_argument(
        "--allow_missing",
        action="store_true",
        help="score missing predictions as wrong in every metric (counted in num_missing)",
    )
    p.add_argument(
        "--lenient",
        action="store_true",
        help="score predictions that are not of the task's type (e.g. 1.0 for a yes/no "
        "answer, a row without 'prediction') as wrong and count them (num_invalid) instead "
        "of stopping",
    )
    p.add_argument("--data_dir", help="TFDS data_dir for tfds: references")
    p.add_argument("--bertscore_model", help="local model directory for BERTScore")
    p.add_argument("--bleurt_checkpoint", help="local BLEURT checkpoint directory (PyTorch port)")
    p.add_argument(
        "--ppl_model", help="local causal LM directory for perplexity (e.g. gpt2-medium)"
    )
    p.add_argument(
        "--report",
        nargs="?",
        const="",
        metavar="HTML",
        help="also write an HTML report of metrics, plot and examples (default: report.html "
        "next to --out; thumbnails from --images <id>.png/.jpg/..., or the figure a task's "
        "id names: <image_index>.png of a question <image_index>/<question_index>)",
    )
    quiet.add_flag(p)
    return p.parse_args(argv)


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
    """Reference rows from TFDS numpy examples of the chartjax builders (the task's schema)."""
    reference_row = catalog.scorer(task).reference_row
    if reference_row is None:
        raise ScoreError(f"--references tfds: is not supported for --task {task}")
    rows = {}
    for ex in examples:
        key = ex["id"].decode("utf-8") if isinstance(ex["id"], bytes) else str(ex["id"])
        rows[key] = {"id": key, **reference_row(ex, split)}
    return rows


def load_tfds(spec: str, task: str, data_dir: str | None) -> tuple[dict[str, dict], str, dict]:
    """(reference rows, split, what the build says of the split for the provenance)."""
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
    from chartjax.data import tfds_records

    root = os.path.expanduser(data_dir or "~/tensorflow_datasets")  # TFDS's own default
    looked = os.path.join(root, name.split("/")[0])
    if not os.path.isdir(looked):  # else TFDS answers with its whole catalogue
        where = root if data_dir else f"{root}, the default data_dir (no --data_dir given)"
        raise ScoreError(
            f"--references {spec}: no build of {name.split('/')[0]!r} under {where} (looked for "
            f"{looked}): give its --data_dir, or build it with `tfds build "
            f"tfds_builders/{name.split('/')[0]} --data_dir={root} ...`"
        )
    try:
        builder = tfds.builder(name, data_dir=root)
    except Exception as e:  # a config or version the build lacks: TFDS's message, one line
        raise ScoreError(f"--references {spec}: {str(e).splitlines()[0]}") from None
    examples = tfds_records.split_examples(os.fspath(builder.data_path), split)
    provenance = catalog.data_provenance(task, os.fspath(builder.data_path), split)
    return tfds_rows(examples, task, split), split, provenance


# --------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------


def score(args, predictions: dict, references: dict) -> tuple[Scores, int]:
    """Checks the ids, then the task's own metric suite over the files."""
    scorer = catalog.scorer(args.task)
    if args.compat not in scorer.compat:
        raise ScoreError(
            f"--task {args.task} has no --compat {args.compat} (it has {scorer.compat})"
        )
    missing = prediction_files.align_ids(
        references, predictions, allow_missing=args.allow_missing, what="prediction"
    )
    if scorer.layout == "jsonl":
        for i, row in references.items():
            if "target" not in row:
                raise ScoreError(f"{located(references, i)}: no 'target' field")
    invalid = scorer.invalid_predictions(predictions)
    if invalid:
        listed = _listed(predictions, invalid)
        if not args.lenient:
            raise ScoreError(
                f"{listed} (--lenient scores such predictions as wrong and counts them)"
            )
        print(f"chartjax-score: warning: scored as wrong: {listed}", file=sys.stderr)
    options = {
        "compat": args.compat,
        "image_sizes": image_sizes(args.images, references) if args.images else None,
        "bertscore_model": args.bertscore_model,
        "bleurt_checkpoint": args.bleurt_checkpoint,
        "ppl_model": args.ppl_model,
    }
    try:
        scores = scorer.score(
            ScoreInputs(predictions, references, missing | frozenset(invalid), options)
        )
    except ValueError as err:
        raise ScoreError(f"{args.task}: {err}") from err
    scores.metrics["num_missing"] = len(missing)
    scores.metrics["num_invalid"] = len(invalid)
    return scores, len(references)


def _listed(predictions, invalid: dict[str, str], shown: int = 3) -> str:
    """ "N prediction(s) not of the task's type: <file>:<line> (id ...): <why>; ..." """
    where = getattr(predictions, "where", lambda key: f"--predictions id {key!r}")
    lines = getattr(predictions, "lines", None) or {}
    keys = sorted(invalid, key=lambda k: (lines.get(k, 0), k))
    parts = [f"{where(k)} (id {k!r}): {invalid[k]}" for k in keys[:shown]]
    more = f"; and {len(keys) - shown} more" if len(keys) > shown else ""
    return f"{len(keys)} prediction(s) not of the task's type: " + "; ".join(parts) + more


def _plot(metrics_obj: Mapping[str, Any], png: Path) -> None:
    breakdowns = dict(metrics_obj["breakdowns"])
    metric = next(
        (
            m
            for m in ("accuracy", "relaxed_accuracy", "f1", "score", "bleu")
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


def _libraries(scores: Scores, data: dict[str, str]) -> dict[str, str]:
    libs = {**scores.libraries, **data}
    for pkg in ("numpy", "scipy", "nltk", "sacrebleu", "rouge-score", "editdistance"):
        try:
            libs.setdefault(pkg, version(pkg))
        except PackageNotFoundError:
            pass
    return libs


def read_inputs(args) -> tuple[dict, dict, str, dict]:
    """(predictions, references, split, what a TFDS build says of the split) as the task's
    layout reads them."""
    if catalog.scorer(args.task).layout == "json_dir":
        if args.references is None or args.references.startswith("tfds:"):
            raise ScoreError("CHART-Info tasks need --references: the folder of ground-truth JSON")
        refs = prediction_files.read_json_dir(args.references, "--references")
        return prediction_files.read_json_dir(args.predictions, "--predictions"), refs, "all", {}
    preds = prediction_files.read_id_rows(args.predictions, "--predictions")
    split, data = "all", {}
    if args.references is None:  # the predictions' own targets, located in their file
        refs = IdRows(
            {
                k: {"id": k, **({"target": r["target"]} if "target" in r else {})}
                for k, r in preds.items()
            },
            path=preds.path,
            lines=preds.lines,
        )
    elif args.references.startswith("tfds:"):
        refs, split, data = load_tfds(args.references, args.task, args.data_dir)
    else:
        refs = prediction_files.read_id_rows(args.references, "--references")
    splits = {str(r["split"]) for r in refs.values() if "split" in r}
    return preds, refs, next(iter(splits)) if len(splits) == 1 else split, data


def check_outputs(args: argparse.Namespace) -> None:
    """The files chartjax-score writes can be written, checked before anything is read."""
    outs = [("--out", args.out)]
    if args.report:
        outs.append(("--report", args.report))
    for flag, path in outs:
        why = output_place.file_unwritable(os.fspath(path))
        if why:
            raise ScoreError(f"{flag} {path}: {why}")


def run(args: argparse.Namespace) -> dict:
    check_outputs(args)
    preds, refs, split, data = read_inputs(args)
    scores, n = score(args, preds, refs)
    obj = report.build_metrics(
        task=args.task,
        split=split,
        step=None,
        num_examples=n,
        metrics=scores.metrics,
        breakdowns=scores.breakdowns,
        unavailable=scores.unavailable,
        provenance=report.provenance(libraries=_libraries(scores, data)),
    )
    report.write_metrics(args.out, obj)
    _plot(obj, Path(args.out).with_suffix(".png"))
    if args.report is not None:
        whole = catalog.scorer(args.task).layout == "json_dir"
        view = report_views.for_task(args.task)
        images = [args.images] if args.images else []
        html_report.write_report(
            args.report or Path(args.out).with_name("report.html"),
            obj,
            html_report.merge_rows(preds, refs, whole_objects=whole),
            plots=[Path(args.out).with_suffix(".png")],
            image_for=lambda row: html_report.find_image(row, images, view),
            view=view,
        )
    return obj


def main(argv: list[str] | None = None) -> int:
    args = parse_args(quiet.setup(argv))  # before anything imports TensorFlow
    try:
        obj = run(args)
    except (ScoreError, PredictionFileError, ValueError) as err:
        print(f"chartjax-score: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # writing failed after the checks (a full disk): nothing half-written
        print(f"chartjax-score: error: cannot write the results: {err}", file=sys.stderr)
        return 1
    if obj["metrics"].get("num_missing"):
        print(
            f"chartjax-score: {obj['metrics']['num_missing']} missing prediction(s) scored as wrong",
            file=sys.stderr,
        )
    print(json.dumps(obj["metrics"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
