"""chartjax's own checkpoints: self-describing params checkpoints, and train-run step folders.

Params checkpoint (written by `chartjax-convert --to chartjax`, read by infer and init):
    DIR/config.json  {"family": "pix2struct" | "t5" | "deberta" | "tapas" | "bart",
                      "config": {<config dataclass>}, "labels": [<id2label names>] (classifiers)}
    DIR/params/      Orbax StandardSave of the pure dict of the model's weights, float32:
                     its parameters and its untrained buffers (BART's final_logits_bias), i.e.
                     `nnx.to_pure_dict(nnx.state(model, WEIGHTS))`

Train-run step folder (`<workdir>/checkpoints/<step>` or `<workdir>/best/<step>`, written and
read by chartjax/checkpoint.py): the whole train state, without a model config. The model config
is read from `<workdir>/config.gin`, the resolved gin config the run saved (interop/saved_gin.py).
A run with LoRA adapters (models/lora.py) is read with them and returned merged
(`W + (alpha/rank) A B`): a plain model, which every format can write.
"""

from __future__ import annotations

import dataclasses
import json
import os

import jax
from flax import nnx

from chartjax.models.model_configs import Pix2StructConfig, T5Config

CONFIG_FILE = "config.json"
# Every variable but the RNG streams: parameters and buffers (`nnx.Param` alone for T5 and
# Pix2Struct, whose checkpoints are therefore as before).
WEIGHTS = nnx.Not(nnx.RngState)
BUFFERS = nnx.All(nnx.Not(nnx.Param), nnx.Not(nnx.RngState))
PARAMS_DIR = "params"
RUN_CONFIG = "config.gin"


def _families():
    from chartjax.models import paligemma
    from chartjax.models import relation_network as rn
    from chartjax.models import t5 as t5_lib
    from chartjax.models.post_ln import bart, deberta, tapas
    from chartjax.models.t5 import pix2struct as p2s_lib

    return {
        "pix2struct": (Pix2StructConfig, p2s_lib.build),
        "t5": (T5Config, t5_lib.build),
        "deberta": (deberta.DebertaConfig, deberta.build),
        "tapas": (tapas.TapasConfig, tapas.build),
        "bart": (bart.BartConfig, bart.build),
        "paligemma": (paligemma.PaliGemmaConfig, paligemma.build),
        # The FigureQA baselines (any RNConfig.kind), from train runs; float32 only.
        "relation_network": (rn.RNConfig, lambda cfg, seed: rn.build(cfg, nnx.Rngs(seed))),
    }


def with_dtype(cfg, dtype: str | None):
    """`cfg` computing in `dtype` (None: as it is); a config without a dtype (the FigureQA
    baselines, float32) is returned as it is."""
    if dtype is None or not any(f.name == "dtype" for f in dataclasses.fields(cfg)):
        return cfg
    return dataclasses.replace(cfg, dtype=dtype)


def family_of(cfg) -> str:
    for name, (cls, _) in _families().items():
        if isinstance(cfg, cls):
            return name
    raise TypeError(f"not a chartjax model config: {type(cfg).__name__}")


def build_abstract(cfg, seed: int = 0, lora_cfg=None):
    """An abstract (shape-only) model for `cfg` (with the LoRA adapters of `lora_cfg`): no
    initializer runs."""
    from chartjax.models import lora

    build = _families()[family_of(cfg)][1]
    if lora_cfg is None:
        return nnx.eval_shape(lambda: build(cfg, seed))
    return nnx.eval_shape(lambda: lora.apply(build(cfg, seed), lora_cfg, seed))


def is_params_checkpoint(path: str) -> bool:
    return os.path.isfile(os.path.join(path, CONFIG_FILE)) and os.path.isdir(
        os.path.join(path, PARAMS_DIR)
    )


def is_run_checkpoint(path: str) -> bool:
    """A train-loop step folder: `<step>/` holding the Orbax `state` item."""
    name = os.path.basename(os.path.normpath(path))
    return name.isdigit() and os.path.isdir(os.path.join(path, "state"))


def save(model, path: str, *, labels=None) -> None:
    """Write `model` as a chartjax params checkpoint (layout in the module docstring);
    `labels`: a classifier's label names (HF `id2label`), kept for inference and HF output."""
    import orbax.checkpoint as ocp

    path = os.path.abspath(path)
    os.makedirs(path, exist_ok=True)
    meta = {"family": family_of(model.cfg), "config": dataclasses.asdict(model.cfg)}
    if labels is not None:
        meta["labels"] = [str(n) for n in labels]
    with open(os.path.join(path, CONFIG_FILE), "w") as f:
        json.dump(meta, f, indent=2)
    params = nnx.to_pure_dict(nnx.state(model, WEIGHTS))
    from chartjax import checkpoint

    checkpoint.save_without_replica_slices_on_cpu()
    with ocp.StandardCheckpointer() as ckptr:
        ckptr.save(os.path.join(path, PARAMS_DIR), params)


def read_config(path: str):
    """The model config of a params checkpoint (reads only config.json)."""
    path = os.path.abspath(path)
    cfg_file = os.path.join(path, CONFIG_FILE)
    if not is_params_checkpoint(path):
        raise FileNotFoundError(
            f"{path}: not a chartjax params checkpoint (needs {CONFIG_FILE} and {PARAMS_DIR}/)"
        )
    with open(cfg_file) as f:
        try:
            meta = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{cfg_file}: invalid JSON ({e})") from None
    families = _families()
    if not isinstance(meta, dict) or meta.get("family") not in families:
        family = meta.get("family") if isinstance(meta, dict) else None
        raise ValueError(f"{cfg_file}: family must be one of {sorted(families)}, got {family!r}")
    cls = families[meta["family"]][0]
    try:
        return cls(**meta["config"])
    except (TypeError, KeyError) as e:
        raise ValueError(f"{cfg_file}: bad config ({e})") from None


