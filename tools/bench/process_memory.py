"""Peak resident memory of a whole process tree (a build and every Beam worker it starts).

`resource`'s RUSAGE_CHILDREN reports the largest single child, not the sum of processes alive
at once; a Beam build's runner and its workers each hold a part, so the tree is sampled.
"""

from __future__ import annotations

import subprocess
import time

import psutil


def tree_rss(root: psutil.Process) -> int:
    """Resident bytes of `root` and its descendants now (processes that vanish count 0)."""
    total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def run(
    cmd: list[str], interval_s: float = 0.1, **kwargs
) -> tuple[subprocess.CompletedProcess, int]:
    """Runs `cmd` to completion, sampling its tree every `interval_s`; (result, peak bytes)."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs
    )
    root, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        try:
            peak = max(peak, tree_rss(root))
        except psutil.NoSuchProcess:
            break
        time.sleep(interval_s)
    out, err = proc.communicate()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), peak
