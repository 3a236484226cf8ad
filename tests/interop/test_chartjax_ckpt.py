"""chartjax params checkpoints and train-run step folders: loading, init, conversion."""

from __future__ import annotations

import os

import gin
import jax
import numpy as np
import pytest
from flax import nnx

from chartjax import checkpoint as ckpt_lib
from chartjax import config as config_lib
from chartjax import init_checkpoint
from chartjax.interop import chartjax_ckpt, formats
from chartjax.models import tiny
from chartjax.models.t5 import pix2struct as p2s_lib

VOCAB = 96


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A tiny Pix2Struct as a params checkpoint and as a train run (config.gin + step 5)."""
    d = tmp_path_factory.mktemp("cj")
    model = p2s_lib.build(tiny.tiny_pix2struct(vocab_size=VOCAB), 3)
    chartjax_ckpt.save(model, str(d / "params_ckpt"))
    run = d / "run"
    run.mkdir()
    gin.clear_config()
    try:
        config_lib.parse_gin(
            ["tasks/pix2struct_synthetic_smoke.gin"], [f"Pix2StructConfig.vocab_size = {VOCAB}"]
        )
        (run / "config.gin").write_text(gin.config_str())
    finally:
        gin.clear_config()
    ck = ckpt_lib.Checkpointer(str(run))
    params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    ck.save(
        5,
        {"step": np.int32(5), "params": params, "opt_state": {"mu": params}},
        {"step": 5},
        force=True,
    )
    ck.close()
    return model, str(d / "params_ckpt"), str(run)


def _flat(params: dict) -> dict:
    return {
        jax.tree_util.keystr(k): np.asarray(v)
        for k, v in jax.tree_util.tree_flatten_with_path(params)[0]
    }


def _assert_same(a: dict, b: dict):
    fa, fb = _flat(a), _flat(b)
    assert sorted(fa) == sorted(fb)
    for k in fa:
        np.testing.assert_array_equal(fa[k], fb[k], err_msg=k)


@pytest.mark.slow
def test_init_from_params_and_run_checkpoints(saved):
    model, params_dir, run = saved
    want = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    cfg = tiny.tiny_pix2struct(vocab_size=VOCAB)

    def model_fn(rngs):
        return p2s_lib.Pix2Struct(cfg, rngs=rngs)

    like = nnx.to_pure_dict(nnx.state(nnx.eval_shape(lambda: model_fn(nnx.Rngs(0))), nnx.Param))
    for path in (params_dir, os.path.join(run, "checkpoints", "5")):
        got = init_checkpoint.load_params("chartjax", path, model_fn)
        init_checkpoint.check_shapes(got, like, path)  # int layer keys, as the model's
        _assert_same(got, want)

    small = tiny.tiny_pix2struct(vocab_size=VOCAB // 2)
    with pytest.raises(ValueError, match="params_ckpt"):
        init_checkpoint.load_params(
            "chartjax", params_dir, lambda rngs: p2s_lib.Pix2Struct(small, rngs=rngs)
        )


def test_load_run_rebuilds_the_model_from_config_gin(saved):
    model, _, run = saved
    loc = formats.locate(run)  # a workdir: its latest step
    assert (loc.fmt, loc.run, os.path.basename(loc.path)) == ("chartjax", True, "5")
    cfg = formats.read_config(loc, dtype="float32")
    assert cfg.vocab_size == VOCAB and cfg.emb_dim == 32 and cfg.patch_size == 4
    loaded = formats.load(loc, cfg)
    _assert_same(
        nnx.to_pure_dict(nnx.state(loaded, nnx.Param)),
        nnx.to_pure_dict(nnx.state(model, nnx.Param)),
    )
    assert "train.model_fn" not in gin.config_str()  # gin state left clear


def test_run_without_config_gin_names_it(saved, tmp_path):
    _, _, run = saved
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    os.remove(copy / "config.gin")
    with pytest.raises(FileNotFoundError, match="config.gin"):
        formats.read_config(formats.locate(str(copy)))


def test_run_config_keeps_the_callers_gin_state(saved):
    """Reading a run's config.gin neither clears nor changes the caller's gin configuration."""
    from chartjax.models import configurables  # noqa: F401  (registers T5Config)

    _, _, run = saved
    gin.clear_config()
    try:
        gin.parse_config("T5Config.vocab_size = 7")
        cfg = formats.read_config(formats.locate(run))
        assert cfg.vocab_size == VOCAB
        assert gin.query_parameter("T5Config.vocab_size") == 7
        assert "Pix2StructConfig" not in gin.config_str()
    finally:
        gin.clear_config()


SAVED = """
import chartjax.models.configurables

