"""Activation constraints: a tiny T5 forward under the lead's mesh rules (8 simulated devices)
equals the unconstrained one in fp32 and leaves the logits sharded as the rules say."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec

from chartjax import mesh as mesh_lib
from chartjax.models import t5, tiny


# tensor_parallel only (it maps the most axes: batch, vocab, heads, mlp); each preset costs a compile.
@pytest.mark.parametrize(
    "preset,logits_spec",
    [
        ("tensor_parallel", PartitionSpec("data", None, "model")),
    ],
)
def test_constrained_forward_equals_plain(preset, logits_spec):
    if jax.device_count() < 8:
        pytest.skip("needs the 8 simulated CPU devices of the root conftest")
    graphdef, state = nnx.split(t5.build(tiny.tiny_t5(), 0))
    rng = np.random.default_rng(0)
    batch = {
        "encoder_input_tokens": jnp.asarray(rng.integers(1, 128, (8, 6)), jnp.int32),
        "decoder_input_tokens": jnp.asarray(rng.integers(1, 128, (8, 4)), jnp.int32),
        "decoder_target_tokens": jnp.asarray(rng.integers(1, 128, (8, 4)), jnp.int32),
    }

    def fwd(s, b):
        return nnx.merge(graphdef, s)(b, deterministic=True)

    ref = jax.jit(fwd)(state, batch)
    # A new function object: jit's trace cache does not see the `activate` context.
    with mesh_lib.activate(mesh_lib.make_mesh((4, 2)), mesh_lib.axis_rules(preset)):
        out = jax.jit(lambda s, b: fwd(s, b))(state, batch)
    assert out.sharding.spec == logits_spec
    np.testing.assert_allclose(np.asarray(out), np.asarray(ref), atol=1e-5, rtol=1e-5)
