"""What `chartjax-infer` reads: images, folders, a JSONL file of named fields, or a TFDS split,
turned into examples `(id, prompt, image, target)` with the task's prompt.

The task (an InferenceSpec of chartjax/tasks/catalog.py) says which prompt it uses by default,
its named prompts, and where a TFDS split keeps the reference. `--header` replaces the prompt of
every example by its literal text; `--template` (a Python format string over the input fields,
or a named prompt of any task) replaces the task's default prompt. Encoder classifiers also read
`--pair_template` (the second text of a text pair) and `--table_field` (the field holding a
table: linearized text, or `{"header", "rows"}`).

Inputs are a sequence, read by position: a job's share (`--shard`, a process's rows) and a
resumed run's remainder are positions, so nothing before them is read.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence

from chartjax.data import sources
from chartjax.inference.prompts import (  # noqa: F401 (re-exported: the engine and api read them here)
    InputError,
    checked_template,
    field_text,
    render_prompt,
    resolve_template,
    template_fields,
    with_derived,
)
from chartjax.metrics import prediction_files
from chartjax.tasks.core.task import InferenceSpec

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff")


@dataclasses.dataclass
class Example:
    id: str
    prompt: str
    source: str  # where it came from, for error messages
    image_path: str | None = None
    image_bytes: bytes | None = None
    target: str | None = None
    pair: str | None = None  # the second text of a classifier's text pair
    table: object = None  # a classifier's table (linearized text or {"header", "rows"})


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


class Lazy(Sequence):
    """`make(i)` for i < n: examples built when read (a TFDS record, an image's path)."""

    def __init__(self, n: int, make: Callable[[int], Example]):
        self._n, self._make = n, make

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> Example:
        if not 0 <= i < self._n:
            raise IndexError(i)
        return self._make(i)


def from_images(
    paths: list[str], spec: InferenceSpec, template: str, header: str | None
) -> Sequence[Example]:
    files = image_files(paths)
    if header is None and template_fields(template):
        raise InputError(
            f"--task {spec.name} with --images needs --header (the prompt's fields "
            f"{template_fields(template)} come from --inputs JSONL or --tfds)"
        )
    prompt = header if header is not None else template

    def make(i):
        id_, path = files[i]
        return Example(id=id_, prompt=prompt, source=path, image_path=path)

    return Lazy(len(files), make)


@dataclasses.dataclass(frozen=True)
class Extra:
    """The classifier inputs beside the prompt: a pair template and a table field."""

    pair_template: str | None = None
    table_field: str | None = None

    def fields(self) -> list[str]:
        need = template_fields(self.pair_template) if self.pair_template else []
        return need + ([self.table_field] if self.table_field else [])

    def of(self, fields: dict, where: str, aliases=None) -> dict:
        out = {}
        if self.pair_template:
            out["pair"] = render_prompt(self.pair_template, fields, where, aliases)
        if self.table_field:
            if self.table_field not in fields:
                raise InputError(
                    f"{where}: no table field {self.table_field!r} (fields: {sorted(fields)})"
                )
            table = fields[self.table_field]
            out["table"] = table if isinstance(table, dict) else field_text(table)
        return out


def from_jsonl(
    path: str,
    spec: InferenceSpec,
    template: str,
    header: str | None,
    target_field: str | None,
    extra: Extra = Extra(),
) -> Sequence[Example]:
    """Rows `{"id", "image"?, <fields>}`; a relative `image` path is relative to the file."""
    if not os.path.isfile(path):
        raise InputError(f"--inputs file not found: {path}")
    base = os.path.dirname(os.path.abspath(path))
    examples, seen = [], {}
    try:
        rows = list(prediction_files.iter_jsonl(path))
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
        if spec.modality == "image":
            if not isinstance(row.get("image"), str):
                raise InputError(f"{where}: --task {spec.name} needs an 'image' path in each row")
            image = os.path.join(base, row["image"])
        prompt = (
            header
            if header is not None
            else render_prompt(
                template, with_derived(spec, template, row, where), where, spec.field_aliases
            )
        )
        target = None
        if target_field:
            if target_field not in row:
                raise InputError(f"{where}: no target field {target_field!r}")
            target = field_text(row[target_field])
        elif "target" in row:
            target = field_text(row["target"])
        examples.append(
            Example(
                id=id_,
                prompt=prompt,
                source=image or where,
                image_path=image,
                target=target,
                **extra.of(row, where, spec.field_aliases),
            )
        )
    return examples


# ------------------------------------------------------------------------ TFDS ---------------


def parse_tfds_spec(spec: str) -> tuple[str, str]:
    """ "name[/config]:split" -> (name, split); the split may be a slice ("test[:10]")."""
    name, sep, split = spec.partition(":")
    if not sep or not name or not split:
        raise InputError(f"--tfds {spec!r}: expected NAME[/CONFIG]:SPLIT, e.g. NAME:test")
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
    tfds_spec: str,
    data_dir: str,
    spec: InferenceSpec,
    template: str,
    header: str | None,
    target_field: str | None,
    extra: Extra = Extra(),
) -> Sequence[Example]:
    """The examples of a split by position (a record is read when one of its examples is)."""
    name, split = parse_tfds_spec(tfds_spec)
    image_key = "image" if spec.modality == "image" else None
    source = sources.TfdsSource(name, data_dir, image_key=image_key)
    keys = _feature_keys(source.features())
    if image_key and image_key not in keys:
        raise InputError(f"{source.builder_dir}: no 'image' feature for image task {spec.name!r}")
    aliases = spec.field_aliases
    need = [] if header is not None else template_fields(template)

    def present(k: str) -> bool:
        return k in keys or any(a in keys for a in aliases.get(k, ()))

    derived = spec.derived
    if derived is not None and any(k in derived.names for k in need):  # read their inputs
        need = [k for k in need if k not in derived.names]
        need += [k for k in derived.inputs if present(k)]
    need = list(dict.fromkeys(need + extra.fields()))
    missing = [k for k in need if not present(k)]
    if missing:
        raise InputError(
            f"{name}: the prompt needs features {missing}; the dataset has {sorted(keys)}"
        )
    need = [k if k in keys else next(a for a in aliases[k] if a in keys) for k in need]
    tgt_key = target_field or spec.target_field
    if target_field and target_field not in keys:
        raise InputError(f"{name}: no feature {target_field!r} (has {sorted(keys)})")
    tgt_key = tgt_key if tgt_key in keys else None
    label_names = getattr(keys[tgt_key], "names", None) if tgt_key else None

    def expand(ex: dict) -> list[dict]:
        # Without an id feature the id is the example's position, set when it is read.
        id_ = str(ex["id"]) if "id" in ex else ""
        fields = {k: ex[k] for k in need}
        where = f"{name}:{split} {id_}"
        prompt = (
            header
            if header is not None
            else render_prompt(
                template, with_derived(spec, template, fields, where), where, aliases
            )
        )
        target, has_target = "", tgt_key is not None
        if has_target:
            value = ex[tgt_key]
            if spec.target_text is not None:
                target = spec.target_text(value, label_names)
            else:
                target = label_names[value] if label_names else field_text(value)
        meta = {"has_target": has_target, **extra.of(fields, f"{name}:{split} {id_}", aliases)}
        return [{"id": id_, "prompt": prompt, "target": target, "meta": meta}]

    source.expand = expand
    source.field_keys = sorted(
        {*need, *(["id"] if "id" in keys else []), *([tgt_key] if tgt_key else [])}
    )
    records = source.examples(split, 0, 1)

    def make(i):
        rec = records[i]  # as TfdsSource.records gives it
        id_ = sources.as_python(rec["id"]) or f"{split}:{i}"
        meta = json.loads(sources.as_python(rec["meta"]))
        return Example(
            id=id_,
            prompt=sources.as_python(rec["prompt"]),
            source=f"{tfds_spec} {id_}",
            image_bytes=rec.get("image_bytes"),
            target=sources.as_python(rec["target"]) if meta["has_target"] else None,
            pair=meta.get("pair"),
            table=meta.get("table"),
        )

    return Lazy(len(records), make)