SIZE = 16
HEADS = %SIZE_HEADS
SIZE_HEADS = 2
train.model_fn = @build_model
build_model.config = @chartjax.models.T5Config()
T5Config.vocab_size = 64
T5Config.emb_dim = %SIZE
T5Config.num_heads = %HEADS
T5Config.head_dim = 8
T5Config.mlp_dim = 32
T5Config.num_encoder_layers = 1
T5Config.num_decoder_layers = 1
T5Config.mlp_activations = ('relu',)
other/T5Config.vocab_size = 5
evaluate.model_fn = @other/build_model
"""


def test_saved_gin_resolves_macros_and_module_names(tmp_path):
    from chartjax.interop import saved_gin
    from chartjax.models.model_configs import T5Config

    path = tmp_path / "config.gin"
    path.write_text(SAVED)
    cfg = saved_gin.model_config(str(path))
    assert type(cfg) is T5Config  # a plain config, not gin's subclass
    assert (cfg.vocab_size, cfg.emb_dim, cfg.num_heads, cfg.mlp_activations) == (
        64,
        16,
        2,
        ("relu",),
    )
    # A scoped factory takes its scope's bindings over the unscoped ones.
    path.write_text(
        SAVED.replace("train.model_fn = @build_model", "train.model_fn = @other/build_model")
    )
    assert saved_gin.model_config(str(path)).vocab_size == 5


def test_saved_gin_reads_a_figureqa_baseline(tmp_path):
    """A FigureQA run's model (the demo's Relation Network) is read from its config.gin, as the
    engine's `chartjax.load` / `chartjax-infer --task figureqa` need (issue 44 item 22)."""
    from chartjax.interop import saved_gin
    from chartjax.models.relation_network import RNConfig

    path = tmp_path / "config.gin"
    path.write_text(
        "train.model_fn = @relation_network.build\n"
        "relation_network.build.cfg = @RNConfig()\n"
        "RNConfig.image_size = 64\nRNConfig.kind = 'cnn_lstm'\n"
        "train.task = 'figureqa'\nfigureqa_task.image_size = 64\n"
        "figureqa_task.antialias = True\n"
    )
    assert saved_gin.model_config(str(path)) == RNConfig(image_size=64, kind="cnn_lstm")
    run = saved_gin.input_settings(str(path))
    assert run["task"] == "figureqa"
    assert run["task_args"] == {"image_size": 64, "antialias": True}


@pytest.mark.parametrize(
    "text,message",
    [
        ("T5Config.vocab_size = 3\n", "binds no train.model_fn"),
        ("train.model_fn = @vgg16.build\n", "not a chartjax model"),
        (
            "train.model_fn = @relation_network.build\nrelation_network.build.cfg = @T5Config()\n",
            "not @RNConfig",
        ),
        ("train.model_fn = @build_model\n", "build_model.config is None"),
        ("train.model_fn = @build_model\nbuild_model.config = @T5Config()\n", "bad T5Config"),
        ("train.model_fn = @build_model\nbuild_model.config = %NOPE\n", "NOPE is not defined"),
    ],
)
def test_saved_gin_errors_name_the_file(tmp_path, text, message):
    from chartjax.interop import saved_gin

    path = tmp_path / "config.gin"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as err:
        saved_gin.model_config(str(path))
    assert str(path) in str(err.value)


@pytest.mark.slow
@pytest.mark.multi_device
def test_restore_for_prediction_reads_all_but_the_optimizer(tmp_path):
    """A saved Adam run state comes back under an identity-optimizer spec, placed as the spec
    says (fsdp over 8 devices), with BatchNorm statistics, step and rng; params alone too."""
    import optax

    from chartjax import mesh as mesh_lib
    from chartjax import state as state_lib
    from chartjax.models import relation_network as rn

    # Few and small arrays: Orbax saves each replicated array as 8 slices (one a device), each
    # slice an eager op compiled for its shape and offset, most of this test's time.
    cfg = rn.RNConfig(
        vocab_size=16,
        image_size=16,
        conv_layers=1,
        conv_channels=8,
        embed_dim=8,
        lstm_dim=8,
        g_layers=2,
        g_dim=16,
        f_dim=16,
    )
    mesh = mesh_lib.make_mesh((-1, 1))
    rules = mesh_lib.axis_rules("fsdp")

    def model_fn(rngs):
        return rn.build(cfg, rngs=rngs)

    _, init = state_lib.create(model_fn, optax.adam(1e-3), mesh, rules, seed=1)
    state = dict(init(), step=jax.numpy.int32(7))
    ck = ckpt_lib.Checkpointer(str(tmp_path))
    ck.save(7, state, {"step": 7}, force=True)
    ck.close()
    assert ckpt_lib.latest_step(str(tmp_path)) == 7
    assert ckpt_lib.latest_step(str(tmp_path / "none")) is None
    assert not os.path.exists(tmp_path / "none")

    spec, _ = state_lib.create(model_fn, optax.identity(), mesh, rules, seed=2)
    step_dir = str(tmp_path / "checkpoints" / "7")
    got = ckpt_lib.restore_for_prediction(step_dir, spec)
    assert sorted(got) == sorted(state) and not jax.tree.leaves(got["opt_state"])
    assert int(got["step"]) == 7
    for k in ("params", "model_state", "rng"):
        _assert_same(got[k], state[k])
        assert jax.tree.map(lambda a: a.sharding, got[k]) == spec.shardings[k]
    assert jax.tree.leaves(got["model_state"])  # BatchNorm statistics
    flat = sorted(np.asarray(v).sum() for v in jax.tree.leaves(state["params"]))
    alone = ckpt_lib.restore_params_only(step_dir)  # no target: the stored tree
    assert sorted(np.asarray(v).sum() for v in jax.tree.leaves(alone)) == flat
    with pytest.raises(ValueError, match="optax.identity"):
        ckpt_lib.restore_for_prediction(
            step_dir, state_lib.create(model_fn, optax.adam(1e-3), mesh, rules, 0)[0]
        )
