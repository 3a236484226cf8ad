"""chartjax -> T5X -> chartjax round trips (all layouts, float32 and bfloat16, chunked zarr) and
the loader's errors for missing / unexpected / mis-shaped parameters."""

import json
import os

import ml_dtypes
import numpy as np
import pytest
from flax import nnx, serialization

from chartjax.interop import t5x
from chartjax.models import t5 as t5_lib
from chartjax.models.t5 import pix2struct as p2s_lib
from chartjax.models.tiny import tiny_pix2struct, tiny_t5


@pytest.fixture(scope="module")
def models():
    return {"p2s": p2s_lib.build(tiny_pix2struct(), 1), "t5": t5_lib.build(tiny_t5(), 2)}


def _flat(model):
    return {k: np.asarray(v[...]) for k, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}


ROUND_TRIPS = [
    ("p2s", layout, dtype) for layout in t5x.LAYOUTS for dtype in ("float32", "bfloat16")
]
ROUND_TRIPS += [("t5", "kvstore", "float32"), ("t5", "top_level", "bfloat16")]


@pytest.mark.parametrize(("kind", "layout", "dtype"), ROUND_TRIPS)
def test_round_trip(models, kind, layout, dtype, tmp_path):
    model = models[kind]
    ckpt = str(tmp_path / "checkpoint_42")
    t5x.save(model, ckpt, step=42, dtype=dtype, layout=layout, chunk_bytes=1024)
    back, cfg, step = t5x.load(ckpt)
    assert step == 42 and cfg == model.cfg and type(back) is type(model)
    want, got = _flat(model), _flat(back)
    assert set(want) == set(got)
    for k, w in want.items():
        if dtype == "bfloat16":
            w = w.astype(ml_dtypes.bfloat16).astype(np.float32)
        assert got[k].dtype == np.float32
        np.testing.assert_array_equal(got[k], w, err_msg=str(k))


@pytest.mark.parametrize("layout", ["kvstore", "top_level"])
def test_written_layout_is_t5x(models, layout, tmp_path):
    ckpt = str(tmp_path / "checkpoint_7")
    t5x.save(models["p2s"], ckpt, step=7, dtype="bfloat16", layout=layout, chunk_bytes=1024)
    with open(os.path.join(ckpt, "checkpoint"), "rb") as f:
        raw = serialization.msgpack_restore(f.read())
    assert raw["version"] == 3 and int(raw["optimizer"]["state"]["step"]) == 7
    tgt = raw["optimizer"]["target"]
    # Pix2Struct's T5X names: token_embedder under the encoder, row/col tables as pos_embedding.
    spec = tgt["encoder"]["token_embedder"]["embedders_0"]["pos_embedding"]
    name = "target.encoder.token_embedder.embedders_0.pos_embedding"
    if layout == "kvstore":
        assert spec["kvstore"] == {"driver": "file", "path": name} and "path" not in spec
    else:
        assert spec["path"] == name and spec["kvstore"]["driver"] == "gcs"
    assert spec["metadata"]["compressor"] == {"id": "gzip"} and spec["dtype"] == "bfloat16"
    assert set(tgt["decoder"]) >= {"layers_0", "layers_1", "logits_dense", "relpos_bias"}
    with open(os.path.join(ckpt, name, ".zarray")) as f:
        zarray = json.load(f)
    assert zarray["zarr_format"] == 2 and zarray["dtype"] == "bfloat16"
    assert zarray["shape"] == [64, 32] and zarray["chunks"] == [16, 32]  # 16*32*2 B = 1 KiB
    assert sorted(os.listdir(os.path.join(ckpt, name))) == [".zarray", "0.0", "1.0", "2.0", "3.0"]


def test_chunk_shape():
    assert t5x.chunk_shape((768, 50244), 4, 64 << 20) == [768, 12561]
    assert t5x.chunk_shape((10,), 4, 1 << 20) == [10]
    assert t5x.chunk_shape((5, 3), 4, 4) == [1, 1]


