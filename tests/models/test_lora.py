"""LoRA and freezing (chartjax/models/lora.py, chartjax/trainable.py) on tiny fp32 models of
every family: adding adapters leaves the output exactly as it was; merged and unmerged adapters
give the same outputs; real train steps (chartjax.train.make_train_step) leave frozen weights
bit-identical, move the adapters, and keep optimizer state for the trainable leaves only
(freezing by pattern without LoRA too); a gin run with peft/lora.gin saves its adapters,
resumes, and converts merged; a pattern that matches nothing is refused naming it."""

from __future__ import annotations

import json
import types

import gin
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from chartjax import mesh as mesh_lib
from chartjax import optim, trainable
from chartjax import state as state_lib
from chartjax import train as train_lib
from chartjax.models import lora, t5, tiny
from chartjax.models.post_ln import bart, deberta, tapas
from chartjax.models.t5 import pix2struct

ONE = dict(num_encoder_layers=1, num_decoder_layers=1)
BERT = dict(
    vocab_size=64,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
    dtype="float32",
)
BUILD = {
    "t5": lambda rngs: t5.build(tiny.tiny_t5(**ONE), rngs),
    "pix2struct": lambda rngs: pix2struct.build(tiny.tiny_pix2struct(**ONE), rngs),
    "bart": lambda rngs: bart.build(
        bart.BartConfig(
            vocab_size=64,
            d_model=16,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
            dtype="float32",
        ),
        rngs,
    ),
    "deberta": lambda rngs: deberta.build(
        deberta.DebertaConfig(
            **BERT, relative_attention=True, pos_att_type=("c2p", "p2c"), position_buckets=8
        ),
        rngs,
    ),
    "tapas": lambda rngs: tapas.build(tapas.TapasConfig(**BERT), rngs),
}
CFG = lora.LoraConfig(rank=4, alpha=8.0, dropout=0.1)
# Merged vs unmerged after training, fp32: x(W + sAB) and xW + s(xA)B round differently; logits
# of magnitude ~1 differ by up to 1.5e-6 here.
MERGED_ATOL = 3e-6
SEQ2SEQ = ("t5", "pix2struct", "bart")


def _batch(family: str, n: int = 4) -> dict:
    rng = np.random.default_rng(0)
    if family in ("deberta", "tapas"):
        return {"input_ids": rng.integers(1, 64, (n, 8)), "labels": rng.integers(0, 2, (n,))}
    if family == "pix2struct":  # row, column, 4x4x3 pixels
        ids = np.stack(np.meshgrid(np.arange(1, 5), np.arange(1, 5), indexing="ij"), -1)
        patches = rng.normal(size=(n, 16, 48)).astype(np.float32)
        enc = np.concatenate([np.broadcast_to(ids.reshape(16, 2), (n, 16, 2)), patches], -1)
    else:
        enc = rng.integers(3, 64, (n, 8))
    targets = rng.integers(3, 64, (n, 5))
    return {
        "encoder_input_tokens": enc,
        "decoder_input_tokens": np.concatenate([np.zeros((n, 1), int), targets[:, :-1]], 1),
        "decoder_target_tokens": targets,
    }


def _loss(model, batch, *, train):
    """Cross-entropy of the logits (the families' own tasks need data files)."""
    logits = model(batch, deterministic=not train).astype(jnp.float32)
    labels = batch["labels"] if "labels" in batch else batch["decoder_target_tokens"]
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean(), {}


TASK = types.SimpleNamespace(loss=_loss)


def _params(model) -> dict:
    return nnx.to_pure_dict(nnx.state(model, nnx.Param))


