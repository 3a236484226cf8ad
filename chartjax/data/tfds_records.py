"""Reading chartjax's TFDS builds by random access (`tfds.data_source` over array_record).

The builds store one record per figure or chart (docs/design.md §8): FigureQA's questions and
ChartCheck's claims are sequences inside their figure's or chart's record. Everything that reads
a build sees them as the flat examples of the 1.0.0 builds, one per question or claim, with the
figure's or chart's fields repeated (`expand`): the ids and the fields the tasks, the scorers
and inference read are unchanged.
"""

from __future__ import annotations

import collections.abc
import functools
import glob
import json
import os
from collections.abc import Iterator

import numpy as np

# The sequence feature of a record and whether its items become the examples (chartqa's
# records hold `questions` too: a chart and its questions).
NESTED = {"questions": "figureqa", "claims": "chartcheck"}


def builder(builder_dir: str):
    """The read-only builder of a build folder (cached while its dataset_info.json stays)."""
    info = os.path.join(builder_dir, "dataset_info.json")
    stamp = os.stat(info).st_mtime_ns if os.path.exists(info) else None
    return _builder(builder_dir, stamp)


@functools.lru_cache(maxsize=64)
def _builder(builder_dir: str, stamp):
    import tensorflow_datasets as tfds

    return tfds.builder_from_directory(builder_dir)


def data_source(builder_dir: str, split: str, skip_decoding=("image",)):
    """Random access to `split` of a built dataset; the `skip_decoding` features stay bytes."""
    import tensorflow_datasets as tfds

    b = builder(builder_dir)
    features = b.info.features
    decoders = {k: tfds.decode.SkipDecoding() for k in skip_decoding if k in features}
    try:
        source = b.as_data_source(split=split, decoders=decoders or None)
        return Typed(source, features, builder_dir, split)
    except RuntimeError as e:  # Riegeli: a damaged file cannot even be opened
        raise DamagedBuild(_damaged(builder_dir, split, None, e)) from None
    except NotImplementedError as e:
        raise ValueError(
            f"{builder_dir} is stored as {b.info.file_format.value}: chartjax reads builds by "
            "random access and needs array_record; rebuild it (`tfds build` writes array_record "
            "by default)"
        ) from e


class DamagedBuild(ValueError):
    """A record of a build cannot be read (a truncated or corrupted array_record file)."""


def _damaged(builder_dir: str, split: str, i: int | None, err: Exception) -> str:
    base = split.split("[")[0]
    files = sorted(glob.glob(os.path.join(builder_dir, f"*-{base}.array_record-*")))
    where = ", ".join(files) if files else f"{builder_dir} (split {base})"
    what = "cannot be opened" if i is None else f"record {i} cannot be read"
    name = os.path.basename(os.path.dirname(builder_dir.rstrip("/")))
    return (
        f"{where}: split {base} of the build, {what} ({err}); the build is damaged: rebuild "
        f"it with `tfds build tfds_builders/{name} ... --overwrite`"
    )


class Typed(collections.abc.Sequence):
    """A data source whose sequences come back as TFDS's tf.data path gives them (numpy arrays
    of the feature's dtype and shape, empty ones included; text as object arrays):
    `tfds.data_source` decodes them to Python lists. A record that cannot be read is a
    DamagedBuild naming the file, split and record."""

    def __init__(self, source, features, builder_dir: str = "", split: str = ""):
        self._source, self._features = source, features
        self._where = (builder_dir, split)

    def __len__(self) -> int:
        return len(self._source)

    def __getitem__(self, i: int) -> dict:
        try:
            raw = self._source[i]
        except IndexError:
            raise
        except RuntimeError as e:  # Riegeli's "Corrupted Riegeli/records file: ..."
            raise DamagedBuild(_damaged(*self._where, i, e)) from None
        return typed(raw, self._features)


def typed(value, feature):
    import tensorflow_datasets as tfds

    if isinstance(feature, tfds.features.FeaturesDict):
        return {k: typed(v, feature[k]) if k in feature else v for k, v in value.items()}
    if isinstance(feature, tfds.features.Sequence):
        inner = feature.feature
        if isinstance(inner, tfds.features.FeaturesDict):
            return {k: _stacked(v, inner[k]) for k, v in value.items()}
        return _stacked(value, inner)
    return value


def _stacked(values, item_feature):
    import tensorflow_datasets as tfds

    if not isinstance(values, list):
        return values
    if isinstance(item_feature, tfds.features.Sequence):  # ragged: an object array of rows
        rows = np.empty(len(values), object)
        rows[:] = [_stacked(v, item_feature.feature) for v in values]
        return rows
    if isinstance(item_feature, tfds.features.Text):
        return np.asarray(values, dtype=object) if values else np.zeros((0,), object)
    dtype = getattr(item_feature, "np_dtype", None)
    shape = getattr(item_feature, "shape", ())
    if not values and dtype is not None and None not in shape:
        return np.zeros((0, *shape), dtype)
    return np.asarray(values, dtype=dtype)


def expand(record: dict) -> list[dict]:
    """A record's examples: one per question / claim (the record's own fields repeated in
    each), or the record itself when it has no such sequence."""
    for key in NESTED:
        if key in record:
            outer = {k: v for k, v in record.items() if k != key}
            del outer["id"]
            items = record[key]
            n = len(items["id"])
            out = [{**outer, **{k: v[i] for k, v in items.items()}} for i in range(n)]
            if key == "claims":  # stored as JSON text: a list per claim (chartcheck 2.0.0)
                for ex in out:
                    names = decode_json_list(ex["reasoning_types"])
                    ex["reasoning_types"] = np.asarray([t.encode() for t in names], object)
            return out
    return [record]


def num_items(record: dict) -> int:
    for key in NESTED:
        if key in record:
            return len(record[key]["id"])
    return 1


def split_examples(builder_dir: str, split: str, skip_decoding=("image",)) -> Iterator[dict]:
    """Every example of a split in order (questions and claims expanded)."""
    source = data_source(builder_dir, split, skip_decoding)
    for i in range(len(source)):
        yield from expand(source[i])


def flat_features(features) -> dict:
    """A build's features as its flat examples have them: a record's sequence of questions
    or claims contributes its items' features, not itself."""
    out = {}
    for key, feature in features.items():
        if key in NESTED:
            out.update(dict(feature.feature.items()))
        elif key != "id" or not any(k in features for k in NESTED):
            out[key] = feature
    for key in NESTED:
        if key in features:
            out["id"] = features[key].feature["id"]
    return out


def decode_json_list(value) -> list:
    """A JSON-encoded list field (ChartCheck's per-claim reasoning types)."""
    text = value.decode("utf-8") if isinstance(value, bytes) else str(value)
    return json.loads(text) if text else []