def read_labels(path: str) -> tuple[str, ...] | None:
    """The label names a params checkpoint keeps (None if it has none)."""
    with open(os.path.join(os.path.abspath(path), CONFIG_FILE)) as f:
        labels = json.load(f).get("labels")
    return tuple(labels) if labels else None


def _target(like: dict) -> dict:
    """Restore target: `like`'s shapes and dtypes on this process's first device.

    A target (rather than none) keeps the model's key types (int layer indices; Orbax alone
    gives back "0") and does not depend on the devices the checkpoint was written from.
    """
    dev = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=dev), like)


def read_params(path: str, like: dict) -> dict:
    """The parameters of a params checkpoint, shaped like the pure dict `like`."""
    import orbax.checkpoint as ocp

    with ocp.StandardCheckpointer() as ckptr:
        try:
            return ckptr.restore(os.path.join(os.path.abspath(path), PARAMS_DIR), _target(like))
        except ValueError as e:  # e.g. a shape that does not fit the model
            raise ValueError(f"{path}: {e}") from None


def read_run_params(step_dir: str, like: dict) -> dict:
    """Only the parameters of a train-run step folder (partial restore), shaped like `like`."""
    from chartjax import checkpoint

    try:
        return checkpoint.restore_params_only(step_dir, _target(like))
    except ValueError as e:
        raise ValueError(f"{os.path.abspath(step_dir)}: {e}") from None


def check_shapes(params: dict, abstract: dict, where: str) -> None:
    """Raise, listing every problem, unless `params` has exactly `abstract`'s names and shapes."""
    got = {
        jax.tree_util.keystr(k): v.shape for k, v in jax.tree_util.tree_flatten_with_path(params)[0]
    }
    want = {
        jax.tree_util.keystr(k): v.shape
        for k, v in jax.tree_util.tree_flatten_with_path(abstract)[0]
    }
    problems = [f"missing {k} {want[k]}" for k in sorted(set(want) - set(got))]
    problems += [f"unexpected {k} {got[k]}" for k in sorted(set(got) - set(want))]
    problems += [
        f"shape {k}: checkpoint {got[k]} vs model {want[k]}"
        for k in sorted(set(got) & set(want))
        if tuple(got[k]) != tuple(want[k])
    ]
    if problems:
        raise ValueError(
            f"{where} does not fit the model ({len(problems)} problems):\n  "
            + "\n  ".join(problems)
        )


def _fill(model, restored: dict, seed: int, where: str, which=WEIGHTS):
    from chartjax.interop import t5x

    weights = nnx.state(model, which)
    check_shapes(restored, nnx.to_pure_dict(weights), where)
    nnx.replace_by_pure_dict(weights, restored)
    nnx.update(model, weights)
    t5x.fill_rng_state(model, seed)
    return model


def load(path: str, *, seed: int = 0, dtype: str | None = None):
    """Read a chartjax params checkpoint -> (model, config).

    `dtype` overrides the stored activation dtype (parameters stay float32).
    """
    cfg = with_dtype(read_config(path), dtype)
    model = build_abstract(cfg, seed)
    restored = read_params(path, nnx.to_pure_dict(nnx.state(model, WEIGHTS)))
    return _fill(model, restored, seed, path), cfg


def _run_gin(step_dir: str) -> str:
    workdir = os.path.dirname(os.path.dirname(os.path.abspath(step_dir)))
    gin_file = os.path.join(workdir, RUN_CONFIG)
    if not os.path.isfile(gin_file):
        raise FileNotFoundError(
            f"{step_dir}: a train-run checkpoint, but the run's gin config {gin_file} (which "
            f"names the model) is missing; evaluate it with chartjax-eval and the run's gin files"
        )
    return gin_file


def run_config(step_dir: str):
    """The model config of a train-run step folder, from the run's saved `config.gin` (read as
    text: the caller's gin state is left as it is)."""
    from chartjax.interop import saved_gin

    return saved_gin.model_config(_run_gin(step_dir))


def load_run(step_dir: str, *, seed: int = 0, dtype: str | None = None):
    """Read a train-run step folder -> (model, config); the parameters are restored (LoRA
    adapters merged into them: a plain model), and the buffers (BART's final_logits_bias, kept in the run's `model_state`) where the model has any."""
    from chartjax.interop import saved_gin
    from chartjax.models import lora

    cfg = with_dtype(run_config(step_dir), dtype)
    model = build_abstract(cfg, seed, saved_gin.lora_config(_run_gin(step_dir)))
    restored = read_run_params(step_dir, nnx.to_pure_dict(nnx.state(model, nnx.Param)))
    _fill(model, restored, seed, step_dir, which=nnx.Param)
    lora.merge(model)  # adapters folded into the weights (no-op without them)
    buffers = nnx.to_pure_dict(nnx.state(model, BUFFERS))
    if jax.tree.leaves(buffers):
        from chartjax import checkpoint

        stored = checkpoint.restore_partial(step_dir, {"model_state": _target(buffers)})
        _fill(model, stored["model_state"], seed, step_dir, which=BUFFERS)
    return model, cfg