def _flat(tree) -> dict:
    return {jax.tree_util.keystr(k): v for k, v in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _lora_fn(family, cfg=CFG):
    return lambda rngs: lora.apply(BUILD[family](rngs), cfg, rngs)


@pytest.mark.parametrize("family", sorted(BUILD))
@pytest.mark.slow
def test_adapters_start_at_the_base_output_and_merge_exactly(family):
    batch = {k: jnp.asarray(v) for k, v in _batch(family).items()}
    model = BUILD[family](nnx.Rngs(0))
    base_params = _params(model)
    before = model(batch, deterministic=True)
    lora.apply(model, CFG, nnx.Rngs(params=1, dropout=2))
    adapted = [m for _, m in nnx.iter_modules(model) if isinstance(m, lora.LoraDense)]
    # query and value of every attention block: T5 / Pix2Struct / BART 3 blocks, BERTs 1.
    assert len(adapted) == (6 if family in SEQ2SEQ else 2)
    np.testing.assert_array_equal(model(batch, deterministic=True), before)
    for m in adapted:  # as after training
        m.lora_b[...] = 0.05 * jax.random.normal(jax.random.key(3), m.lora_b.shape)
    unmerged = model(batch, deterministic=True)
    assert not np.allclose(unmerged, before)
    lora.set_dropout(model, True)  # the adapters' input dropout: on in training only
    assert not np.allclose(model(batch, deterministic=True), unmerged)
    lora.set_dropout(model, False)
    lora.merge(model)
    assert not any(isinstance(m, lora.LoraDense) for _, m in nnx.iter_modules(model))
    assert jax.tree.structure(_params(model)) == jax.tree.structure(base_params)
    np.testing.assert_allclose(model(batch, deterministic=True), unmerged, rtol=1e-6, atol=1e-6)


def _run(model_fn, family, labels_kw=None, steps=3):
    """`steps` real train steps (AdamW with weight decay: it must not reach frozen weights)."""
    mesh = mesh_lib.make_mesh((1, 1), devices=jax.devices()[:1])
    rules = mesh_lib.axis_rules("data_parallel")
    tx, sched = optim.make_optimizer("adamw", lr=1e-2, weight_decay=0.1)
    labels = trainable.model_labels(model_fn) if labels_kw is None else None
    if labels_kw is not None:
        abstract = nnx.eval_shape(lambda: model_fn(rngs=nnx.Rngs(0)))
        labels = trainable.labels(_params(abstract), **labels_kw)
    tx = trainable.wrap(tx, labels)
    spec, init = state_lib.create(model_fn, tx, mesh, rules, seed=3)
    step = jax.jit(train_lib.make_train_step(spec.model_def, TASK, tx, sched, labels))
    state = init()
    first = jax.device_get(state["params"])
    batch = {k: jnp.asarray(v) for k, v in _batch(family).items()}
    for _ in range(steps):
        state, metrics = step(state, batch)
        assert np.isfinite(float(metrics["loss"]))
    return spec, labels, first, state


def _check_frozen(labels, first, last):
    lab, a, b = _flat(labels), _flat(first), _flat(jax.device_get(last))
    frozen = [k for k in lab if lab[k] == trainable.FREEZE]
    moved = [k for k in lab if lab[k] == trainable.TRAIN]
    assert frozen and moved
    for k in frozen:  # bit for bit
        assert a[k].tobytes() == b[k].tobytes(), k
    assert all(not np.array_equal(a[k], b[k]) for k in moved), moved
    return moved


def _opt_values(opt_state) -> int:
    return sum(int(x.size) for x in jax.tree.leaves(opt_state) if np.ndim(x) > 0)


@pytest.mark.parametrize("family", ["deberta"])  # T5: the gin run below
@pytest.mark.slow
def test_training_moves_adapters_only_and_merges(family):
    spec, labels, first, state = _run(_lora_fn(family), family)
    moved = _check_frozen(labels, first, state["params"])
    assert all(k.endswith(("['lora_a']", "['lora_b']")) for k in moved)
    n_train = trainable.count(first, labels)
    assert _opt_values(state["opt_state"]) == 2 * n_train  # AdamW: mu and nu, trainable only
    assert n_train < 0.2 * state_lib.num_params(state)
    # The trained model, unmerged and merged, in fp32.
    batch = {k: jnp.asarray(v) for k, v in _batch(family).items()}
    model = spec.model_def.merge(state["params"], state["model_state"])
    unmerged = model(batch, deterministic=True)
    np.testing.assert_allclose(
        lora.merge(model)(batch, deterministic=True), unmerged, rtol=1e-6, atol=MERGED_ATOL
    )


@pytest.mark.slow
def test_freezing_by_pattern_without_lora():
    spec, labels, first, state = _run(
        BUILD["pix2struct"], "pix2struct", labels_kw=dict(freeze=("^encoder[.]",))
    )
    moved = _check_frozen(labels, first, state["params"])
    assert not any(k.startswith("['encoder']") for k in moved)
    assert _opt_values(state["opt_state"]) == 2 * trainable.count(first, labels)


def test_label_rules():
    params = _params(nnx.eval_shape(lambda: _lora_fn("t5")(nnx.Rngs(0))))
    names = _flat(trainable.labels(params))  # LoRA: the adapters alone
    assert {k for k, v in names.items() if v == "train"} == {
        k for k in names if k.endswith(("['lora_a']", "['lora_b']"))
    }
    also = _flat(trainable.labels(params, train=("norm",)))  # ... and what `train` names
    assert {k for k, v in also.items() if v == "train"} == {
        k for k in names if "lora_" in k or "norm" in k
    }
    plain = _params(nnx.eval_shape(lambda: BUILD["t5"](nnx.Rngs(0))))
    assert trainable.labels(plain) is None  # everything trains: the optimizer is left as it is
    only = _flat(trainable.labels(plain, train=("^decoder[.]logits_dense",)))
    assert [k for k, v in only.items() if v == "train"] == ["['decoder']['logits_dense']['kernel']"]
    with pytest.raises(ValueError, match="every parameter is frozen"):
        trainable.labels(plain, freeze=(".",))


def test_a_pattern_that_matches_nothing_is_named():
    model = BUILD["t5"](nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"^LoraConfig.targets: pattern 'qv_proj' matches no") as e:
        lora.apply(model, lora.LoraConfig(targets=("query", "qv_proj")))
    assert "\n" not in str(e.value) and "(layer paths look like 'decoder.layers.0." in str(e.value)
    with pytest.raises(ValueError, match=r"^trainable.freeze: pattern 'encodr' matches no") as e:
        trainable.labels(_params(model), freeze=("encodr",))
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="rank"):
        lora.LoraConfig(rank=0)