def _edit_checkpoint(ckpt, fn):
    path = os.path.join(ckpt, "checkpoint")
    with open(path, "rb") as f:
        raw = serialization.msgpack_restore(f.read())
    fn(raw["optimizer"]["target"])
    with open(path, "wb") as f:
        f.write(serialization.msgpack_serialize(raw))


def test_mismatch_errors_name_every_problem(models, tmp_path):
    ckpt = str(tmp_path / "checkpoint_1")
    t5x.save(models["p2s"], ckpt, layout="kvstore")

    def damage(tgt):
        del tgt["decoder"]["layers_1"]["mlp"]["wo"]
        del tgt["encoder"]["encoder_norm"]
        tgt["decoder"]["extra"] = {"kernel": np.zeros((3, 4), np.float32)}
        tgt["decoder"]["logits_dense"]["kernel"]["metadata"]["shape"] = [32, 99]

    _edit_checkpoint(ckpt, damage)
    model = nnx.eval_shape(lambda: p2s_lib.build(tiny_pix2struct(), 0))
    with pytest.raises(ValueError) as e:
        t5x.load_params(model, ckpt)
    msg = str(e.value)
    assert "checkpoint_1/checkpoint" in msg and "(4 problems)" in msg
    assert "missing: decoder/layers_1/mlp/wo/kernel (64, 32)" in msg
    assert "missing: encoder/encoder_norm/scale (32,)" in msg
    assert "unexpected: decoder/extra/kernel (3, 4)" in msg
    assert (
        "shape mismatch: decoder/logits_dense/kernel is (32, 99) in the checkpoint, "
        "(32, 128) in the model"
    ) in msg


def test_wrong_family_and_missing_files(models, tmp_path):
    ckpt = str(tmp_path / "checkpoint_1")
    t5x.save(models["t5"], ckpt, layout="inline")
    model = nnx.eval_shape(lambda: p2s_lib.build(tiny_pix2struct(), 0))
    with pytest.raises(ValueError, match="missing: encoder/token_embedder/patch_projection/kernel"):
        t5x.load_params(model, ckpt)
    with pytest.raises(FileNotFoundError, match="nowhere/checkpoint"):
        t5x.load(str(tmp_path / "nowhere"))
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "checkpoint").write_bytes(b"\xc1\xc1 not msgpack")
    with pytest.raises(ValueError, match="junk/checkpoint: not a msgpack T5X checkpoint"):
        t5x.load(str(tmp_path / "junk"))


def test_legacy_version_0_and_chunked_inline_arrays(models, tmp_path, monkeypatch):
    # Version 0: the optimizer dict at the top level; a big inline array split by flax into
    # `__msgpack_chunked_array__` pieces.
    monkeypatch.setattr(serialization, "MAX_CHUNK_SIZE", 1000)
    ckpt = tmp_path / "checkpoint_3"
    t5x.save(models["t5"], str(ckpt), step=3, layout="inline")
    with open(ckpt / "checkpoint", "rb") as f:
        import msgpack

        raw = msgpack.unpackb(f.read(), raw=False, strict_map_key=False)
    emb = raw["optimizer"]["target"]["token_embedder"]["embedding"]
    assert emb["__msgpack_chunked_array__"] and len(emb["chunks"]) > 1
    (ckpt / "checkpoint").write_bytes(msgpack.packb(raw["optimizer"], use_bin_type=True))
    back, _, step = t5x.load(str(ckpt))
    assert step == 3
    for k, w in _flat(models["t5"]).items():
        np.testing.assert_array_equal(_flat(back)[k], w)


def test_missing_zarr_directory_is_named(models, tmp_path):
    import shutil

    ckpt = tmp_path / "checkpoint_2"
    t5x.save(models["t5"], str(ckpt), layout="top_level")
    shutil.rmtree(ckpt / "target.decoder.logits_dense.kernel")
    with pytest.raises(
        ValueError,
        match=r"cannot read .*checkpoint_2/target\.decoder\.logits_dense"
        r"\.kernel",
    ):
        t5x.load(str(ckpt))
