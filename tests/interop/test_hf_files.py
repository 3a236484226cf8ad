"""HF checkpoint directories are read as HF reads them, and every fault names its file (issue
26): weights that config.json's sizes leave out are refused, listed; the weight files are
`model.safetensors` or the shards its index lists (a stray backup is not read, an ambiguous
folder is refused); a truncated file is named; config.json errors name the file and field.
Each through `hf.load` (convert, init) and `formats` (chartjax-infer)."""

import json
import os
import shutil

import numpy as np
import pytest

from chartjax.interop import formats, hf
from chartjax.models import t5 as t5_lib
from chartjax.models.t5 import pix2struct as p2s_lib
from chartjax.models.tiny import tiny_pix2struct, tiny_t5

pytest.importorskip("safetensors")
from safetensors.numpy import load_file, save_file  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Tiny HF T5 and Pix2Struct directories (2+2 layers); read-only, `_copy` one to change it."""
    root = tmp_path_factory.mktemp("hf")
    out = {}
    for name, build, cfg in (
        ("t5", t5_lib.build, tiny_t5()),
        ("p2s", p2s_lib.build, tiny_pix2struct()),
    ):
        out[name] = str(root / name)
        hf.save(build(cfg, 0), out[name])
    return out


def _copy(src, tmp_path, edit=None) -> str:
    d = str(shutil.copytree(src, tmp_path / os.path.basename(src)))
    if edit is not None:
        cfg_file = os.path.join(d, "config.json")
        with open(cfg_file) as f:
            cfg = json.load(f)
        edit(cfg)
        with open(cfg_file, "w") as f:
            json.dump(cfg, f)
    return d


def _infer_load(path):
    """What chartjax-infer does: locate, read the config, load."""
    loc = formats.locate(path)
    return formats.load(loc, formats.read_config(loc))


def _embedding(model):
    return np.asarray(model.token_embedder.embedding[...])


def _fewer_t5_layers(cfg):
    cfg["num_layers"] = 1  # the decoder follows num_layers without num_decoder_layers
    del cfg["num_decoder_layers"]


def _fewer_vision_layers(cfg):
    cfg["vision_config"]["num_hidden_layers"] = 1


def _more_t5_layers(cfg):
    cfg["num_layers"] = 3


@pytest.mark.parametrize(
    "family,edit,counts,lines",
    [
        (
            "t5",
            _fewer_t5_layers,
            "(23 unused, 0 missing, 0 of a wrong shape",
            [
                "unused: encoder.block.1.layer.0.SelfAttention.q.weight (32, 32)",
                "unused: decoder.block.1.layer.2.DenseReluDense.wo.weight (32, 64)",
            ],
        ),
        (
            "p2s",
            _fewer_vision_layers,
            "(9 unused, 0 missing, 0 of a wrong shape",
            ["unused: encoder.encoder.layer.1.mlp.wi_0.weight (64, 32)"],
        ),
        (
            "t5",
            _more_t5_layers,
            "(0 unused, 9 missing, 0 of a wrong shape",
            ["missing: encoder.block.2.layer.1.DenseReluDense.wo.weight (32, 64)"],
        ),
    ],
)
def test_layers_config_json_leaves_out_are_refused_listing_them(
    tiny, tmp_path, family, edit, counts, lines
):
    d = _copy(tiny[family], tmp_path, edit)
    for load in (hf.load, _infer_load):
        with pytest.raises(ValueError) as e:
            load(d)
        msg = str(e.value)
        assert msg.startswith(f"{d}: the weights do not fit the ") and counts in msg
        for line in lines:
            assert f"\n  {line}" in msg


def test_stray_backup_is_not_read(tiny, tmp_path):
    d = _copy(tiny["t5"], tmp_path)
    zeros = {
        k: np.zeros_like(v) for k, v in load_file(os.path.join(d, "model.safetensors")).items()
    }
    save_file(zeros, os.path.join(d, "model_old_backup.safetensors"))
    want = _embedding(hf.load(tiny["t5"])[0])
    with pytest.warns(UserWarning, match=r"not reading \['model_old_backup.safetensors'\]"):
        model, _ = hf.load(d)
    np.testing.assert_array_equal(_embedding(model), want)


def _shard(d, index=True):
    """Split model.safetensors into two shards (+ their index, HF's names)."""
    tensors = load_file(os.path.join(d, "model.safetensors"))
    os.remove(os.path.join(d, "model.safetensors"))
    names = sorted(tensors)
    weight_map = {}
    for i, part in enumerate((names[::2], names[1::2])):
        shard = f"model-0000{i + 1}-of-00002.safetensors"
        save_file({k: tensors[k] for k in part}, os.path.join(d, shard))
        weight_map.update(dict.fromkeys(part, shard))
    if index:
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return weight_map


def test_shards_are_those_of_the_index(tiny, tmp_path):
    d = _copy(tiny["t5"], tmp_path)
    weight_map = _shard(d)
    zeros = {"shared.weight": np.zeros((128, 32), np.float32)}
    save_file(zeros, os.path.join(d, "model_old_backup.safetensors"))
    with pytest.warns(UserWarning, match="model_old_backup.safetensors"):
        model = _infer_load(d)
    np.testing.assert_array_equal(_embedding(model), _embedding(hf.load(tiny["t5"])[0]))
    # The index places a tensor in the other shard.
    name = next(iter(weight_map))
    other = {"model-00001-of-00002.safetensors": "model-00002-of-00002.safetensors"}
    wrong = {**weight_map, name: other.get(weight_map[name], "model-00001-of-00002.safetensors")}
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": wrong}, f)
    with pytest.raises(ValueError, match=f"shards do not hold what their index lists: .*{name}"):
        hf.load(d)


@pytest.mark.parametrize(
    "case,message",
    [
        (
            "single_and_index",
            r"holds both model.safetensors and the shard index model.safetensors.index.json",
        ),
        ("shards_without_index", r"weight files \['model-00001-of-00002.safetensors', 'model-0"),
        ("only_a_backup", r"weight files \['model_old_backup.safetensors'\] have no HF name"),
        ("index_names_absent_shard", r"lists shards that are not in .*model-00002-of-00002"),
    ],
)
def test_ambiguous_weight_files_are_refused_naming_them(tiny, tmp_path, case, message):
    d = _copy(tiny["t5"], tmp_path)
    single = os.path.join(d, "model.safetensors")
    if case == "single_and_index":
        tensors = load_file(single)
        _shard(d)
        save_file(tensors, single)
    elif case == "shards_without_index":
        _shard(d, index=False)
    elif case == "only_a_backup":
        os.rename(single, os.path.join(d, "model_old_backup.safetensors"))
    else:
        _shard(d)
        os.remove(os.path.join(d, "model-00002-of-00002.safetensors"))
    for load in (hf.load, _infer_load):
        with pytest.raises(ValueError, match=message):
            load(d)


def test_truncated_weights_are_named(tiny, tmp_path):
    d = _copy(tiny["t5"], tmp_path)
    st = os.path.join(d, "model.safetensors")
    with open(st, "rb") as f:
        data = f.read()
    with open(st, "wb") as f:
        f.write(data[: len(data) // 2])
    for load in (hf.load, _infer_load):
        with pytest.raises(ValueError, match=f"{st}: truncated or damaged safetensors file"):
            load(d)
    pytest.importorskip("torch")
    b = _copy(tiny["p2s"], tmp_path)
    hf.save(hf.load(b)[0], b, safe_serialization=False)
    os.remove(os.path.join(b, "model.safetensors"))
    pt = os.path.join(b, "pytorch_model.bin")
    with open(pt, "r+b") as f:
        f.truncate(os.path.getsize(pt) // 2)
    with pytest.raises(ValueError, match=f"{pt}: truncated or damaged PyTorch file"):
        hf.load(b)


def _set(section, key, value):
    def edit(cfg):
        (cfg[section] if section else cfg)[key] = value

    return edit


def _both_acts(value):
    def edit(cfg):
        cfg["text_config"]["dense_act_fn"] = cfg["vision_config"]["dense_act_fn"] = value

    return edit


@pytest.mark.parametrize(
    "family,edit,message",
    [
        (
            "t5",
            _set(None, "feed_forward_proj", "gated-quick_gelu"),
            "unknown activation 'quick_gelu' in {cfg} field feed_forward_proj, supported: "
            "gelu_new, gelu_pytorch_tanh, relu, silu, gated-gelu_new,",
        ),
        (
            "p2s",
            _both_acts("quick_gelu"),
            "unknown activation 'quick_gelu' in {cfg} field text_config.dense_act_fn / "
            "vision_config.dense_act_fn, supported: gelu_new, gelu_pytorch_tanh, relu, silu",
        ),
        (
            "p2s",
            _set("vision_config", "dense_act_fn", "relu"),
            "{cfg}: text_config.dense_act_fn='gelu_new' != vision_config.dense_act_fn='relu'",
        ),
        (
            "p2s",
            _set("text_config", "hidden_size", "32"),
            "{cfg}: field text_config.hidden_size must be an integer, got '32' (str)",
        ),
        ("t5", _set(None, "d_model", 32.0), "{cfg}: field d_model must be an integer, got 32.0"),
    ],
)
def test_config_errors_name_the_file_and_field(tiny, tmp_path, family, edit, message):
    d = _copy(tiny[family], tmp_path, edit)
    message = message.format(cfg=os.path.join(d, "config.json"))
    for read in (lambda: hf.load(d), lambda: formats.read_config(formats.locate(d))):
        with pytest.raises(ValueError) as e:
            read()
        assert message in str(e.value)


def test_invalid_json_and_family_sizes_name_the_file(tiny, tiny_hf_checkpoints, tmp_path):
    d = _copy(tiny["t5"], tmp_path)
    cfg_file = os.path.join(d, "config.json")
    with open(cfg_file, "w") as f:
        f.write("{bad")
    with pytest.raises(ValueError, match=f"{cfg_file}: invalid JSON"):
        hf.load(d)
    # A DeBERTa size given as a string was blamed on pooler_hidden_size (which must equal it).
    d = _copy(tiny_hf_checkpoints["deberta"], tmp_path, _set(None, "hidden_size", "24"))
    for read in (lambda: hf.load(d), lambda: formats.read_config(formats.locate(d))):
        with pytest.raises(ValueError) as e:
            read()
        assert str(e.value) == (
            f"{os.path.join(d, 'config.json')}: field hidden_size must be an integer, got '24' "
            "(str)"
        )
