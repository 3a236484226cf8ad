"""gin at the edges: flag parsing for the entry points and saving the resolved config."""

from __future__ import annotations

import argparse
import importlib.resources
import logging
import os

import gin

from chartjax import recipe

# The gin files ship inside the package (chartjax.gin_configs; the checkout's gin_configs/).
GIN_DIR = str(importlib.resources.files("chartjax.gin_configs"))
GIN_PREFIX = "gin_configs/"  # recipes and docs name files as the checkout lays them out


def parse_flags(argv=None, *, description: str = "", extra=None) -> argparse.Namespace:
    """`--gin_file` (repeatable; relative to cwd or to gin_configs/), `--gin_bindings`,
    `--workdir`; then parses gin. `extra(parser)` may add entry-point flags."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gin_file", action="append", default=[], required=True)
    parser.add_argument("--gin_bindings", action="append", default=[])
    parser.add_argument("--workdir", required=True)
    if extra:
        extra(parser)
    args = parser.parse_args(argv)
    parse_gin(args.gin_file, args.gin_bindings)
    return args


class _QuietGinResourceLookups(logging.Filter):
    # gin first tries every include as a package resource and logs an error when that fails,
    # before it finds the file on the search path: noise, not a problem.
    def filter(self, record):
        return not str(record.msg).startswith("Path not found")


def parse_gin(files, bindings=()) -> None:
    import chartjax.gin_imports  # noqa: F401  (registers every configurable)

    logging.getLogger().addFilter(_QuietGinResourceLookups())

    gin.add_config_file_search_path(GIN_DIR)
    resolved = [find_gin_file(f) for f in files]
    gin.parse_config_files_and_bindings(resolved, list(bindings), finalize_config=False)
    recipe.record_gin_files(files)  # config.gin then names the run's recipe


def find_gin_file(name: str) -> str:
    """A `--gin_file` value -> a path: as given (relative to the working directory), else inside
    the installed gin_configs (with or without the `gin_configs/` prefix)."""
    if os.path.exists(name):
        return name
    inner = name.removeprefix(GIN_PREFIX)
    if os.path.exists(os.path.join(GIN_DIR, inner)):
        return os.path.join(GIN_DIR, inner)
    raise FileNotFoundError(f"gin file {name!r} not found (also looked in {GIN_DIR})")
