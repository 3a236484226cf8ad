"""Read and write T5X checkpoints (`checkpoint_<step>/`: msgpack `checkpoint` + zarr arrays).

Layout (docs/models.md §1.6): the `checkpoint` file is flax msgpack of
`{'version': 3, 'optimizer': {'target': <params>, 'state': {'step', 'param_states'}}}` (version 0:
the optimizer dict itself). A leaf is an inline array or a TensorStore spec dict whose array path is
relative to the checkpoint directory, either in `kvstore.path` (file-written) or at the top level
(GCS-written / old tensorstore); arrays are zarr v2 directories (gzip, float32 or bfloat16),
read and written with tensorstore (t5x itself is not installable).

Names: chartjax's parameter tree is the T5X tree with two differences: Pix2Struct's
`token_embedder` sits at the top level in chartjax (T5X: `encoder/token_embedder`) and its row/col
tables are `embedders_k/embedding` (T5X: `pos_embedding`); `layers[i]` is T5X's `layers_i`.
Kernels have the same 2-D layout in both (`[in, out]`, heads-major joined axes): no transposes.

Memory: parameters are read (the next one prefetched), cast to float32 and stored one at a time into
an abstract model, so a load never holds two full copies of the weights (inline msgpack arrays are
the exception: the file's arrays are decoded together, then released one by one). Measured by
`tools/bench/t5x_load.py`.
"""

from __future__ import annotations

import copy
import math
import os
import warnings
from collections.abc import Iterator

import numpy as np
from flax import nnx

from chartjax.models import t5 as t5_lib
from chartjax.models.model_configs import Pix2StructConfig, T5Config
from chartjax.models.t5 import pix2struct as p2s_lib

CHECKPOINT_FILE = "checkpoint"
T5X_VERSION = 3
DEFAULT_CHUNK_BYTES = 64 << 20  # t5x's target chunk size
LAYOUTS = ("kvstore", "top_level", "inline")

Path = tuple[str | int, ...]
Leaf = np.ndarray | dict


# --------------------------------------------------------------------------- names


def t5x_path(path: Path, *, pix2struct: bool) -> tuple[str, ...]:
    """chartjax parameter path -> T5X path under `target` (e.g. `encoder/layers_0/...`)."""
    out: list[str] = []
    for p in path:
        if isinstance(p, int):
            if not out or out[-1] != "layers":
                raise KeyError(f"unexpected index in parameter path {path}")
            out[-1] = f"layers_{p}"
        else:
            out.append(p)
    if pix2struct and out[0] == "token_embedder":
        out = ["encoder", *out]
        if out[2].startswith("embedders_") and out[3] == "embedding":
            out[3] = "pos_embedding"
    return tuple(out)


def _params(model) -> list[tuple[Path, nnx.Param]]:
    return [(tuple(k), v) for k, v in nnx.to_flat_state(nnx.state(model, nnx.Param))]


def _is_pix2struct(model) -> bool:
    return isinstance(model, p2s_lib.Pix2Struct)


# --------------------------------------------------------------------------- reading


def _is_spec(x) -> bool:
    return isinstance(x, dict) and "driver" in x and ("kvstore" in x or "path" in x)


def flatten(tree, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Leaf]]:
    """(path, leaf) pairs of a checkpoint tree; spec dicts are leaves."""
    if isinstance(tree, dict) and not _is_spec(tree):
        for k, v in tree.items():
            yield from flatten(v, (*prefix, str(k)))
    else:
        yield prefix, tree


def read_raw(ckpt_dir: str) -> dict:
    """The decoded msgpack `checkpoint` file (leaves: arrays, scalars or spec dicts)."""
    from flax import serialization

    path = os.path.join(ckpt_dir, CHECKPOINT_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{path}: no T5X `checkpoint` file (expected a checkpoint_<step> directory)"
        )
    with open(path, "rb") as f:
        data = f.read()
    try:
        raw = serialization.msgpack_restore(data)
    except Exception as e:  # msgpack raises several unrelated types
        raise ValueError(f"{path}: not a msgpack T5X checkpoint ({e})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: top level is {type(raw).__name__}, expected a dict")
    return raw


