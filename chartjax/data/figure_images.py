"""Each figure decoded once: a TFDS source whose examples (questions) point into a cache of
preprocessed figure images instead of carrying their encoded bytes.

A FigureQA record is a figure with its ~13 questions (tfds_builders/figureqa, 2.0.0). Every
figure of this process's share of a split (its own figures: with N processes each caches about
1/N of the split) is read once: its image decoded and preprocessed (`image_fn`, in the loader's
worker processes) into a uint8 array [figures, H, W, 3], its questions kept in memory with only the
fields the task reads and `image_row`, a row of that array. Training and evaluation then read
questions from memory; the task's batch map (`Task.batch_features`) gathers the rows of a whole
batch at once (`images`). Decoding a figure per question cost 1.3 CPU ms per question (issue
18, item 3).

The array is held in memory, or with `cache_dir` written once as a .npy file beside a JSON
stamp and memory-mapped (the page cache then holds it; all of FigureQA's train1 at 256 px is
19.7 GB) and reused by later runs of the same build, share and preprocessing.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from chartjax.data import loader, sources, tfds_records

_BLOCK_BITS = 32  # image_row = block << 32 | row: a block per (split slice) cache


@dataclasses.dataclass
class FigureImageSource(sources.TfdsSource):
    """A `TfdsSource` whose examples carry `image_row` (see the module docstring).

    image_fn: the encoded image -> uint8 image of `image_shape` (picklable: it runs in the
      loader's worker processes).
    cache_key: names `image_fn`'s settings in cache file names (a change makes a new cache).
    read_keys: the features the task reads besides `group_key` (nothing else is parsed).
    group_key: the feature naming the figure (one image per value within a split).
    cache_dir: where the .npy caches go; None holds them in memory.
    """

    image_fn: Callable | None = None
    image_shape: tuple[int, int, int] = (0, 0, 3)
    cache_key: str = ""
    read_keys: Sequence[str] = ()
    group_key: str = "image_index"
    cache_dir: str | None = None
    _blocks: list = dataclasses.field(default_factory=list, init=False, repr=False)

    def _read_examples(self, split: str, process_index: int, process_count: int) -> list[dict]:
        """This process's questions of `split`, each with `image_row` (its figures cached)."""
        source = self.data_source(split)
        mine = sources.process_records(len(source), process_index, process_count)
        sub = f"{split}_{process_index}of{process_count}"
        keys = sorted({"id", *self.read_keys})
        base = len(self._blocks) << _BLOCK_BITS
        questions, figures = [], []
        for row, r in enumerate(mine):
            record = source[r]
            figures.append(int(record[self.group_key]))
            for q in tfds_records.expand(record):
                missing = [k for k in keys if k not in q]
                if missing:
                    raise KeyError(f"{self.builder_dir}: the dataset has no feature {missing}")
                questions.append({**{k: q[k] for k in keys}, "image_row": np.int64(base + row)})
        encoded = (source[r][self.image_key] for r in mine)  # read again only if not cached
        self._blocks.append(self._cache(sub, figures, encoded))
        return questions

    def _cache_paths(self, sub: str) -> tuple[str, str] | None:
        if self.cache_dir is None:
            return None
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{sub}_{self.cache_key}")
        base = os.path.join(os.path.expanduser(self.cache_dir), name)
        return base + ".npy", base + ".json"

    def _stamp(self, figures) -> dict:
        return {
            "builder_dir": os.path.abspath(self.builder_dir),
            "cache_key": self.cache_key,
            "image_shape": list(self.image_shape),
            "figures": [int(f) for f in figures],
        }

    def _cache(self, sub: str, figures: list[int], encoded: Iterator[bytes]) -> np.ndarray:
        """The uint8 images of `figures` in that order (`encoded`: their encoded images)."""
        paths = self._cache_paths(sub)
        if paths and os.path.exists(paths[1]):
            with open(paths[1]) as f:
                stamp = json.load(f)
            if stamp == self._stamp(figures):  # same build, share and preprocessing
                return np.load(paths[0], mmap_mode="r")
        shape = (len(figures), *self.image_shape)
        if paths:
            os.makedirs(os.path.dirname(paths[0]), exist_ok=True)
            partial = paths[0] + ".partial"
            block = np.lib.format.open_memmap(partial, mode="w+", dtype=np.uint8, shape=shape)
        else:
            _check_memory(self.builder_dir, sub, shape)
            block = np.empty(shape, np.uint8)
        decode = functools.partial(_decoded, self.image_fn)
        filled = 0
        for images in loader.map_ordered(decode, loader.chunked(encoded, 64, False)):
            block[filled : filled + len(images["image"])] = images["image"]
            filled += len(images["image"])
        if filled != len(figures):  # a figure lost on the way would read as zeros
            raise RuntimeError(f"{self.builder_dir} {sub}: cached {filled} of {len(figures)}")
        if paths:
            block.flush()
            del block
            os.replace(partial, paths[0])
            with open(paths[1], "w") as f:
                json.dump(self._stamp(figures), f)
            block = np.load(paths[0], mmap_mode="r")
        return block

    @property
    def cached_figures(self) -> int:
        """Figures decoded into the cache so far (every split slice read)."""
        return sum(len(b) for b in self._blocks)

    def images(self, rows: np.ndarray, offsets: np.ndarray | None = None, pad: int = 0):
        """The cached images of `image_row` values `rows`, each padded by `pad` (pad // 2
        before, as tf.image.resize_with_crop_or_pad) and cropped back at its (dy, dx) in `offsets`
        ([0, pad]) when `pad` > 0: the paper's augmentation, one copy per image from the cache."""
        rows = np.asarray(rows, np.int64)
        if (rows < 0).any():
            raise ValueError(f"{self.builder_dir}: a question's figure is not in the cache")
        blocks, within = rows >> _BLOCK_BITS, rows & ((1 << _BLOCK_BITS) - 1)
        if not pad and (blocks == blocks[0]).all():
            return np.take(self._blocks[int(blocks[0])], within, axis=0)
        h, w, _ = self.image_shape
        out = np.zeros((len(rows), *self.image_shape), np.uint8)
        offsets = np.zeros((len(rows), 2), np.int64) if offsets is None else np.asarray(offsets)
        for i, (b, r, (dy, dx)) in enumerate(zip(blocks, within, offsets)):
            # out[y, x] = image[y + dy - pad // 2, x + dx - pad // 2], zeros outside
            sy, sx = int(dy) - pad // 2, int(dx) - pad // 2
            ys, yd = slice(max(sy, 0), h + min(sy, 0)), slice(max(-sy, 0), h - max(sy, 0))
            xs, xd = slice(max(sx, 0), w + min(sx, 0)), slice(max(-sx, 0), w - max(sx, 0))
            out[i, yd, xd] = self._blocks[int(b)][int(r), ys, xs]
        return out


def _check_memory(builder_dir: str, sub: str, shape: tuple[int, ...]) -> None:
    """An in-memory cache may take at most half the memory available now."""
    from chartjax import host_memory

    need, avail = int(np.prod(shape)), host_memory.available_bytes()
    if avail is not None and need > avail // 2:
        raise MemoryError(
            f"{builder_dir} {sub}: {shape[0]} figures at {shape[1:]} take {need / 2**30:.1f} GiB "
            f"in memory, over half the {avail / 2**30:.1f} GiB available; set the task's "
            "image_cache_dir (figureqa_task.image_cache_dir) to a folder with that much disk: "
            "the cache is then a memory-mapped file, written once"
        )


def _decoded(image_fn: Callable, encoded: list[bytes]) -> dict:
    return {"image": np.stack([image_fn(e) for e in encoded])}
