"""The figures report.html shows beside an evaluation's rows, from the task's TFDS build.

The rows name no image file. FigureQA's: a question's id is `<image_index>/<question_index>`
(docs/design.md §8) and its figure is a PNG inside the figure's record, written as
`<image_index>.png`. DePlot's (one image per example, a TfdsSource with an `image_key`): the
example's own chart, written as `<figure_stem(id)>.png`. The figures of the rows a
report shows are written once per split under `<eval>/.figures/<split>/` (they do not change
from one evaluation step to the next; beside the split folders, which hold only `step_<N>/`, as
`.parts/` does) and the report inlines them as thumbnails. Sources without images get no folder.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable

from chartjax import file_modes


def figure_stem(example_id) -> str:
    """The file stem of an example's own chart in a figures folder: its id with every
    character that is not a letter, digit, `-`, `_` or `.` percent-encoded (one file per id,
    no subfolders: `statista/two_col-3` -> `statista%2Ftwo_col-3`)."""
    from urllib.parse import quote

    return quote(str(example_id), safe="")


def write_figures(source, split: str, stems: Iterable[str], folder: str) -> str | None:
    """Writes `<folder>/<stem>.png` for each figure stem (`str(image_index)`, or an example's
    `figure_stem(id)`) not there yet, reading the split's records in order until all are found;
    returns the folder, or None when `source` has no images to show."""
    group_key = getattr(source, "group_key", None)
    image_key = getattr(source, "image_key", None)
    if not image_key or not hasattr(source, "data_source" if group_key else "examples"):
        return None
    wanted = {s for s in stems if not os.path.exists(os.path.join(folder, f"{s}.png"))}
    if wanted and not group_key:  # one image per example (its records carry `image_bytes`)
        for ex in source.examples(split, 0, 1):
            stem = figure_stem(_text(ex["id"]))
            if stem in wanted and "image_bytes" in ex:
                _write(os.path.join(folder, f"{stem}.png"), bytes(ex["image_bytes"]))
                wanted.discard(stem)
                if not wanted:
                    break
    elif wanted:
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


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


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