def _optimizer(raw: dict, where: str) -> dict:
    opt = raw.get("optimizer", raw) if raw.get("version", 0) >= 1 else raw
    if "target" not in opt:
        raise ValueError(f"{where}: no `target` parameters (keys: {sorted(opt)})")
    return opt


def _ts_spec(spec: dict, ckpt_dir: str, where: str) -> dict:
    """A local tensorstore spec for a saved spec dict (path in `kvstore` or at the top level)."""
    spec = copy.deepcopy(spec)
    kv = spec.get("kvstore")
    rel = kv.get("path") if isinstance(kv, dict) and "path" in kv else spec.get("path")
    spec.pop("path", None)
    if not isinstance(rel, str):
        raise ValueError(f"{where}: tensorstore spec without a path: {spec}")
    # t5x stores paths relative to the checkpoint directory and rewrites the bucket at load time.
    full = rel if os.path.isabs(rel) else os.path.join(ckpt_dir, rel)
    spec["kvstore"] = {"driver": "file", "path": full.rstrip("/") + "/"}
    return spec


def leaf_shape(leaf: Leaf, ckpt_dir: str, where: str) -> tuple[int, ...]:
    """Shape of a leaf without reading its data."""
    if _is_spec(leaf):
        shape = leaf.get("metadata", {}).get("shape")
        if shape is None:
            import tensorstore as ts

            return tuple(ts.open(_ts_spec(leaf, ckpt_dir, where)).result().shape)
        return tuple(int(s) for s in shape)
    return tuple(np.shape(leaf))


def start_read(leaf: Leaf, ckpt_dir: str, where: str):
    """Begin reading a leaf; returns a function that waits and gives the array (stored dtype)."""
    if not _is_spec(leaf):
        arr = np.asarray(leaf)
        return lambda: arr
    import tensorstore as ts

    spec = _ts_spec(leaf, ckpt_dir, where)
    try:
        future = ts.open(spec).result().read()
    except ValueError as e:
        raise ValueError(f"{where}: cannot read {spec['kvstore']['path']}: {e}") from None

    def wait() -> np.ndarray:
        try:
            return np.asarray(future.result())
        except ValueError as e:
            raise ValueError(f"{where}: cannot read {spec['kvstore']['path']}: {e}") from None

    return wait


def read_leaf(leaf: Leaf, ckpt_dir: str, where: str) -> np.ndarray:
    """A leaf's array (inline or from its zarr directory), in its stored dtype."""
    return start_read(leaf, ckpt_dir, where)()


def fill_rng_state(model, seed: int = 0) -> None:
    """Concrete RNG state for an abstract (`nnx.eval_shape`) model, so loading never inits."""
    import jax
    import jax.numpy as jnp

    flat = nnx.to_flat_state(nnx.state(model, nnx.Not(nnx.Param)))
    for n, (_, var) in enumerate(flat):
        if not isinstance(var.get_value(), jax.ShapeDtypeStruct):
            continue
        if isinstance(var, nnx.RngKey):
            var.set_value(jax.random.fold_in(jax.random.key(seed), n))
        elif isinstance(var, nnx.RngCount):
            var.set_value(jnp.zeros(var.shape, jnp.uint32))
    nnx.update(model, nnx.from_flat_state(flat))


