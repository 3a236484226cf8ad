"""Convert model checkpoints between T5X, HuggingFace and chartjax.

    chartjax-convert --from t5x --to hf  gs_download/deplot_base/checkpoint_... out/deplot_hf
    chartjax-convert --from hf  --to t5x out/deplot_hf out/checkpoint_0 [--t5x_dtype bfloat16]
    chartjax-convert --from t5x --to chartjax IN_CKPT OUT_DIR

Formats:
  t5x       a `checkpoint_<step>` directory (msgpack `checkpoint` + zarr arrays); the model config
            is inferred from the shapes (chartjax.interop.t5x.infer_config).
  hf        a HuggingFace directory (`config.json` + `model.safetensors` or `pytorch_model.bin`).
  chartjax  an Orbax params checkpoint:
              OUT/config.json  {"family": "pix2struct" | "t5", "config": {<config dataclass>}}
              OUT/params/      Orbax StandardSave of the pure parameter dict
                               (`nnx.to_pure_dict(nnx.state(model, nnx.Param))`, float32).

Prints one JSON line: source, destination, family, parameter count and seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

FORMATS = ("t5x", "hf", "chartjax")


def save_chartjax(model, path: str) -> None:
    """Write `model` as a chartjax params checkpoint (layout in the module docstring)."""
    import orbax.checkpoint as ocp
    from flax import nnx

    from chartjax.models.model_configs import Pix2StructConfig

    path = os.path.abspath(path)
    os.makedirs(path, exist_ok=True)
    family = "pix2struct" if isinstance(model.cfg, Pix2StructConfig) else "t5"
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"family": family, "config": dataclasses.asdict(model.cfg)}, f, indent=2)
    params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    with ocp.StandardCheckpointer() as ckptr:
        ckptr.save(os.path.join(path, "params"), params)


def load_chartjax(path: str, *, seed: int = 0):
    """Read a chartjax params checkpoint -> (model, config)."""
    import orbax.checkpoint as ocp
    from flax import nnx

    from chartjax.interop import t5x
    from chartjax.models import pix2struct as p2s_lib
    from chartjax.models import t5 as t5_lib
    from chartjax.models.model_configs import Pix2StructConfig, T5Config

    path = os.path.abspath(path)
    cfg_file = os.path.join(path, "config.json")
    if not os.path.isfile(cfg_file) or not os.path.isdir(os.path.join(path, "params")):
        raise FileNotFoundError(f"{path}: not a chartjax params checkpoint (needs config.json "
                                "and params/)")
    with open(cfg_file) as f:
        meta = json.load(f)
    families = {"pix2struct": (Pix2StructConfig, p2s_lib.build), "t5": (T5Config, t5_lib.build)}
    if meta.get("family") not in families:
        raise ValueError(f"{cfg_file}: family must be one of {sorted(families)}, "
                         f"got {meta.get('family')!r}")
    cls, build = families[meta["family"]]
    try:
        cfg = cls(**meta["config"])
    except (TypeError, KeyError) as e:
        raise ValueError(f"{cfg_file}: bad config ({e})") from None
    model = nnx.eval_shape(lambda: build(cfg, seed))
    params = nnx.state(model, nnx.Param)
    with ocp.StandardCheckpointer() as ckptr:
        restored = ckptr.restore(os.path.join(path, "params"), nnx.to_pure_dict(params))
    nnx.replace_by_pure_dict(params, restored)
    nnx.update(model, params)
    t5x.fill_rng_state(model, seed)
    return model, cfg


def load_any(fmt: str, path: str):
    """(model, step) from a checkpoint of format `fmt`."""
    if fmt == "t5x":
        from chartjax.interop import t5x

        model, _, step = t5x.load(path)
        return model, step
    if fmt == "hf":
        from chartjax.interop import hf

        return hf.load(path)[0], 0
    return load_chartjax(path)[0], 0


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--from", dest="src", choices=FORMATS, required=True)
    p.add_argument("--to", dest="dst", choices=FORMATS, required=True)
    p.add_argument("input")
    p.add_argument("output")
    p.add_argument("--t5x_dtype", default="float32", choices=["float32", "bfloat16"],
                   help="stored dtype when writing T5X")
    p.add_argument("--t5x_layout", default="kvstore", choices=["kvstore", "top_level", "inline"])
    p.add_argument("--step", type=int, default=None, help="step recorded in a T5X output "
                   "(default: the input's T5X step, else 0)")
    p.add_argument("--pytorch_bin", action="store_true", help="HF output as pytorch_model.bin")
    a = p.parse_args(argv)
    if not os.path.exists(a.input):
        p.error(f"input not found: {a.input}")
    if os.path.exists(a.output) and os.listdir(a.output):
        p.error(f"output exists and is not empty: {a.output}")
    t0 = time.time()
    try:
        model, step = load_any(a.src, a.input)
    except (FileNotFoundError, ValueError) as e:
        print(f"chartjax-convert: {e}", file=sys.stderr)
        sys.exit(1)
    if a.dst == "t5x":
        from chartjax.interop import t5x

        t5x.save(model, a.output, step=a.step if a.step is not None else step,
                 dtype=a.t5x_dtype, layout=a.t5x_layout)
    elif a.dst == "hf":
        from chartjax.interop import hf

        hf.save(model, a.output, safe_serialization=not a.pytorch_bin)
    else:
        save_chartjax(model, a.output)
    import jax
    from flax import nnx

    n = sum(int(x.size) for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    print(json.dumps({"from": a.src, "to": a.dst, "input": a.input, "output": a.output,
                      "family": type(model).__name__, "params": n,
                      "seconds": round(time.time() - t0, 2)}))


if __name__ == "__main__":
    main()
