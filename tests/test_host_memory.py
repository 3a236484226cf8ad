"""host_memory.keep_freed_memory: multi-MB buffers come from the reused heap, not fresh mmaps.

Checked with glibc's own accounting (mallinfo2: `hblkhd` = bytes in mmapped chunks, `arena` =
heap bytes) in fresh interpreters, because the setting is process-wide.
"""

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

REPO = str(Path(__file__).resolve().parents[1])

CODE = """
import ctypes, sys
from chartjax import host_memory
libc = ctypes.CDLL("libc.so.6")
class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "keep":
    assert host_memory.keep_freed_memory()
grew = []
for mb in (8, 16):
    before = libc.mallinfo2().hblkhd
    p = libc.malloc(mb << 20)
    grew.append(libc.mallinfo2().hblkhd - before)
    libc.free(p)
print(grew[0] >> 20, grew[1] >> 20, libc.mallinfo2().arena >> 20)
"""


def _run(mode):
    res = subprocess.run(
        [sys.executable, "-c", CODE, mode], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return [int(v) for v in res.stdout.split()]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc mallopt only")
def test_keep_freed_memory_serves_buffers_from_the_heap():
    mmapped_8, mmapped_16, _ = _run("default")
    assert mmapped_8 >= 8 and mmapped_16 >= 16  # glibc's default: each new size is a fresh mmap
    mmapped_8, mmapped_16, heap_after_free = _run("keep")
    assert mmapped_8 == 0 and mmapped_16 == 0
    assert heap_after_free >= 16  # freed memory stays for the next step


@pytest.mark.skipif(not os.path.exists("/proc/meminfo"), reason="no /proc/meminfo off Linux")
def test_available_bytes_reads_meminfo():
    from chartjax import host_memory  # importing changes nothing (only keep_freed_memory does)

    with open("/proc/meminfo") as f:
        want = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    got = host_memory.available_bytes()
    assert got > 0 and abs(got - want) < 2**30  # the two reads are moments apart