def load_params(model, ckpt_dir: str, *, seed: int = 0) -> int:
    """Copy a T5X checkpoint's `target` parameters into `model` in place; returns the step.

    All names and shapes are checked before any array is read; the error lists every missing and
    unexpected parameter and every shape mismatch. Optimizer state is not read.
    """
    import jax.numpy as jnp

    where = os.path.join(ckpt_dir, CHECKPOINT_FILE)
    raw = read_raw(ckpt_dir)
    opt = _optimizer(raw, where)
    stored = dict(flatten(opt["target"]))
    step = _step(opt)
    del raw, opt
    p2s = _is_pix2struct(model)
    flat = nnx.to_flat_state(nnx.state(model, nnx.Param))
    wanted = {t5x_path(tuple(path), pix2struct=p2s): var for path, var in flat}
    # chartjax's OCR box layer (chartjax/models/t5/) is in no released T5X checkpoint: when absent
    # it starts at zero (its initializer, so the model computes as the checkpoint) and says so.
    for k in [k for k in wanted if k[0] == "box_embedding" and k not in stored]:
        var = wanted.pop(k)
        var.set_value(jnp.zeros(var.shape, jnp.float32))
        warnings.warn(
            f"{where}: the T5X checkpoint has no {'/'.join(k)} {tuple(var.shape)} (chartjax's OCR "
            "box layer): initialised to zeros, so the model starts as the checkpoint",
            stacklevel=2,
        )
    problems = [
        f"missing: {'/'.join(k)} {tuple(wanted[k].shape)}"
        for k in sorted(set(wanted) - set(stored))
    ]
    problems += [
        f"unexpected: {'/'.join(k)} {leaf_shape(stored[k], ckpt_dir, where)}"
        for k in sorted(set(stored) - set(wanted))
    ]
    for k in sorted(set(wanted) & set(stored)):
        got = leaf_shape(stored[k], ckpt_dir, where)
        if got != tuple(wanted[k].shape):
            problems.append(
                f"shape mismatch: {'/'.join(k)} is {got} in the checkpoint, "
                f"{tuple(wanted[k].shape)} in the model"
            )
    if problems:
        raise ValueError(
            f"{where}: checkpoint does not match {type(model).__name__} "
            f"({len(problems)} problems):\n  " + "\n  ".join(problems)
        )
    # Stream: the next array is read (tensorstore, in its own threads) while the current one is
    # cast and copied, so at most two arrays are in flight besides the model. `pop` drops our
    # reference so an inline array is freed once copied.
    keys = list(wanted)
    pending = start_read(stored.pop(keys[0]), ckpt_dir, where) if keys else None
    for i, k in enumerate(keys):
        current = pending
        pending = (
            start_read(stored.pop(keys[i + 1]), ckpt_dir, where) if i + 1 < len(keys) else None
        )
        arr = current().astype(np.float32, copy=False)
        wanted[k].set_value(jnp.asarray(arr))
        del arr, current
    nnx.update(model, nnx.from_flat_state(flat))
    fill_rng_state(model, seed)
    return step


def _step(opt: dict) -> int:
    step = opt.get("state", {}).get("step", 0)
    return int(np.asarray(step)) if not _is_spec(step) else 0


def load_optimizer_state(ckpt_dir: str, model=None) -> tuple[int, dict]:
    """(step, {param path: {slot: array}}) of `state/param_states` (e.g. Adafactor's
    `v_row, v_col, v, m`), read in full. With `model`, keys are chartjax parameter paths,
    otherwise T5X paths; entries that match no model parameter are kept under their T5X path."""
    where = os.path.join(ckpt_dir, CHECKPOINT_FILE)
    opt = _optimizer(read_raw(ckpt_dir), where)
    by_t5x = {}
    if model is not None:
        p2s = _is_pix2struct(model)
        by_t5x = {t5x_path(p, pix2struct=p2s): p for p, _ in _params(model)}
    out: dict = {}
    for path, leaf in flatten(opt.get("state", {}).get("param_states", {})):
        *param, slot = path
        key = by_t5x.get(tuple(param), tuple(param))
        out.setdefault(key, {})[slot] = read_leaf(leaf, ckpt_dir, where)
    return _step(opt), out


# --------------------------------------------------------------------------- configs