@pytest.mark.slow
def test_gin_run_saves_adapters_resumes_and_converts_merged(tmp_path, capsys):
    """peft/lora.gin on the T5 smoke recipe: the checkpoint holds the adapters (and optimizer
    state for them only), a longer rerun resumes from it and moves the adapters alone (the base
    weights bit-identical), and chartjax-load / chartjax-convert give a plain model whose
    outputs are the unmerged model's."""
    from chartjax import checkpoint as ckpt_lib
    from chartjax import config as config_lib
    from chartjax.interop import chartjax_ckpt
    from chartjax.tools import convert_checkpoint

    bindings = [
        "T5Config.num_encoder_layers = 1",
        "T5Config.num_decoder_layers = 1",
        "T5Config.dtype = 'float32'",
        "train.global_batch_size = 8",
        "train.log_every = 1",
        "train.checkpoint_every = 2",
        "train.final_eval = False",
        "train.progress = False",
        "synthetic_seq2seq_task.num_train = 32",
    ]

    def run(steps):
        gin.clear_config()
        config_lib.parse_gin(
            ["tasks/t5_synthetic_smoke.gin", "peft/lora.gin"],
            bindings + [f"train.num_train_steps = {steps}"],
        )
        try:
            return train_lib.train(str(tmp_path))
        finally:
            gin.clear_config()

    assert run(2)["step"] == 2
    assert run(3)["step"] == 3
    log = capsys.readouterr().err
    assert "resumed from step 2" in log and "3,072 of them train" in log
    step_dir = str(tmp_path / "checkpoints" / "3")
    stored, _ = ckpt_lib._stored_tree(step_dir)  # shapes only
    params = _flat(stored["params"])
    adapters = [k for k in params if k.endswith(("['lora_a']", "['lora_b']"))]
    assert len(adapters) == 12  # (encoder self, decoder self, cross) x (query, value) x (A, B)
    n_adapter = sum(int(np.prod(params[k].shape)) for k in adapters)
    moments = [np.prod(m.shape) for m in jax.tree.leaves(stored["opt_state"]) if len(m.shape)]
    assert 0 < sum(moments) <= 2 * n_adapter  # Adafactor's, for the adapters only

    # Unmerged: the LoRA model with the stored parameters; merged: what every reader gets.
    gin.clear_config()
    config_lib.parse_gin([str(tmp_path / "config.gin")])
    try:
        from chartjax.models import configurables

        model = configurables.build_model(rngs=0)
    finally:
        gin.clear_config()
    assert any(isinstance(m, lora.LoraDense) for _, m in nnx.iter_modules(model))
    trained = chartjax_ckpt.read_run_params(step_dir, _params(model))
    before = chartjax_ckpt.read_run_params(str(tmp_path / "checkpoints" / "2"), _params(model))
    labels = trainable.labels(_params(model))  # the adapters alone train
    _check_frozen(labels, jax.device_get(before), trained)
    state = nnx.state(model, nnx.Param)
    nnx.replace_by_pure_dict(state, trained)
    nnx.update(model, state)
    batch = {k: jnp.asarray(v) for k, v in _batch("t5").items()}
    unmerged = model(batch, deterministic=True)
    merged, _ = chartjax_ckpt.load_run(step_dir)
    assert not any(isinstance(m, lora.LoraDense) for _, m in nnx.iter_modules(merged))
    np.testing.assert_allclose(
        merged(batch, deterministic=True), unmerged, rtol=1e-6, atol=MERGED_ATOL
    )

    out_dir = tmp_path / "converted"
    argv = ["--from", "chartjax", "--to", "chartjax", str(tmp_path), str(out_dir)]
    convert_checkpoint.main(argv)
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["params"] == 36_320 - 3_072  # the adapters merged away
    plain, _ = chartjax_ckpt.load(str(out_dir))
    assert not any("lora_" in k for k in _flat(_params(plain)))
    np.testing.assert_allclose(
        plain(batch, deterministic=True), unmerged, rtol=1e-6, atol=MERGED_ATOL
    )
