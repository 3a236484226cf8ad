"""DeBERTa, TAPAS and BART train steps on 8 simulated CPU devices equal the single-device steps
(fp32, atol/rtol 1e-5: sharded reductions reorder sums), with the recipes' optimizer: HF-style
AdamW (weight decay off biases and LayerNorms) behind 2-step gradient accumulation
(optax.MultiSteps), dropout on. Numerics: parameters stay fp32 with bf16 activations, and the
logits and the loss are fp32."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from chartjax.data import sources
from chartjax.models import losses
from chartjax.models.post_ln import bart, deberta, tapas
from chartjax.tasks.core import text_classification
from chartjax.tasks.core.task import Task
from chartjax.testing import tiny_hf
from tests.step_equivalence import assert_same, run_steps, sharded_leaves

S, T, VOCAB = 16, 8, 96
OPT = dict(optimizer=("adamw", 1e-3), weight_decay=0.01, decay_exclude=("bias", "norm"))
CONFIGS = {
    "deberta": lambda dtype: deberta.DebertaConfig(
        vocab_size=VOCAB, num_labels=3, dtype=dtype, **tiny_hf.DEBERTA
    ),
    "tapas": lambda dtype: tapas.TapasConfig(
        vocab_size=VOCAB, num_labels=2, dtype=dtype, **tiny_hf.TAPAS
    ),
    "bart": lambda dtype: bart.BartConfig(vocab_size=VOCAB, dtype=dtype, **tiny_hf.BART),
}
BUILD = {"deberta": deberta.build, "tapas": tapas.build, "bart": bart.build}


def _classifier_example(i: int, family: str) -> dict:
    rng = np.random.default_rng([5, i])
    n = int(rng.integers(4, S + 1))
    ids = np.zeros(S, np.int32)
    ids[:n] = rng.integers(4, VOCAB, n)
    out = {
        "input_ids": ids,
        "attention_mask": (np.arange(S) < n).astype(np.int32),
        "label": np.int32(rng.integers(0, 2)),
        "id": f"x/{i}",
    }
    if family == "tapas":
        sizes = tiny_hf.TAPAS["type_vocab_sizes"]
        out["token_type_ids"] = np.stack([rng.integers(0, min(v, 4), S) for v in sizes], -1).astype(
            np.int32
        )
    else:
        out["token_type_ids"] = np.zeros(S, np.int32)
    return out


def _bart_example(i: int) -> dict:
    rng = np.random.default_rng([6, i])
    n, m = int(rng.integers(4, S + 1)), int(rng.integers(3, T + 1))
    enc = np.ones(S, np.int32)  # pad 1
    enc[:n] = rng.integers(4, VOCAB, n)
    enc[0], enc[n - 1] = 0, 2
    tgt = np.ones(T, np.int32)
    tgt[:m] = rng.integers(4, VOCAB, m)
    tgt[0], tgt[m - 1] = 0, 2
    inp = np.concatenate([[2], tgt[:-1]]).astype(np.int32)
    return {
        "encoder_input_tokens": enc,
        "decoder_input_tokens": inp,
        "decoder_target_tokens": tgt,
        "id": f"x/{i}",
    }


def _task(family: str) -> Task:
    if family == "bart":
        example, inputs = (
            _bart_example,
            (
                "encoder_input_tokens",
                "decoder_input_tokens",
                "decoder_target_tokens",
            ),
        )

        def loss(model, batch, *, train):
            return losses.seq2seq_loss(model, batch, deterministic=not train)
    else:

        def example(i):
            return _classifier_example(i, family)

        inputs, loss = text_classification.MODEL_INPUTS, text_classification.loss
    return Task(
        name=family,
        source=sources.IndexedSource(example, 64, 8),
        features=lambda keep_host: lambda ex: ex,
        loss=loss,
        predict=None,
        evaluate=None,
        model_inputs=inputs,
    )


def _model_fn(family):
    cfg = CONFIGS[family]("float32")
    return lambda rngs: BUILD[family](cfg, rngs)


CASES = [
    ("deberta", "tensor_parallel", (4, 2)),
    ("tapas", "fsdp", (8, 1)),
    ("bart", "tensor_parallel", (4, 2)),
]


@pytest.fixture(scope="module")
def single_device():
    out = {}

    def get(family):
        if family not in out:
            out[family] = run_steps(
                _model_fn(family),
                _task(family),
                jax.devices()[:1],
                (1, 1),
                "data_parallel",
                steps=2,
                batch_size=8,
                accumulate_steps=2,
                **OPT,
            )
        return out[family]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("family,preset,shape", CASES)
@pytest.mark.multi_device
def test_sharded_step_equals_single_device(single_device, family, preset, shape):
    assert len(jax.devices()) == 8
    result = run_steps(
        _model_fn(family),
        _task(family),
        jax.devices(),
        shape,
        preset,
        steps=2,
        batch_size=8,
        accumulate_steps=2,
        **OPT,
    )
    assert_same(result, single_device(family))
    assert sharded_leaves(result[3]) > 0


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_fp32_params_bf16_activations_fp32_loss(family):
    from flax import nnx

    graphdef, state = nnx.split(
        nnx.eval_shape(lambda: BUILD[family](CONFIGS[family]("bfloat16"), 0))
    )
    params = jax.tree.leaves(nnx.state(nnx.merge(graphdef, state), nnx.Param))
    assert {p.dtype for p in params} == {jnp.dtype("float32")}
    task = _task(family)
    batch = {k: np.stack([task.source.example(i)[k] for i in range(4)]) for k in task.model_inputs}

    def forward(state, batch):
        model = nnx.merge(graphdef, state)
        return model(batch, deterministic=True), task.loss(model, batch, train=False)[0]

    logits, loss = jax.eval_shape(forward, state, batch)  # dtypes only: nothing runs
    assert logits.dtype == jnp.float32 and loss.dtype == jnp.float32 and loss.shape == ()
