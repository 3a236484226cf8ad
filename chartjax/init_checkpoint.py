"""Start a run from pretrained weights: T5X, HuggingFace or chartjax checkpoints.

Selected by `gin_configs/init/{random,t5x,hf,chartjax}.gin` (`train.init_format`,
`train.init_path`). Only parameters are taken; the optimizer state starts fresh, as a
fine-tuning run of T5X does from a pretrained checkpoint. "chartjax_encoder"
(`gin_configs/init/barlow_twins_encoder.gin`) takes only the `encoder` subtree of a run's step
folder, its parameters and model state (BatchNorm statistics), and leaves the rest fresh: a
Show, Attend and Tell model starting from a Barlow Twins run's ResNet.
"""

from __future__ import annotations

import os

import jax
from flax import nnx

from chartjax.interop import chartjax_ckpt
from chartjax.interop.chartjax_ckpt import check_shapes
from chartjax.models import lora, quantize

__all__ = ["FORMATS", "apply", "check_shapes", "load_params", "pretrained_state"]

FORMATS = ("random", "t5x", "hf", "chartjax", "chartjax_encoder")
ENCODER = "encoder"  # the subtree "chartjax_encoder" takes


def load_params(fmt: str, path: str, model_fn) -> dict:
    """Parameters of `path` as a pure dict shaped like `model_fn`'s model (host arrays)."""
    return load_weights(fmt, path, model_fn)[0]


def load_weights(fmt: str, path: str, model_fn) -> tuple[dict, dict]:
    """(parameters, buffers) of `path` as pure dicts shaped like `model_fn`'s model. Buffers
    are the weights a model loads but does not train (BART's final_logits_bias, kept in the
    train state's `model_state`); only HF checkpoints carry any, else `{}`."""
    if fmt == "hf":
        if not path or not os.path.exists(path):
            raise FileNotFoundError(f"init checkpoint ({fmt}) not found: {path!r}")
        from chartjax.interop import chartjax_ckpt, hf

        model, _ = hf.load(path, box_embedding=_box_embedding(model_fn))
        return (
            nnx.to_pure_dict(nnx.state(model, nnx.Param)),
            nnx.to_pure_dict(nnx.state(model, chartjax_ckpt.BUFFERS)),
        )
    return _load_params(fmt, path, model_fn), {}


def _box_embedding(model_fn) -> bool:
    """Whether `model_fn` builds a T5 with the OCR box layer (which HF checkpoints lack)."""
    cfg = getattr(nnx.eval_shape(lambda: model_fn(rngs=nnx.Rngs(0))), "cfg", None)
    return bool(getattr(cfg, "box_embedding", False))


def _load_params(fmt: str, path: str, model_fn) -> dict:
    if fmt not in FORMATS:
        raise ValueError(f"unknown init format {fmt!r}; choose from {FORMATS}")
    if not path or not os.path.exists(path):
        raise FileNotFoundError(f"init checkpoint ({fmt}) not found: {path!r}")
    if fmt == "t5x":
        from chartjax.interop import t5x

        model = _base_model(model_fn)
        t5x.load_params(model, path)  # checks every name and shape, streams the arrays
        return nnx.to_pure_dict(nnx.state(model, nnx.Param))
    if fmt == "hf":
        from chartjax.interop import hf

        model, _ = hf.load(path, box_embedding=_box_embedding(model_fn))
        return nnx.to_pure_dict(nnx.state(model, nnx.Param))
    # chartjax: a train-loop checkpoint step folder (<workdir>/checkpoints/<step>), or a
    # `chartjax-convert` params checkpoint (config.json + params/). Restored into the model's
    # own tree (int layer keys, local device), whatever devices wrote it.
    like = nnx.to_pure_dict(nnx.state(_base_model(model_fn), nnx.Param))
    if os.path.isdir(os.path.join(path, chartjax_ckpt.PARAMS_DIR)):
        return chartjax_ckpt.read_params(path, like)
    return chartjax_ckpt.read_run_params(path, like)


def _base_model(model_fn):
    """`model_fn`'s model, abstract, without LoRA adapters: what a pretrained checkpoint holds."""
    return lora.strip(nnx.eval_shape(lambda: model_fn(rngs=nnx.Rngs(0))))


def apply(state: dict, params: dict, tx, shardings: dict) -> dict:
    """A fresh train state around `params`: placed with the state's shardings, new optimizer."""
    params = jax.tree.map(
        lambda x, a: jax.numpy.asarray(x, a.dtype),
        params,
        jax.tree.map(lambda s: s, state["params"]),
    )

    def fresh(p, st):
        return dict(st, params=p, opt_state=tx.init(p))

    return jax.jit(
        fresh,
        in_shardings=(shardings["params"], shardings),
        out_shardings=shardings,
        donate_argnums=1,
    )(params, state)


def pretrained_state(fmt: str, path: str, model_fn, spec, init_fn, tx) -> dict:
    """A fresh train state (`init_fn`) around the checked parameters (and buffers) of
    checkpoint `path`."""
    if fmt == "chartjax_encoder":
        return encoder_state(path, spec, init_fn, tx)
    params, buffers = load_weights(fmt, path, model_fn)
    state = init_fn()
    # LoRA adapters start fresh: the checkpoint holds the base weights only. Base kernels the
    # model stores as int8 (LoraConfig.base_dtype) are quantized here, on the host, from the
    # checkpoint's float ones; bfloat16 ones are cast by `apply`.
    params = lora.with_fresh_adapters(params, state["params"])
    params = quantize.like_model(params, spec.abstract["params"])
    check_shapes(params, spec.abstract["params"], path)
    state = apply(state, params, tx, spec.shardings)
    if jax.tree.leaves(buffers):
        check_shapes(buffers, spec.abstract["model_state"], path)
        state["model_state"] = jax.device_put(
            jax.tree.map(
                lambda x, a: jax.numpy.asarray(x, a.dtype), buffers, spec.abstract["model_state"]
            ),
            spec.shardings["model_state"],
        )
    return state


def encoder_state(path: str, spec, init_fn, tx) -> dict:
    """A fresh train state whose `encoder` parameters and model state are those of the run
    step folder `path` (the other model's other parts are not read); the names and shapes of
    that subtree must match (a mismatch names each array)."""
    from chartjax import checkpoint

    if not path or not os.path.isdir(path):
        raise FileNotFoundError(f"init checkpoint (chartjax_encoder) not found: {path!r}")
    target = {}
    for item in ("params", "model_state"):
        if ENCODER not in spec.abstract[item]:
            if item == "params":
                raise ValueError(f"chartjax_encoder: the model has no {ENCODER!r} parameters")
            continue
        target[item] = {
            ENCODER: jax.tree.map(
                lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
                spec.abstract[item][ENCODER],
                spec.shardings[item][ENCODER],
            )
        }
    got = checkpoint.restore_partial(path, target)
    state = init_fn()
    params = {**state["params"], ENCODER: got["params"][ENCODER]}
    state = apply(state, params, tx, spec.shardings)
    if "model_state" in got:
        state["model_state"] = {**state["model_state"], ENCODER: got["model_state"][ENCODER]}
    return state
