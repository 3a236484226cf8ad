"""The files of a HuggingFace checkpoint directory, read as HF's `from_pretrained` reads them,
with errors that name the file: `config.json` (invalid JSON, a field of the wrong type), the
weight files (`model.safetensors`, or the shards `model.safetensors.index.json` lists; else the
same for `pytorch_model.bin`), and the check that a model took every tensor of them.

Shared by hf.py (T5, Pix2Struct) and hf_name_map.py (TAPAS, DeBERTa, BART).
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterable, Mapping

import numpy as np

CONFIG = "config.json"
# (single file, index of shards, what other files of the kind look like); safetensors first,
# as HF prefers them.
_KINDS = (
    ("model.safetensors", "model.safetensors.index.json", r".*\.safetensors"),
    ("pytorch_model.bin", "pytorch_model.bin.index.json", r"pytorch_model.*\.bin"),
)


# --------------------------------------------------------------------------- config.json


def read_config(path: str) -> tuple[dict, str]:
    """(the dict of `path/config.json`, that file's path); bad JSON names the file."""
    cfg_file = os.path.join(path, CONFIG)
    with open(cfg_file) as f:
        try:
            raw = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{cfg_file}: invalid JSON ({e})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{cfg_file}: expected a JSON object, got {type(raw).__name__}")
    return raw, cfg_file


def check_ints(hf: Mapping, fields: Iterable[str], where: str, section: str = "") -> None:
    """Refuse a size or count field that is present but not an integer ("24" would otherwise
    fail later in a comparison or a dataclass check that names neither file nor field)."""
    for f in fields:
        v = hf.get(f)
        items = v if isinstance(v, list | tuple) else [v]
        if v is not None and any(isinstance(x, bool) or not isinstance(x, int) for x in items):
            raise ValueError(
                f"{where}: field {section}{f} must be an integer, got {v!r} ({type(v).__name__})"
            )


def unknown_activation(act, where: str, field: str, supported: Iterable[str]) -> ValueError:
    return ValueError(
        f"unknown activation {act!r} in {where} field {field}, supported: {', '.join(supported)}"
    )


# --------------------------------------------------------------------------- weight files


def weight_files(path: str) -> tuple[list[str], dict[str, str] | None]:
    """(the weight files HF reads from directory `path`, the index's tensor -> file map or None).

    `model.safetensors`, or the shards its index lists; else the same for `pytorch_model.bin`.
    A folder that holds both a single file and an index, or only files of other names, is
    refused naming them: which one is the model cannot be told. Other weight files next to the
    chosen ones (a backup) are left out with a warning.
    """
    names = set(os.listdir(path))
    unnamed: list[str] = []  # files of a kind that has neither the single file nor an index
    for single, index, pattern in _KINDS:
        present = sorted(f for f in names if re.fullmatch(pattern, f))
        weight_map = None
        if single in names and index in names:
            raise ValueError(
                f"{path}: holds both {single} and the shard index {index}; which is the "
                "model's is ambiguous: remove one"
            )
        if index in names:
            weight_map = _weight_map(path, index, names)
            chosen = sorted(set(weight_map.values()))
        elif single in names:
            chosen = [single]
        else:
            unnamed += present
            continue
        stray = unnamed + [f for f in present if f not in chosen]
        if stray:
            warnings.warn(
                f"{path}: not reading {stray}: the weights are {', '.join(chosen)}"
                + (f" (listed by {index})" if weight_map else ""),
                stacklevel=4,
            )
        return [os.path.join(path, f) for f in chosen], weight_map
    if unnamed:
        raise ValueError(
            f"{path}: weight files {unnamed} have no HF name: expected model.safetensors or "
            "pytorch_model.bin, or the shards their *.index.json lists; rename the model's file "
            "to model.safetensors if it is one file"
        )
    raise FileNotFoundError(
        f"{path}: no model.safetensors or pytorch_model.bin (nor their *.index.json shards)"
    )


def _weight_map(path: str, index: str, names: set[str]) -> dict[str, str]:
    """The index's tensor -> shard file map; each shard must be there."""
    index_file = os.path.join(path, index)
    with open(index_file) as f:
        try:
            weight_map = json.load(f).get("weight_map")
        except (json.JSONDecodeError, AttributeError) as e:
            raise ValueError(f"{index_file}: invalid index ({e})") from None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(f"{index_file}: no `weight_map` of tensor names to files")
    absent = sorted({s for s in weight_map.values() if not isinstance(s, str) or s not in names})
    if absent:
        raise ValueError(f"{index_file}: lists shards that are not in {path}: {absent}")
    return weight_map


def _read_file(file: str) -> dict[str, np.ndarray]:
    if file.endswith(".safetensors"):
        from safetensors import SafetensorError
        from safetensors.numpy import load_file

        try:
            return load_file(file)
        except SafetensorError as e:
            raise ValueError(f"{file}: truncated or damaged safetensors file ({e})") from None
    import pickle

    import torch

    try:
        sd = torch.load(file, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, pickle.UnpicklingError) as e:
        raise ValueError(f"{file}: truncated or damaged PyTorch file ({e})") from None
    return {k: v.float().numpy() for k, v in sd.items()}


def read_tensors(path: str) -> dict[str, np.ndarray]:
    """All tensors of the weight files of HF directory `path` (see `weight_files`); a tensor in
    two files, or not where the index places it, is refused naming the files."""
    files, weight_map = weight_files(path)
    out: dict[str, np.ndarray] = {}
    origin: dict[str, str] = {}
    for file in files:
        for k, v in _read_file(file).items():
            if k in origin:
                raise ValueError(f"{path}: tensor {k} is in both {origin[k]} and {file}")
            out[k], origin[k] = v, os.path.basename(file)
    if weight_map is not None:
        wrong = [
            f"{k} (index: {weight_map.get(k)}, found in: {origin.get(k)})"
            for k in sorted(set(weight_map) | set(origin))
            if weight_map.get(k) != origin.get(k)
        ]
        if wrong:
            raise ValueError(f"{path}: the shards do not hold what their index lists: {wrong}")
    return out


def read_named(path: str, names: Iterable[str]) -> dict[str, np.ndarray]:
    """The tensors of `names` that HF directory `path` stores (absent ones left out), reading
    only those from safetensors files; PyTorch files are read whole."""
    want = set(names)
    out: dict[str, np.ndarray] = {}
    for file in weight_files(path)[0]:
        if not file.endswith(".safetensors"):
            out.update({k: v for k, v in _read_file(file).items() if k in want})
            continue
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(file, framework="numpy") as f:
                out.update({k: f.get_tensor(k) for k in want & set(f.keys())})
        except SafetensorError as e:
            raise ValueError(f"{file}: truncated or damaged safetensors file ({e})") from None
    return out


# --------------------------------------------------------------------------- the check


class WeightsMismatch(ValueError, KeyError):
    """The checkpoint's tensors and the model's variables differ. A KeyError too, as a missing
    tensor was before."""

    __str__ = Exception.__str__  # not KeyError's quoted repr


def refuse_mismatch(
    where: str,
    model: str,
    *,
    unused: Mapping[str, tuple],
    missing: Mapping[str, tuple],
    shapes: Iterable[tuple[str, tuple, tuple]] = (),
) -> None:
    """Raise WeightsMismatch listing every unused and missing tensor and wrong shape, if any
    (shapes as HF stores them)."""
    shapes = list(shapes)
    lines = [f"unused: {k} {tuple(s)}" for k, s in sorted(unused.items())]
    lines += [f"missing: {k} {tuple(s)}" for k, s in sorted(missing.items())]
    lines += [f"shape: {k} is {tuple(g)}, config.json gives {tuple(w)}" for k, g, w in shapes]
    if not lines:
        return
    why = (
        "; an unused tensor is one chartjax does not implement, or beyond the sizes config.json "
        "gives, such as its layer counts"
        if unused
        else ""
    )
    raise WeightsMismatch(
        f"{where}: the weights do not fit the {model} its config.json describes "
        f"({len(unused)} unused, {len(missing)} missing, {len(shapes)} of a wrong shape{why}):\n  "
        + "\n  ".join(lines)
    )
