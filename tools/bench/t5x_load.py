"""Benchmark loading a Pix2Struct-base-shaped T5X checkpoint (random weights; JSON on stdout).

    python -m chartjax.tools.bench.t5x_load --dir /tmp/p2s_base/checkpoint_0 [--dtype float32] [--keep]
        [--size base|small]

Writes the checkpoint (zarr arrays written one at a time from random numbers, t5x's 64 MiB
chunks, gzip) unless `--dir` already holds one, then loads it with `chartjax.interop.t5x.load`
in a fresh child process and reports the load time and the peak RSS growth over the child's RSS
after its imports (sampled every 2 ms and checked against `ru_maxrss`), as a multiple of the
checkpoint's parameter bytes. Goal (issue 4): growth <= 1.5x the checkpoint size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time

from chartjax.tools.bench import harness

BASE = dict(
    vocab_size=50244,
    emb_dim=768,
    num_heads=12,
    head_dim=64,
    mlp_dim=2048,
    num_encoder_layers=12,
    num_decoder_layers=12,
    dtype="float32",
)
# Checkpoint sizes by name: base (Pix2Struct-base, 282M parameters) and a smaller one with the
# same vocabulary (bench/scaling.py fits the load time's slope over the two).
SIZES = {
    "base": BASE,
    "small": {**BASE, "emb_dim": 384, "num_heads": 6, "mlp_dim": 1024}
    | {"num_encoder_layers": 6, "num_decoder_layers": 6},
}


def write(ckpt_dir: str, dtype: str, size: str = "base") -> dict:
    """A T5X checkpoint with the `SIZES[size]` shapes, one random array in memory at a time."""
    import jax
    import numpy as np
    from flax import nnx, serialization

    from chartjax.interop import t5x
    from chartjax.models.model_configs import Pix2StructConfig
    from chartjax.models.t5 import pix2struct as p2s_lib

    cfg = Pix2StructConfig(**SIZES[size])
    abstract = nnx.eval_shape(lambda: p2s_lib.build(cfg, 0))
    rng = np.random.default_rng(0)
    os.makedirs(ckpt_dir, exist_ok=True)
    target: dict = {}
    n = 0
    t0 = time.time()
    for path, var in nnx.to_flat_state(nnx.state(abstract, nnx.Param)):
        tpath = t5x.t5x_path(tuple(path), pix2struct=True)
        arr = rng.standard_normal(var.shape, dtype=np.float32)
        if dtype == "bfloat16":
            arr = arr.astype(jax.numpy.bfloat16)
        n += arr.size
        leaf = t5x.write_zarr(arr, ckpt_dir, ".".join(("target", *tpath)), layout="kvstore")
        node = target
        for p in tpath[:-1]:
            node = node.setdefault(p, {})
        node[tpath[-1]] = leaf
        del arr
    tree = {
        "version": 3,
        "optimizer": {
            "target": target,
            "state": {"step": np.asarray(0, np.int32), "param_states": {}},
        },
    }
    with open(os.path.join(ckpt_dir, "checkpoint"), "wb") as f:
        f.write(serialization.msgpack_serialize(tree))
    return {"params": n, "write_s": round(time.time() - t0, 1)}


def _child(ckpt_dir: str) -> None:
    """Runs in a fresh process: import, settle, then time and measure one load."""
    import resource
    import threading

    import jax
    import numpy as np
    import psutil
    from flax import nnx

    from chartjax.interop import t5x

    proc = psutil.Process()
    jax.numpy.zeros(1).block_until_ready()  # initialise the backend before the baseline
    base = proc.memory_info().rss
    peak = [base]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.002)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    t0 = time.time()
    model, cfg, _ = t5x.load(ckpt_dir)
    leaves = jax.tree.leaves(nnx.state(model, nnx.Param))
    jax.block_until_ready(leaves)
    load_s = time.time() - t0
    stop.set()
    th.join()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    n = sum(int(x.size) for x in leaves)
    checksum = float(sum(np.asarray(x, np.float64).sum() for x in leaves[:3]))
    print(
        json.dumps(
            {
                "load_s": round(load_s, 2),
                "rss_after_imports": base,
                "peak_rss": max(peak[0], maxrss),
                "loaded_params": n,
                "checksum_first3": checksum,
            }
        )
    )


def main(argv=None) -> dict | None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", default="/tmp/chartjax_bench_t5x/checkpoint_0")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--size", default="base", choices=sorted(SIZES), help="shapes to write")
    p.add_argument("--keep", action="store_true", help="keep the written checkpoint")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    harness.add_out_flag(p)
    a = p.parse_args(argv)
    if a.child:
        _child(a.dir)
        return None
    run = harness.Run("t5x_load", vars(a), ("jax", "flax", "tensorstore", "psutil"))
    out: dict = {"dir": a.dir, "stored_dtype": a.dtype, "size": a.size}
    written = not os.path.isfile(os.path.join(a.dir, "checkpoint"))
    if written:
        out.update(write(a.dir, a.dtype, a.size))
    try:
        child = harness.child_json("chartjax.tools.bench.t5x_load", ["--child", "--dir", a.dir])
    except harness.ChildError as e:
        raise SystemExit(f"load failed:\n{e.stderr[-4000:]}") from e
    n = child["loaded_params"]
    ckpt_bytes = n * 4  # float32 parameters, as loaded (and as stored with --dtype float32)
    disk = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(a.dir) for f in fs)
    growth = child["peak_rss"] - child["rss_after_imports"]
    out.update(
        child,
        params=n,
        checkpoint_bytes_fp32=ckpt_bytes,
        disk_bytes=disk,
        peak_rss_growth=growth,
        growth_over_checkpoint=round(growth / ckpt_bytes, 3),
        goal_growth_over_checkpoint=1.5,
        load_mparams_per_s=round(n / 1e6 / child["load_s"], 1),
    )
    if written and not a.keep:
        shutil.rmtree(a.dir)
    return harness.emit(run.report(out), a.out)


if __name__ == "__main__":
    main()
