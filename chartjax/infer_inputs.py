"""What `chartjax-infer` reads: images, folders, a JSONL file of named fields, or a TFDS split,
turned into examples `(id, prompt, image, target)` with each task's prompt.

Prompts (the header rendered above the chart for image tasks, the encoder text for `text`):
  deplot      "Generate underlying data table of the figure below:" (DePlot README; models.md §2.1)
  chartqa     the question: `--header`, or the `question` (or `query`) field
  chartcheck  ChartCheck's MatCha prompt from the `caption` and `claim` fields (corpora.md §1.8;
              the prompt strings are chartjax/tasks/chartcheck.py's)
  caption, summary   no header
  text        `--template` over the JSONL / TFDS fields (required)
`--header` replaces the prompt of every example by its literal text; `--template` (a Python
format string over the fields, or a name in TEMPLATES) replaces the task's default prompt.
"""

from __future__ import annotations

import dataclasses
import json
import os
import string
from collections.abc import Iterator

from chartjax.data import tables
from chartjax.metrics import report
from chartjax.tasks import chartcheck as cc

IMAGE_TASKS = ("deplot", "chartqa", "chartcheck", "caption", "summary")
TASKS = (*IMAGE_TASKS, "text")
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff")

DEPLOT_PROMPT = "Generate underlying data table of the figure below:"
CHARTCHECK_PROMPT = cc.MATCHA_CLASS
# Named --template values. The ChartCheck prompts are the task module's (the authors' code), so
# inference sees the prompts the recipes train with; {table} is DePlot's table text.
TEMPLATES = {
    "deplot": DEPLOT_PROMPT,
    "chartqa": "{question}",
    "chartcheck": cc.MATCHA_CLASS,  # MatCha classification -> Yes / No
    "chartcheck_explain": cc.MATCHA_CLASS + cc.EXPLAIN_WHY,  # MatCha multi-task
    "chartcheck_flan_class": cc.FLAN_CLASS,  # Flan-T5: claim, caption, table -> true / false
    "chartcheck_flan_multi": cc.FLAN_MULTI,  # -> "true. <explanation>"
    "chartcheck_flan_explain": cc.FLAN_EXPLAIN,  # claim, label, caption, table -> explanation
}
DEFAULT_TEMPLATE = {
    "deplot": "deplot",
    "chartqa": "chartqa",
    "chartcheck": "chartcheck",
    "caption": "",
    "summary": "",
    "text": None,
}
# Reference field per task in TFDS splits (used when present; --target_field overrides).
DEFAULT_TARGET = {
    "deplot": "table.linearized",
    "chartqa": "answer",
    "chartcheck": "label",
    "caption": "caption",
    "summary": "summary",
    "text": None,
}
ALIASES = {"question": ("query",)}  # ChartQA's own files call the question `query`


class InputError(ValueError):
    """Bad input that stops the run (names the file, line or field)."""


@dataclasses.dataclass
class Example:
    id: str
    prompt: str
    source: str  # where it came from, for error messages
    image_path: str | None = None
    image_bytes: bytes | None = None
    target: str | None = None


# ------------------------------------------------------------------------ prompts -----------


def resolve_template(task: str, template: str | None) -> str | None:
    """The format string of `task`: `--template` (a name or a format string) or the default."""
    t = template if template is not None else DEFAULT_TEMPLATE[task]
    if t is None:
        raise InputError(
            "--task text needs --template (a format string over the input fields, "
            f"or one of: {', '.join(sorted(TEMPLATES))})"
        )
    t = TEMPLATES.get(t, t)
    try:
        template_fields(t)
    except ValueError as e:
        raise InputError(f"--template {template!r}: not a valid format string ({e})") from None
    return t


def template_fields(template: str) -> list[str]:
    fields = []
    for _, name, _, _ in string.Formatter().parse(template):
        if name is None:
            continue
        if not name or not name.isidentifier():
            raise ValueError(f"use named fields such as {{claim}}, not {{{name}}}")
        fields.append(name)
    return fields


