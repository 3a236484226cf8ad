"""Files with the mode the umask gives an ordinary new file (0644 under umask 022).

`tempfile.mkstemp` (the atomic writes: temp file + rename) and safetensors' writer create their
files 0600 whatever the umask, so a teammate could not read a run's metrics.json, report.html or
a converted model.safetensors. Hand-written: the standard library has no umask getter before
Python 3.13's os.umask-free reading, and reading it by setting it is not thread-safe.
"""

from __future__ import annotations

import os
import threading

_LOCK = threading.Lock()


def umask() -> int:
    try:  # Linux: read without changing it
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def new_file_mode() -> int:
    return 0o666 & ~umask()


def as_new_file(path_or_fd: str | os.PathLike | int) -> None:
    """Gives a file the mode an ordinary new file gets under the umask."""
    if isinstance(path_or_fd, int):
        os.fchmod(path_or_fd, new_file_mode())
    else:
        os.chmod(path_or_fd, new_file_mode())
