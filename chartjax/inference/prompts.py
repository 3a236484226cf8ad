"""The prompts of `chartjax-infer` and `chartjax.load`: a task's named prompt or a Python
format string over an example's input fields (`--template`), checked and rendered; fields a
task derives from others (ChartQAPro's conversation) filled in when a prompt names them.
"""

from __future__ import annotations

import json
import string

from chartjax.data import tables
from chartjax.tasks.core.task import InferenceSpec


class InputError(ValueError):
    """Bad input that stops the run (names the file, line or field)."""


# ------------------------------------------------------------------------ prompts -----------


def resolve_template(spec: InferenceSpec, template: str | None, templates: dict) -> str:
    """The format string of the task: `--template` (a name in `templates` or a format string)
    or the task's default."""
    t = template if template is not None else spec.default_template
    if t is None:
        raise InputError(
            f"--task {spec.name} needs --template (a format string over the input fields, "
            f"or one of: {', '.join(sorted(templates))})"
        )
    return checked_template(t, templates, "--template")


def checked_template(template: str, templates: dict, flag: str) -> str:
    """A named prompt's text, or `template` itself, once it parses as a format string."""
    t = templates.get(template, template)
    try:
        template_fields(t)
    except ValueError as e:
        raise InputError(f"{flag} {template!r}: not a valid format string ({e})") from None
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
    """A field as prompt text: tables as linearized text (chartjax.data.tables), other non-strings as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "header" in value and "rows" in value:
        return tables.linearize(value["header"], value["rows"], value.get("title"))
    return json.dumps(value, ensure_ascii=False)


def render_prompt(template: str, fields: dict, where: str, aliases=None) -> str:
    values = {}
    for name in template_fields(template):
        keys = (name, *(aliases or {}).get(name, ()))
        key = next((k for k in keys if k in fields), None)
        if key is None:
            raise InputError(
                f"{where}: no field {name!r} for the prompt template {template!r} "
                f"(fields: {sorted(fields)})"
            )
        values[name] = field_text(fields[key])
    return template.format(**values)


def with_derived(spec: InferenceSpec, template: str, fields: dict, where: str) -> dict:
    """`fields` and the spec's derived fields (`InferenceSpec.derived`) when `template` names
    one that `fields` lacks; fields given as input win."""
    derived = spec.derived
    if derived is None or not any(
        n in derived.names and n not in fields for n in template_fields(template)
    ):
        return fields
    given = {}
    for name in derived.inputs:
        key = next((k for k in (name, *spec.field_aliases.get(name, ())) if k in fields), None)
        if key is not None:
            given[name] = fields[key]
    try:
        made = derived.make(given)
    except (ValueError, TypeError, KeyError) as e:
        raise InputError(f"{where}: {e}") from None
    return {**made, **fields}
