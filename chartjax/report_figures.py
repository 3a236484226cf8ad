"""The figures report.html shows beside an evaluation's questions, from the task's TFDS build.

FigureQA's rows name no image file: a question's id is `<image_index>/<question_index>`
(docs/design.md §8) and its figure is a PNG inside the figure's record. The figures of the rows a
report shows are written once per split as `<eval>/.figures/<split>/<image_index>.png` (they
do not change from one evaluation step to the next; beside the split folders, which hold only
`step_<N>/`, as `.parts/` does) and the report inlines them as thumbnails.
Sources without figure records (one image per example, or none) get no folder.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable

from chartjax import file_modes


def write_figures(source, split: str, stems: Iterable[str], folder: str) -> str | None:
    """Writes `<folder>/<stem>.png` for each figure stem (`str(image_index)`) not there yet,
    reading the split's records in order until all are found; returns the folder, or None when
    `source` does not group examples by figure."""
    group_key = getattr(source, "group_key", None)
    image_key = getattr(source, "image_key", None)
    if not group_key or not image_key or not hasattr(source, "data_source"):
        return None
    wanted = {s for s in stems if not os.path.exists(os.path.join(folder, f"{s}.png"))}
    if wanted:
        records = source.data_source(split)
        for i in range(len(records)):
            record = records[i]
            stem = str(int(record[group_key]))
            if stem in wanted:
                _write(os.path.join(folder, f"{stem}.png"), bytes(record[image_key]))
                wanted.discard(stem)
                if not wanted:
                    break
    return folder


def _write(path: str, data: bytes) -> None:
    """Whole or not at all: a report never links a half-written figure."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".figure.", dir=os.path.dirname(path))
    try:
        file_modes.as_new_file(fd)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
