"""Pix2Struct and T5 through the train loop: two sharded steps on 8 simulated devices equal the
single-device result under the presets that split parameters (fp32, 1e-5), and one batch can
be overfitted.

One layer a stack (the stacks repeat one layer: a second adds compile time, not coverage). The
presets' code (mesh, axis rules, sharded state and batches) is family-independent, so the
families share them out: T5 under fsdp, Pix2Struct (its patch projection and 2-D position
embeddings too) under tensor_parallel. data_parallel: T5 in
tests/models/test_packing.py::test_packed_train_steps_sharded_equal_single_device (8 devices,
packed rows), and every preset on one model in tests/test_train_sharding.py."""

import jax
import pytest

from chartjax.models import t5, tiny
from chartjax.models.t5 import pix2struct
from chartjax.tasks.smoke import seq2seq_synthetic
from tests.step_equivalence import PRESETS, assert_same, run_steps, sharded_leaves

ONE = {"num_encoder_layers": 1, "num_decoder_layers": 1}
MODELS = {
    "t5": (
        lambda rngs: t5.build(tiny.tiny_t5(dropout_rate=0.1, **ONE), rngs),
        seq2seq_synthetic.make_task(modality="text"),
    ),
    "pix2struct": (
        lambda rngs: pix2struct.build(tiny.tiny_pix2struct(dropout_rate=0.1, **ONE), rngs),
        seq2seq_synthetic.make_task(modality="patches", patch_dim=50),
    ),
}
FAMILY_OF = {"fsdp": "t5", "tensor_parallel": "pix2struct"}  # each family sharded once
CASES = [(FAMILY_OF[preset], preset, shape) for preset, shape in PRESETS if preset in FAMILY_OF]


@pytest.fixture(scope="module")
def references():
    out = {}

    def get(name):
        if name not in out:
            fn, task = MODELS[name]
            out[name] = run_steps(
                fn, task, jax.devices()[:1], (1, 1), "data_parallel", optimizer=("adafactor", 1e-2)
            )
        return out[name]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("name,preset,shape", CASES)
@pytest.mark.multi_device
def test_sharded_steps_equal_single_device(references, name, preset, shape):
    fn, task = MODELS[name]
    result = run_steps(fn, task, jax.devices(), shape, preset, optimizer=("adafactor", 1e-2))
    assert_same(result, references(name))
    assert sharded_leaves(result[3]) > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_overfits_one_batch(name):
    # 4 examples, 12 Adam steps at 1e-2: the loss falls to ~0.2 of its start (~5.4 = ln 128 + z).
    fn, task = MODELS[name]
    losses, *_ = run_steps(
        fn,
        task,
        jax.devices()[:1],
        (1, 1),
        "data_parallel",
        steps=12,
        batch_size=4,
        optimizer=("adam", 1e-2),
        same_batch=True,
    )
    assert losses[-1] < 0.35 * losses[0], losses
