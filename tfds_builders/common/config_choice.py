"""`tfds build` of a builder whose configs read different release layouts must name one.

Without `--config`, `tfds build <folder>` builds every config of a builder one after another,
all from the same `--manual_dir`. For CHART-Info that built `synthetic_2019` (minutes of work on
a full release) and then failed on `pmc_2020` with a 200-line traceback, since one folder holds
one layout. A builder with `RequireConfigMixin` refuses that in one line naming its configs,
before anything is built (exit status 2, as a usage error).

tfds decides "every config" in its command line's `_make_builders` (it passes each config by
name, so the builder cannot tell from its arguments). The mixin looks for that frame on the
stack and reads the config tfds parsed from `--config`, `--config_idx` or `name/config`. Built
any other way (Python, Beam workers, a tfds whose command line is organised differently) it
does nothing.
"""

from __future__ import annotations

import sys

_TFDS_BUILD_MODULE = "tensorflow_datasets.scripts.cli.build"


def building_every_config() -> bool:
    """Whether this builder is being made by `tfds build` for lack of a config choice."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_make_builders" and frame.f_globals.get("__name__") == (
            _TFDS_BUILD_MODULE
        ):
            kwargs = frame.f_locals.get("builder_kwargs")
            return isinstance(kwargs, dict) and kwargs.get("config") is None
        frame = frame.f_back
    return False


def refusal(name: str, configs: list[str]) -> str:
    choices = " or ".join(f"--config={c}" for c in configs)
    return (
        f"tfds build: error: {name} has configs {', '.join(configs)}, one per release layout, "
        f"and --manual_dir holds one: pick it with {choices}"
    )


class RequireConfigMixin:
    """Builder mixin (first in the bases): `tfds build` without a config choice is refused."""

    def __init__(self, **kwargs):
        if self.BUILDER_CONFIGS and building_every_config():
            print(refusal(self.name, [c.name for c in self.BUILDER_CONFIGS]), file=sys.stderr)
            raise SystemExit(2)
        super().__init__(**kwargs)
