"""Pix2Struct and T5 through the train loop: two sharded steps on 8 simulated devices equal the
single-device result under every rules preset (fp32, 1e-5), and one batch can be overfitted."""

import jax
import pytest

from chartjax.models import pix2struct, t5, tiny
from chartjax.tasks import seq2seq_synthetic
from tests.step_equivalence import PRESETS, assert_same, run_steps, sharded_leaves

MODELS = {
    "t5": (
        lambda rngs: t5.build(tiny.tiny_t5(dropout_rate=0.1), rngs),
        seq2seq_synthetic.make_task(modality="text"),
    ),
    "pix2struct": (
        lambda rngs: pix2struct.build(tiny.tiny_pix2struct(dropout_rate=0.1), rngs),
        seq2seq_synthetic.make_task(modality="patches", patch_dim=50),
    ),
}


@pytest.fixture(scope="module")
def references():
    return {
        name: run_steps(
            fn, task, jax.devices()[:1], (1, 1), "data_parallel", optimizer=("adafactor", 1e-2)
        )
        for name, (fn, task) in MODELS.items()
    }


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("preset,shape", PRESETS)
def test_sharded_steps_equal_single_device(references, name, preset, shape):
    fn, task = MODELS[name]
    result = run_steps(fn, task, jax.devices(), shape, preset, optimizer=("adafactor", 1e-2))
    assert_same(result, references[name])
    assert (sharded_leaves(result[3]) > 0) == (preset != "data_parallel")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_overfits_one_batch(name):
    fn, task = MODELS[name]
    losses, *_ = run_steps(
        fn,
        task,
        jax.devices()[:1],
        (1, 1),
        "data_parallel",
        steps=40,
        optimizer=("adam", 3e-3),
        same_batch=True,
    )
    assert losses[-1] < 0.35 * losses[0], losses