def infer_config(ckpt_dir: str, *, dtype: str = "float32") -> T5Config | Pix2StructConfig:
    """A chartjax config from the parameter shapes of a T5X checkpoint.

    Not stored in the checkpoint, hence assumed: gated GELU when `wi_0`/`wi_1` exist (T5.1.1,
    Flan-T5, Pix2Struct), ReLU for a single `wi` (T5 1.0); relative-attention max distance 128;
    RGB patches. Pass an explicit config to `load` where these differ.
    """
    where = os.path.join(ckpt_dir, CHECKPOINT_FILE)
    stored = dict(flatten(_optimizer(read_raw(ckpt_dir), where)["target"]))

    def shape(*path):
        if path not in stored:
            raise ValueError(f"{where}: cannot infer the config: no {'/'.join(path)}")
        return leaf_shape(stored[path], ckpt_dir, where)

    def n_layers(stack):
        return len({k[1] for k in stored if k[0] == stack and k[1].startswith("layers_")})

    emb = shape("encoder", "encoder_norm", "scale")[0]
    heads, buckets = shape("decoder", "relpos_bias", "rel_embedding")
    inner = shape("encoder", "layers_0", "attention", "query", "kernel")[1]
    gated = ("encoder", "layers_0", "mlp", "wi_0", "kernel") in stored
    mlp = shape("encoder", "layers_0", "mlp", "wi_0" if gated else "wi", "kernel")[1]
    common = dict(
        emb_dim=emb,
        num_heads=heads,
        head_dim=inner // heads,
        mlp_dim=mlp,
        num_encoder_layers=n_layers("encoder"),
        num_decoder_layers=n_layers("decoder"),
        relative_attention_num_buckets=buckets,
        mlp_activations=("gelu", "linear") if gated else ("relu",),
        logits_via_embedding=("decoder", "logits_dense", "kernel") not in stored,
        dtype=dtype,
    )
    if ("encoder", "token_embedder", "patch_projection", "kernel") in stored:
        pdim = shape("encoder", "token_embedder", "patch_projection", "kernel")[0]
        ps = math.isqrt(pdim // 3)
        if ps * ps * 3 != pdim:
            raise ValueError(f"{where}: patch_projection input {pdim} is not p*p*3")
        return Pix2StructConfig(
            vocab_size=shape("decoder", "token_embedder", "embedding")[0],
            patch_size=ps,
            max_position_embeddings=shape(
                "encoder", "token_embedder", "embedders_0", "pos_embedding"
            )[0],
            **common,
        )
    return T5Config(vocab_size=shape("token_embedder", "embedding")[0], **common)


def load(
    ckpt_dir: str,
    config: T5Config | Pix2StructConfig | None = None,
    *,
    dtype: str = "float32",
    seed: int = 0,
):
    """Load a T5X `checkpoint_<step>` directory -> (chartjax model, config, step).

    Without `config` it is inferred from the shapes (see `infer_config`).
    """
    cfg = config if config is not None else infer_config(ckpt_dir, dtype=dtype)
    build = p2s_lib.build if isinstance(cfg, Pix2StructConfig) else t5_lib.build
    model = nnx.eval_shape(lambda: build(cfg, seed))
    step = load_params(model, ckpt_dir, seed=seed)
    return model, cfg, step


# --------------------------------------------------------------------------- writing


def chunk_shape(shape: tuple[int, ...], itemsize: int, chunk_bytes: int) -> list[int]:
    """Halve the largest dimension until a chunk fits `chunk_bytes` (t5x aims at 64 MiB)."""
    chunks = list(shape)
    while chunks and math.prod(chunks) * itemsize > chunk_bytes and max(chunks) > 1:
        i = int(np.argmax(chunks))
        chunks[i] = -(-chunks[i] // 2)
    return chunks


def write_zarr(
    arr: np.ndarray,
    ckpt_dir: str,
    name: str,
    *,
    layout: str,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> dict:
    """Write `arr` as zarr directory `ckpt_dir/name`; returns the spec dict t5x stores."""
    import tensorstore as ts

    dtype = np.dtype(arr.dtype).name  # "float32" or "bfloat16" (ml_dtypes)
    meta = {
        "compressor": {"id": "gzip"},
        "shape": list(arr.shape),
        "chunks": chunk_shape(arr.shape, arr.dtype.itemsize, chunk_bytes),
    }
    path = os.path.join(ckpt_dir, name)
    store = ts.open(
        {
            "driver": "zarr",
            "dtype": dtype,
            "metadata": meta,
            "kvstore": {"driver": "file", "path": path + "/"},
        },
        create=True,
        delete_existing=True,
    ).result()
    store.write(arr).result()
    if layout == "kvstore":
        return {
            "driver": "zarr",
            "dtype": dtype,
            "kvstore": {"driver": "file", "path": name},
            "metadata": meta,
        }
    return {
        "driver": "zarr",
        "dtype": dtype,
        "kvstore": {"driver": "gcs", "bucket": "t5x-dummy-bucket"},
        "path": name,
        "metadata": meta,
    }


def _t5x_arrays(model, where: str) -> Iterator[tuple[Path, np.ndarray]]:
    """The parameters as T5X stores them. Its head rescales the decoder output by
    emb_dim**-0.5 exactly when it is the tied embedding; a head that differs (a T5 that
    transformers 5 built: tied, not rescaled; T5Config.scale_decoder_outputs) is written as the
    untied `logits_dense` that gives the same logits, with a warning that the tie is lost."""
    dec = model.decoder
    other = dec.scale_outputs != (dec.logits_dense is None)
    for path, var in _params(model):
        arr = np.asarray(var[...])
        if other and path == ("decoder", "logits_dense", "kernel"):  # untied, rescaled
            arr = arr / np.float32(math.sqrt(arr.shape[0]))
        yield path, arr
    if other and dec.logits_dense is None:  # tied, not rescaled: the embedding, transposed
        yield (
            ("decoder", "logits_dense", "kernel"),
            np.asarray(model.token_embedder.embedding[...]).T,
        )
    if other:
        warnings.warn(
            f"{where}: T5X has no head {'tied without' if dec.logits_dense is None else 'untied with'} "
            "the emb_dim**-0.5 rescale (scale_decoder_outputs); written as an untied "
            "logits_dense that gives the same logits, so fine-tuning it in T5X trains the head "
            "apart from the embedding",
            stacklevel=3,
        )


def save(
    model,
    ckpt_dir: str,
    *,
    step: int = 0,
    dtype: str = "float32",
    layout: str = "kvstore",
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> None:
    """Write `model` as a T5X checkpoint directory `ckpt_dir` (e.g. `.../checkpoint_1000`).

    Args:
      dtype: stored dtype, "float32" (t5x's default) or "bfloat16".
      layout: "kvstore" (zarr arrays, path in `kvstore`; what t5x writes to local disk),
        "top_level" (zarr, GCS-style spec with the path at the top level) or "inline" (arrays
        inside the msgpack file; holds one full copy of the weights in memory while writing).
      chunk_bytes: zarr chunk target size.

    `state` holds only `step` and empty `param_states`: T5X tooling must restore it without the
    optimizer state (t5x's fallback for a changed optimizer) [unverified against t5x itself].
    """
    from flax import serialization

    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    import jax.numpy as jnp

    np_dtype = jnp.dtype(dtype)  # understands "bfloat16"
    os.makedirs(ckpt_dir, exist_ok=True)
    target: dict = {}
    p2s = _is_pix2struct(model)
    for path, arr in _t5x_arrays(model, ckpt_dir):
        tpath = t5x_path(path, pix2struct=p2s)
        arr = arr.astype(np_dtype)
        leaf = (
            arr
            if layout == "inline"
            else write_zarr(
                arr, ckpt_dir, ".".join(("target", *tpath)), layout=layout, chunk_bytes=chunk_bytes
            )
        )
        del arr
        node = target
        for p in tpath[:-1]:
            node = node.setdefault(p, {})
        node[tpath[-1]] = leaf
    tree = {
        "version": T5X_VERSION,
        "optimizer": {
            "target": target,
            "state": {"step": np.asarray(step, np.int32), "param_states": {}},
        },
    }
    with open(os.path.join(ckpt_dir, CHECKPOINT_FILE), "wb") as f:
        f.write(serialization.msgpack_serialize(tree))
