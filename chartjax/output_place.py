"""Where a command will write, checked before it does any work (issue 26, item 12).

A file in the way or a folder that cannot be written in used to surface as a traceback after the
work was done. `unwritable(folder)` says why a folder cannot be created or written in: a probe
file is created and removed, since permission bits alone do not tell (root, read-only mounts,
ACLs). Plain Python: the scorer's machine need not have jax or TensorFlow.
"""

from __future__ import annotations

import os
import tempfile


def unwritable(folder: str) -> str | None:
    """None when `folder` exists or can be created and files can be written in it; else why."""
    path = os.path.abspath(folder)
    probe = path
    while not os.path.lexists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        return f"{probe} is a file, not a folder"
    try:
        fd, tmp = tempfile.mkstemp(prefix=".chartjax-probe-", dir=probe)
        os.close(fd)
        os.remove(tmp)
    except OSError as e:
        return f"cannot write in {probe} ({e.strerror})"
    return None


def file_unwritable(path: str) -> str | None:
    """None when the file `path` can be written (replacing it if it is there); else why."""
    if os.path.isdir(path):
        return f"{path} is a folder; give a file name"
    return unwritable(os.path.dirname(os.path.abspath(path)))


def is_relative_path(value) -> bool:
    """A string naming something that exists relative to the working directory."""
    return (
        isinstance(value, str)
        and bool(value)
        and not os.path.isabs(value)
        and not value.startswith("~")
        and "://" not in value
        and os.path.exists(value)
    )
