"""`make test`'s scheduling: whole files, heaviest first, to two workers of different widths.

The root conftest gives xdist's first worker (gw0, and any run without xdist) 8 simulated CPU
devices and every other worker one: on one device a tiny model's steps and saves compile and run
as a single program instead of an 8-way partitioned one (about 8-24% less CPU on a tiny training
run). A file that needs several devices says so with `pytest.mark.multi_device` (on the module
or on a test; either pins the whole file); this scheduler sends such files to gw0 only, first,
and shares the other files between the workers as they free up (xdist's `loadfile`, with a
filter). Which files carry the mark is read from their text: the controlling process does not
collect tests, and the mark is the one place that says it.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from xdist.scheduler import LoadFileScheduling

MULTI_DEVICE_WORKER = "gw0"
_MARK = re.compile(r"\bmark\.multi_device\b")


@functools.cache
def needs_devices(path: str) -> bool:
    """Whether the test file at `path` (a nodeid's file part) uses the multi_device mark."""
    try:
        return bool(_MARK.search(Path(path).read_text()))
    except OSError:  # not a file of ours (a doctest id, a plugin's item): any worker
        return False


class DeviceScheduling(LoadFileScheduling):
    """xdist's `loadfile` with multi-device files kept for gw0 (which takes them first)."""

    def _runnable(self, node) -> list[str]:
        multi = node.gateway.id == MULTI_DEVICE_WORKER
        pinned = [s for s in self.workqueue if needs_devices(s)]
        free = [s for s in self.workqueue if not needs_devices(s)]
        return pinned + free if multi else free

    def _assign_work_unit(self, node) -> None:
        runnable = self._runnable(node)
        if runnable:  # the base class hands out the queue's first unit: put this node's there
            self.workqueue.move_to_end(runnable[0], last=False)
            super()._assign_work_unit(node)

    def _reschedule(self, node) -> None:
        # The base class shuts a node down only when the whole queue is empty: a one-device
        # worker whose remaining files all need devices would wait for ever.
        if not node.shutting_down and self.workqueue and not self._runnable(node):
            node.shutdown()
            return
        super()._reschedule(node)
