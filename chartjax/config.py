"""gin at the edges: flag parsing for the entry points and saving the resolved config."""

from __future__ import annotations

import argparse
import logging
import os

import gin

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIN_DIR = os.path.join(REPO_ROOT, "gin_configs")


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
    gin.add_config_file_search_path(REPO_ROOT)
    resolved = []
    for f in files:
        if os.path.exists(f):
            resolved.append(f)
        elif os.path.exists(os.path.join(GIN_DIR, f)):
            resolved.append(os.path.join(GIN_DIR, f))
        elif os.path.exists(os.path.join(REPO_ROOT, f)):
            resolved.append(os.path.join(REPO_ROOT, f))
        else:
            raise FileNotFoundError(f"gin file {f!r} not found (also looked in {GIN_DIR})")
    gin.parse_config_files_and_bindings(resolved, list(bindings), finalize_config=False)


def save_config(workdir: str, text: str, name: str = "config.gin") -> None:
    import jax

    if jax.process_index() == 0:
        with open(os.path.join(workdir, name), "w") as f:
            f.write(text)
