"""The typed settings of inference, one object per concern (no argparse below the CLIs).

* `Settings`: how the engine featurizes and decodes (chartjax-infer's model flags, the
  `chartjax.load(...).predict(...)` settings). A field left None takes the checkpoint's own value
  (`checkpoint_settings`: its train run's config.gin, or an HF export's preprocessor_config.json),
  else the default below, so one checkpoint gives one answer through every entry point; a value
  given that differs from the checkpoint's own is reported (`Resolved.notes`).
* `Prompt`: what the model is asked (a literal header, or a template over the input fields, and
  a classifier's pair template / table field).
* `Inputs`: where the examples come from (image files, a JSONL file, or a TFDS split).
* `Job`: how a batch job writes (`--out`, resume, shard, batch size, flushes, bad inputs).
"""

from __future__ import annotations

import dataclasses
import os

from chartjax.inference.inputs import InputError

# The engine's defaults where neither the caller nor the checkpoint says.
DEFAULTS = {
    "max_decode_len": 128,
    "beam_size": 1,
    "alpha": 0.6,
    "header_font_size": 36,
    "font_path": None,
    "max_patches": 2048,
    "max_input_len": 512,
    "dtype": "auto",
    # Sampling (PaliGemma only; temperature 0 = greedy, or beam search with beam_size > 1).
    "temperature": 0.0,
    "top_k": 0,
    "top_p": 1.0,
    "seed": 0,
}
_POSITIVE = ("max_decode_len", "beam_size", "header_font_size", "max_patches", "max_input_len")
DTYPES = ("auto", "float32", "bfloat16")


@dataclasses.dataclass(frozen=True)
class Settings:
    """Featurization and decoding; None = the checkpoint's own value, else DEFAULTS."""

    max_decode_len: int | None = None
    beam_size: int | None = None
    alpha: float | None = None
    header_font_size: int | None = None
    font_path: str | None = None
    max_patches: int | None = None
    max_input_len: int | None = None
    dtype: str | None = None
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None

    def __post_init__(self):
        for name in _POSITIVE:
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise InputError(f"{name} must be an integer >= 1, not {value!r}")
        for name, ok, want in (
            ("temperature", lambda v: v >= 0, ">= 0"),
            ("top_p", lambda v: 0 < v <= 1, "in (0, 1]"),
        ):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int | float) or not ok(value)):
                raise InputError(f"{name} must be a number {want}, not {value!r}")
        for name in ("top_k", "seed"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise InputError(f"{name} must be an integer >= 0, not {value!r}")
        if self.dtype is not None and self.dtype not in DTYPES:
            raise InputError(f"dtype must be one of {DTYPES}, not {self.dtype!r}")
        if self.font_path is not None and not os.path.isfile(os.path.expanduser(self.font_path)):
            raise InputError(f"font_path not found: {self.font_path}")

    @classmethod
    def of(cls, values: dict) -> Settings:
        unknown = set(values) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown settings {sorted(unknown)}; known: {sorted(DEFAULTS)}")
        return cls(**values)

    def given(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclasses.dataclass(frozen=True)
class Resolved:
    """Every setting with a value, where each came from, and the notes of overrides."""

    values: dict
    origin: dict  # name -> "given" | "checkpoint" | "default"
    notes: tuple[str, ...] = ()

    def __getattr__(self, name):
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None


def checkpoint_settings(loc, run: dict) -> tuple[dict, str]:
    """The settings a checkpoint carries and where they are written: a train run's config.gin
    (`run`, as formats.run_inputs reads it: Features.max_patches / max_input_len /
    header_font_size, Decoding.*), an HF export's preprocessor_config.json (`max_patches`)."""
    import json

    from chartjax.interop import formats

    if run:
        keep = {k: v for k, v in run.items() if k in DEFAULTS and v is not None}
        return keep, f"its run's config.gin ({formats.run_config_file(loc)})"
    path = os.path.join(loc.path, "preprocessor_config.json")
    if os.path.isfile(path):
        with open(path) as f:
            raw = json.load(f)
        proc = raw.get("image_processor", raw)  # processor_config nests it
        if isinstance(proc.get("max_patches"), int):
            return {"max_patches": proc["max_patches"]}, path
    return {}, ""


def resolve(settings: Settings, own: dict, where: str, flag_prefix: str = "--") -> Resolved:
    """`settings` over the checkpoint's `own` values over DEFAULTS; a given value that differs
    from the checkpoint's own is named in `notes`."""
    values, origin, notes = dict(DEFAULTS), dict.fromkeys(DEFAULTS, "default"), []
    for name, value in own.items():
        values[name], origin[name] = value, "checkpoint"
    for name, value in settings.given().items():
        if name in own and own[name] != value:
            notes.append(f"{flag_prefix}{name} {value} overrides {own[name]} from {where}")
        values[name], origin[name] = value, "given"
    return Resolved(values, origin, tuple(notes))


@dataclasses.dataclass(frozen=True)
class Prompt:
    """What the model is asked: `header`, a literal prompt for every example, or `template`, a
    format string over the input fields (or a named prompt; default: the task's); a
    classifier's `pair_template` and `table_field`; `target_field`, the reference's field."""

    header: str | None = None
    template: str | None = None
    pair_template: str | None = None
    table_field: str | None = None
    target_field: str | None = None


@dataclasses.dataclass(frozen=True)
class Inputs:
    """Exactly one source: `images` (files and/or folders), `jsonl` (rows `{"id", "image"?,
    <fields>}`) or `tfds` (`NAME[/CONFIG]:SPLIT` in `data_dir`)."""

    images: tuple[str, ...] | None = None
    jsonl: str | None = None
    tfds: str | None = None
    data_dir: str = "~/tensorflow_datasets"

    def __post_init__(self):
        given = [n for n in ("images", "jsonl", "tfds") if getattr(self, n)]
        if len(given) != 1:
            raise InputError("give exactly one input: --images, --inputs or --tfds")


@dataclasses.dataclass(frozen=True)
class Job:
    """How a batch job writes: `out` (new or empty, unless `overwrite`; `resume` continues the
    run recorded there), `shard` (i, n): the i-th of n contiguous blocks of the inputs,
    `batch_size` (global, rounded up to a multiple of the devices), `flush_every` inputs a
    commit, `skip_bad` (skip and count unreadable inputs)."""

    out: str
    overwrite: bool = False
    resume: bool = False
    shard: tuple[int, int] | None = None
    batch_size: int = 8
    flush_every: int = 256
    skip_bad: bool = False

    def __post_init__(self):
        for name in ("batch_size", "flush_every"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name} must be >= 1")