def open_inputs(inputs, prompt, spec: InferenceSpec, templates: dict) -> Sequence[Example]:
    """The examples of `inputs` (settings.Inputs) asked `prompt` (settings.Prompt), in order."""
    template = resolve_template(spec, prompt.template, templates) if prompt.header is None else ""
    if spec.modality == "text" and inputs.images:
        raise InputError(f"--task {spec.name} reads text fields: use --inputs JSONL or --tfds")
    extra = Extra(
        pair_template=_pair_template(prompt.pair_template, templates),
        table_field=prompt.table_field,
    )
    if (extra.pair_template or extra.table_field) and spec.output != "labels":
        raise InputError(
            f"--pair_template / --table_field are for --task classify, not {spec.name}"
        )
    if inputs.images:
        return from_images(list(inputs.images), spec, template, prompt.header)
    if inputs.jsonl:
        return from_jsonl(inputs.jsonl, spec, template, prompt.header, prompt.target_field, extra)
    return from_tfds(
        inputs.tfds, inputs.data_dir, spec, template, prompt.header, prompt.target_field, extra
    )


def _pair_template(template: str | None, templates: dict) -> str | None:
    return None if template is None else checked_template(template, templates, "--pair_template")


def read_image_bytes(ex: Example) -> bytes:
    if ex.image_bytes is not None:
        return ex.image_bytes
    with open(ex.image_path, "rb") as f:
        return f.read()
