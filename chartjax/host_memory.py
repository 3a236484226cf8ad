"""Keep freed host memory for reuse instead of handing it back to the OS (glibc `mallopt`).

Why: a training step, a decoded batch or one image's patches allocate buffers of a few MB.
glibc serves those with fresh `mmap` pages and unmaps them on free, so every step pays page
faults and zero-filling again; its dynamic threshold does not stop this for buffers of many
sizes. Measured on this project's 2-core CPU machine (tools/bench/step.py): patch extraction
for an 800x600 chart 21 -> 10 ms (HF's image processor gains too, so the benchmark applies it to
both sides); the Pix2Struct training step moved within run-to-run noise. The cost: the process
keeps its peak heap (RSS) instead of shrinking after a peak. Entry points (chartjax-train /
-eval / -infer, the demo, bench/step, bench/input, bench/train_step) call it; importing
chartjax alone changes nothing.

`available_bytes` reads how much memory the OS could still give (the FigureQA image cache and
the scaling benchmark's Beam builds check it before they allocate).
"""

from __future__ import annotations

import ctypes
import platform

# glibc malloc.h parameter numbers.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

# Below glibc's 32 MiB ceiling for the mmap threshold (older glibc rejects more), so only
# buffers larger than that still come from mmap.
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 1 << 30


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds. Returns False (a no-op) off glibc."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL("libc.so.6")
    # Both are needed: the trim threshold alone also freezes the mmap threshold at 128 KiB.
    return bool(
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


def available_bytes() -> int | None:
    """The memory the OS could give this process now (Linux's MemAvailable); None elsewhere."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
