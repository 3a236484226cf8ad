"""The HuggingFace name-map machinery of the post-LN families (TAPAS, DeBERTa, BART).

A family supplies `name_of(path) -> (hf_name, kind)` for every chartjax variable and, for tied
tables, the extra HF names that hold the same tensor. Kinds: `copy`, `T` (HF `Linear.weight
[out, in]` <-> chartjax `[in, out]`), `conv` (torch Conv1d `[out, in/groups, k]` <-> `[k,
in/groups, out]`), `row` (HF `[1, n]` buffer <-> `[n]`). `to_hf_state_dict` gives the full HF
`state_dict` (tied copies included), so `torch_model.load_state_dict(..., strict=True)` accepts
it; loading refuses HF tensors that no chartjax variable takes, so an unimplemented HF feature
cannot go unnoticed.

Neither torch nor transformers is imported here (safetensors reads and writes files; torch only
for `pytorch_model.bin`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping

import numpy as np
from flax import nnx

from chartjax import file_modes
from chartjax.interop import hf_files

Path = tuple[str | int, ...]
NameFn = Callable[[Path], tuple[str, str]]


def _to_hf(arr: np.ndarray, kind: str) -> np.ndarray:
    if kind == "T":
        return arr.T
    if kind == "conv":
        return np.transpose(arr, (2, 1, 0))
    if kind == "row":
        return arr[None, :]
    return arr


def _from_hf(arr: np.ndarray, kind: str) -> np.ndarray:
    if kind == "T":
        return arr.T
    if kind == "conv":
        return np.transpose(arr, (2, 1, 0))
    if kind == "row":
        return arr.reshape(-1)
    return arr


def _hf_shape(shape: tuple[int, ...], kind: str) -> tuple[int, ...]:
    """The HF shape of a chartjax variable of `shape` (for messages)."""
    if kind in ("T", "conv"):
        return shape[::-1]
    return (1, *shape) if kind == "row" else shape


def mapped_variables(model) -> list[tuple[Path, nnx.Variable]]:
    """Every weight-holding variable (parameters and buffers; not RNG state), flat."""
    flat = nnx.to_flat_state(nnx.state(model))
    return [
        (tuple(p), v)
        for p, v in flat
        if isinstance(v, nnx.Variable) and not isinstance(v, nnx.RngState)
    ]


def load_state_dict(
    model,
    tensors: Mapping[str, np.ndarray],
    name_of: NameFn,
    *,
    aliases: Mapping[str, tuple[str, ...]] | None = None,
    ignore: Iterable[str] = (),
    allow_missing: Iterable[str] = (),
    where: str = "checkpoint",
    seed: int = 0,
) -> None:
    """Copy HF tensors into `model` in place (float32), checking every shape.

    `aliases[name]`: other HF names that hold the same (tied) tensor; any one of them may be the
    one stored. `ignore`: regexes of HF tensors with no chartjax counterpart that are safe to drop
    (non-persistent buffers, pretraining heads). `allow_missing`: regexes of HF names that may be
    absent, the variable then keeping its initial value (a new classification head; the model
    must be concrete for those). `model` may be abstract (`nnx.eval_shape`); its RNG streams are
    then filled from `seed`, so loading never runs the random initializers.
    """
    import jax
    import jax.numpy as jnp

    aliases = aliases or {}
    used: set[str] = set()
    missing: dict[str, tuple] = {}
    shapes: list[tuple[str, tuple, tuple]] = []
    missing_ok = [re.compile(p) for p in allow_missing]
    flat = nnx.to_flat_state(nnx.state(model))
    for n, (path, var) in enumerate(flat):
        if isinstance(var, nnx.RngKey) and isinstance(var.get_value(), jax.ShapeDtypeStruct):
            var.set_value(jax.random.fold_in(jax.random.key(seed), n))
            continue
        if isinstance(var, nnx.RngCount) and isinstance(var.get_value(), jax.ShapeDtypeStruct):
            var.set_value(jnp.zeros(var.shape, jnp.uint32))
            continue
        if isinstance(var, nnx.RngState) or not isinstance(var, nnx.Variable):
            continue
        name, kind = name_of(tuple(path))
        candidates = (name, *aliases.get(name, ()))
        found = [c for c in candidates if c in tensors]
        if not found:
            abstract = isinstance(var.get_value(), jax.ShapeDtypeStruct)
            if abstract or not any(p.fullmatch(name) for p in missing_ok):
                missing[name] = _hf_shape(tuple(var.shape), kind)
            continue
        used.update(found)
        arr = _from_hf(np.asarray(tensors[found[0]], dtype=np.float32), kind)
        if arr.shape != tuple(var.shape):
            shapes.append(
                (found[0], np.shape(tensors[found[0]]), _hf_shape(tuple(var.shape), kind))
            )
            continue
        var.set_value(jnp.asarray(arr))
    pats = [re.compile(p) for p in ignore]
    unused = {
        k: np.shape(v)
        for k, v in tensors.items()
        if k not in used and not any(p.fullmatch(k) for p in pats)
    }
    hf_files.refuse_mismatch(
        where, type(model).__name__, unused=unused, missing=missing, shapes=shapes
    )
    nnx.update(model, nnx.from_flat_state(flat))


def to_state_dict(
    model, name_of: NameFn, *, aliases: Mapping[str, tuple[str, ...]] | None = None
) -> dict[str, np.ndarray]:
    """HF-named float32 tensors (contiguous, writable copies), every tied alias included."""
    aliases = aliases or {}
    out = {}
    for path, var in mapped_variables(model):
        name, kind = name_of(path)
        arr = np.array(_to_hf(np.asarray(var[...], dtype=np.float32), kind), order="C")
        for n in (name, *aliases.get(name, ())):
            out[n] = arr
    return out


def read_tensors(path: str) -> dict[str, np.ndarray]:
    """All tensors of an HF directory (chartjax/interop/hf_files.py says which files)."""
    return hf_files.read_tensors(path)


def write_dir(
    path: str,
    hf_config: dict,
    tensors: dict[str, np.ndarray],
    json_files: dict | None = None,
    *,
    safe_serialization: bool = True,
) -> None:
    """`config.json` + `model.safetensors` (or `pytorch_model.bin`, needs torch) (+ other JSON
    files, e.g. generation_config.json)."""
    os.makedirs(path, exist_ok=True)
    for name, content in {"config.json": hf_config, **(json_files or {})}.items():
        with open(os.path.join(path, name), "w") as f:
            json.dump(content, f, indent=2)
    if safe_serialization:
        from safetensors.numpy import save_file

        save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
        file_modes.as_new_file(os.path.join(path, "model.safetensors"))  # written 0600
        return
    import torch

    torch.save(
        {k: torch.from_numpy(np.array(v)) for k, v in tensors.items()},
        os.path.join(path, "pytorch_model.bin"),
    )


def read_config(path: str) -> tuple[dict, str]:
    return hf_files.read_config(path)


def leaf(prefix: str, name: str) -> tuple[str, str]:
    """A chartjax leaf (Dense kernel/bias, LayerNorm scale/bias, Embedding table) -> HF."""
    if name == "kernel":
        return f"{prefix}.weight", "T"
    if name in ("scale", "embedding"):
        return f"{prefix}.weight", "copy"
    if name == "bias":
        return f"{prefix}.bias", "copy"
    raise KeyError(name)


def path_str(path: Path) -> str:
    return ".".join(map(str, path))


_BERT_LAYER = {
    "attention_norm": "attention.output.LayerNorm",
    "mlp_norm": "output.LayerNorm",
}
_BERT_MLP = {"wi": "intermediate.dense", "wo": "output.dense"}


def bert_layer_name(pre: str, sub: Path, attention: Mapping[str, str]) -> tuple[str, str]:
    """A post-LN encoder layer's leaf `sub` under HF prefix `pre` (BERT/TAPAS/DeBERTa names)."""
    head = sub[0]
    if head in _BERT_LAYER:
        return leaf(f"{pre}.{_BERT_LAYER[head]}", sub[1])
    if head == "mlp":
        return leaf(f"{pre}.{_BERT_MLP[sub[1]]}", sub[2])
    if head == "attention":
        return leaf(f"{pre}.{attention[sub[1]]}", sub[-1])
    raise KeyError(path_str(sub))