def field_text(value) -> str:
    """A field as prompt text: tables as DePlot-linearized text, other non-strings as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "header" in value and "rows" in value:
        return tables.linearize(value["header"], value["rows"], value.get("title"))
    return json.dumps(value, ensure_ascii=False)


def render_prompt(template: str, fields: dict, where: str) -> str:
    values = {}
    for name in template_fields(template):
        keys = (name, *ALIASES.get(name, ()))
        key = next((k for k in keys if k in fields), None)
        if key is None:
            raise InputError(
                f"{where}: no field {name!r} for the prompt template {template!r} "
                f"(fields: {sorted(fields)})"
            )
        values[name] = field_text(fields[key])
    return template.format(**values)


# ------------------------------------------------------------------------ images, JSONL ------


def image_files(paths: list[str]) -> list[tuple[str, str]]:
    """(id, file) of image files and folders, sorted by id.

    A folder contributes every file with an image extension below it (any case; dot-files
    skipped), id = its path relative to the folder without the extension. A file given
    directly has its stem as id. Duplicate ids are an error.
    """
    found: dict[str, str] = {}

    def add(id_: str, path: str):
        if id_ in found:
            raise InputError(f"two inputs have the id {id_!r}: {found[id_]} and {path}")
        found[id_] = path

    for p in paths:
        if os.path.isdir(p):
            n = 0
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if name.startswith(".") or not name.lower().endswith(IMAGE_EXTENSIONS):
                        continue
                    full = os.path.join(root, name)
                    rel = os.path.relpath(full, p)
                    add(os.path.splitext(rel)[0].replace(os.sep, "/"), full)
                    n += 1
            if not n:
                raise InputError(f"{p}: no image files (extensions {', '.join(IMAGE_EXTENSIONS)})")
        elif os.path.isfile(p):
            add(os.path.splitext(os.path.basename(p))[0], p)
        else:
            raise InputError(f"image input not found: {p}")
    return sorted(found.items())


def from_images(
    paths: list[str], task: str, template: str, header: str | None
) -> tuple[Iterator[Example], int]:
    files = image_files(paths)
    if header is None and template_fields(template):
        raise InputError(
            f"--task {task} with --images needs --header (the prompt's fields "
            f"{template_fields(template)} come from --inputs JSONL or --tfds)"
        )
    prompt = header if header is not None else template

    def gen():
        for id_, path in files:
            yield Example(id=id_, prompt=prompt, source=path, image_path=path)

    return gen(), len(files)


def from_jsonl(
    path: str, task: str, template: str, header: str | None, target_field: str | None
) -> tuple[Iterator[Example], int]:
    """Rows `{"id", "image"?, <fields>}`; a relative `image` path is relative to the file."""
    if not os.path.isfile(path):
        raise InputError(f"--inputs file not found: {path}")
    base = os.path.dirname(os.path.abspath(path))
    examples, seen = [], {}
    try:
        rows = list(report.iter_jsonl(path))
    except ValueError as e:  # names file and line
        raise InputError(str(e)) from None
    for lineno, row in rows:
        where = f"{path}:{lineno}"
        if "id" not in row:
            raise InputError(f"{where}: no 'id' field")
        id_ = str(row["id"])
        if id_ in seen:
            raise InputError(f"{where}: duplicate id {id_!r} (first on line {seen[id_]})")
        seen[id_] = lineno
        image = None
        if task in IMAGE_TASKS:
            if not isinstance(row.get("image"), str):
                raise InputError(f"{where}: --task {task} needs an 'image' path in each row")
            image = os.path.join(base, row["image"])
        prompt = header if header is not None else render_prompt(template, row, where)
        target = None
        if target_field:
            if target_field not in row:
                raise InputError(f"{where}: no target field {target_field!r}")
            target = field_text(row[target_field])
        elif "target" in row:
            target = field_text(row["target"])
        examples.append(
            Example(id=id_, prompt=prompt, source=image or where, image_path=image, target=target)
        )
    return iter(examples), len(examples)


# ------------------------------------------------------------------------ TFDS ---------------


def parse_tfds_spec(spec: str) -> tuple[str, str]:
    """ "name[/config]:split" -> (name, split); the split may be a slice ("test[:10]")."""
    name, sep, split = spec.partition(":")
    if not sep or not name or not split:
        raise InputError(f"--tfds {spec!r}: expected NAME[/CONFIG]:SPLIT, e.g. chartcheck:test_two")
    return name, split


def _feature_keys(features) -> dict:
    """Top-level and one-level nested (dotted) feature keys -> their feature objects."""
    out = {}
    for k, v in features.items():
        out[k] = v
        if hasattr(v, "items") and not hasattr(v, "names"):
            for k2, v2 in v.items():
                out[f"{k}.{k2}"] = v2
    return out


def from_tfds(
    spec: str, data_dir: str, task: str, template: str, header: str | None, target_field: str | None
) -> tuple[Iterator[Example], int | None]:
    import tensorflow_datasets as tfds

    from chartjax.data import pipeline
    from chartjax.tasks import seq2seq

    name, split = parse_tfds_spec(spec)
    builder_dir = pipeline.tfds_builder_dir(name, data_dir)
    builder = tfds.builder_from_directory(builder_dir)
    keys = _feature_keys(builder.info.features)
    image_key = "image" if task in IMAGE_TASKS else None
    if image_key and image_key not in keys:
        raise InputError(f"{builder_dir}: no 'image' feature for image task {task!r}")
    need = [] if header is not None else template_fields(template)
    missing = [k for k in need if k not in keys and not any(a in keys for a in ALIASES.get(k, ()))]
    if missing:
        raise InputError(
            f"{name}: the prompt needs features {missing}; the dataset has {sorted(keys)}"
        )
    need = [k if k in keys else next(a for a in ALIASES[k] if a in keys) for k in need]
    tgt_key = target_field or DEFAULT_TARGET[task]
    if target_field and target_field not in keys:
        raise InputError(f"{name}: no feature {target_field!r} (has {sorted(keys)})")
    tgt_key = tgt_key if tgt_key in keys else None
    label_names = getattr(keys[tgt_key], "names", None) if tgt_key else None
    field_keys = sorted({*need, *(["id"] if "id" in keys else []), *([tgt_key] if tgt_key else [])})
    counter = iter(range(1 << 62))

    def expand(ex: dict) -> list[dict]:
        n = next(counter)
        id_ = str(ex["id"]) if "id" in ex else f"{split}:{n}"
        fields = {k: ex[k] for k in need}
        prompt = (
            header
            if header is not None
            else render_prompt(template, fields, f"{name}:{split} {id_}")
        )
        target, has_target = "", tgt_key is not None
        if has_target:
            value = ex[tgt_key]
            target = label_names[value] if label_names else field_text(value)
            if task == "chartcheck" and label_names:  # the MatCha classification target
                target = {"supports": "Yes", "refutes": "No"}.get(target, target)
        return [{"id": id_, "prompt": prompt, "target": target, "meta": {"has_target": has_target}}]

    total = None
    try:
        total = builder.info.splits[split].num_examples
    except (KeyError, ValueError, TypeError):
        pass

    def gen():
        for rec in seq2seq.iter_records(builder_dir, split, expand, field_keys, image_key):
            yield Example(
                id=rec["id"],
                prompt=rec["prompt"],
                source=f"{spec} {rec['id']}",
                image_bytes=rec.get("image_bytes"),
                target=rec["target"] if rec["meta"]["has_target"] else None,
            )

    return gen(), total


def open_inputs(args, task: str) -> tuple[Iterator[Example], int | None]:
    """The examples of the parsed `chartjax-infer` flags and their count (None if unknown)."""
    given = [n for n in ("images", "inputs", "tfds") if getattr(args, n)]
    if len(given) != 1:
        raise InputError("give exactly one input: --images, --inputs or --tfds")
    template = resolve_template(task, args.template) if args.header is None else ""
    if task == "text" and args.images:
        raise InputError("--task text reads text fields: use --inputs JSONL or --tfds")
    if args.images:
        return from_images(args.images, task, template, args.header)
    if args.inputs:
        return from_jsonl(args.inputs, task, template, args.header, args.target_field)
    return from_tfds(args.tfds, args.data_dir, task, template, args.header, args.target_field)


def read_image_bytes(ex: Example) -> bytes:
    if ex.image_bytes is not None:
        return ex.image_bytes
    with open(ex.image_path, "rb") as f:
        return f.read()
