"""Quiet start-up for the command lines: TensorFlow's and absl's banners hidden, warnings kept.

Importing TensorFlow 2.21 prints, whatever ``TF_CPP_MIN_LOG_LEVEL`` says (absl writes every
message to stderr until ``absl::InitializeLog`` runs)::

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:1796167403.722135   13072 port.cc:153] oneDNN custom operations are on. ...
    I0000 00:00:1796167403.787789   13072 cpu_feature_guard.cc:227] This TensorFlow binary ...
    To enable the following instructions: AVX2 AVX512F ..., rebuild TensorFlow with ...

Every CLI calls :func:`setup` first thing in ``main``, before anything imports TensorFlow.
Unless ``--verbose`` is given it sets ``TF_CPP_MIN_LOG_LEVEL=1`` (C++ INFO off, warnings and
errors on; a value the user exported wins) and hooks the import of ``tensorflow``: while it
runs, file descriptor 2 goes to a temporary file, and afterwards everything but the absl
pre-init notice and INFO lines (with their continuation lines) is written back to stderr, so
C++ warnings and errors of the import and everything Python prints still show. ``--verbose``
sets ``TF_CPP_MIN_LOG_LEVEL=0`` and hides nothing.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import os
import re
import sys
import tempfile

FLAG = "--verbose"
HELP = "show TensorFlow's and absl's start-up log lines too (hidden by default)"

_ABSL_PREINIT = "WARNING: All log messages before absl::InitializeLog() is called"
# absl / glog lines ("I0000 00:00:1796167403.722135   13072 port.cc:153] ...") and TensorFlow's
# older format ("2024-05-01 12:00:00.123456: I tensorflow/core/util/port.cc:113] ...").
_LOG_LINE = re.compile(
    r"^(?:(?P<absl>[IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\]"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<tf>[IWEF]) \S+:\d+\])"
)
# Python's own output ends a dropped message's continuation lines: warnings, tracebacks, logging.
_PYTHON_LINE = re.compile(
    r"^(Traceback |\S.*:\d+: \w*Warning: |[A-Z]+:\S*:|\w+(Error|Exception)\b)"
)


def strip_noise(text: str) -> str:
    """``text`` without absl's pre-init notice and INFO log lines (and the lines that continue
    a dropped message); warnings, errors and any other output are kept."""
    kept, dropping = [], False
    for line in text.splitlines(keepends=True):
        match = _LOG_LINE.match(line)
        if match:
            dropping = (match["absl"] or match["tf"]) == "I"
        elif line.startswith(_ABSL_PREINIT):
            dropping = False
            continue
        elif _PYTHON_LINE.match(line):
            dropping = False
        if not dropping:
            kept.append(line)
    return "".join(kept)


@contextlib.contextmanager
def filtered_stderr():
    """Route file descriptor 2 to a temporary file for the block, then write
    :func:`strip_noise` of what arrived to stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            rest = strip_noise(tmp.read().decode("utf-8", "replace"))
            if rest:
                sys.stderr.write(rest)
                sys.stderr.flush()


class _QuietLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        _unhook()
        with filtered_stderr():
            self._loader.exec_module(module)


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Filters stderr while ``tensorflow`` (the whole package, its .so files included) loads;
    leaves ``sys.meta_path`` once the import runs (a bare ``find_spec`` does not count)."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


def _unhook() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _QuietTensorFlowImport)]


def setup(argv: list[str] | None = None) -> list[str]:
    """Configure start-up output for a CLI; returns ``argv`` (default ``sys.argv[1:]``) without
    ``--verbose``. Call it before anything imports TensorFlow (it has no effect on the
    banners once TensorFlow is loaded)."""
    args = list(sys.argv[1:] if argv is None else argv)
    verbose = FLAG in args
    args = [a for a in args if a != FLAG]
    if verbose:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
        _unhook()
        return args
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    hooked = any(isinstance(f, _QuietTensorFlowImport) for f in sys.meta_path)
    if "tensorflow" not in sys.modules and not hooked:
        sys.meta_path.insert(0, _QuietTensorFlowImport())
    return args


def add_flag(parser) -> None:
    """List ``--verbose`` in a parser's ``--help`` (:func:`setup` has already removed it)."""
    parser.add_argument(FLAG, action="store_true", help=HELP)
