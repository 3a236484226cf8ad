"""Activation constraints: a tiny T5 forward under the lead's mesh rules (8 simulated devices)
equals the unconstrained one in fp32 and leaves the logits sharded as the rules say; a
constraint is really put in the program inside `activate` (and only there), also when the models
are imported without `chartjax.mesh` and gin, as on the GPU machine."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import AxisType, PartitionSpec

from chartjax import mesh as mesh_lib
from chartjax import sharding
from chartjax.models import t5, tiny

RULES = (("batch", "data"), ("length", None), ("embed", None), ("mlp", "model"))


# tensor_parallel only (it maps the most axes: batch, vocab, heads, mlp); each preset costs a compile.
@pytest.mark.parametrize(
    "preset,logits_spec",
    [
        ("tensor_parallel", PartitionSpec("data", None, "model")),
    ],
)
@pytest.mark.slow
@pytest.mark.multi_device
def test_constrained_forward_equals_plain(preset, logits_spec):
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
    # `activate` is in jit's cache key: traced again here, with the constraints.
    with mesh_lib.activate(mesh_lib.make_mesh((4, 2)), mesh_lib.axis_rules(preset)):
        out = jax.jit(lambda s, b: fwd(s, b))(state, batch)
    assert out.sharding.spec == logits_spec
    np.testing.assert_allclose(np.asarray(out), np.asarray(ref), atol=1e-5, rtol=1e-5)


def _constraints(text: str) -> int:
    return text.count("sharding_constraint")


def test_constrain_applies_inside_activate_only():
    mesh = jax.make_mesh(
        (len(jax.devices()), 1), ("data", "model"), axis_types=(AxisType.Auto,) * 2
    )
    x = jnp.ones((8, 4, 16))

    def f(x):
        return sharding.constrain(x * 2, ("batch", "length", "embed"))

    step = jax.jit(f)
    assert _constraints(str(jax.make_jaxpr(f)(x))) == 0
    assert _constraints(step.lower(x).as_text()) == 0
    with sharding.activate(mesh, RULES):
        assert sharding.active() == (mesh, RULES)
        # The same functions, already traced outside: the context is in jit's cache key.
        jaxpr = str(jax.make_jaxpr(f)(x))
        hlo = step.lower(x).as_text()
        assert _constraints(str(jax.make_jaxpr(lambda x: f(x[:1]))(x))) == 0  # 1 row: no split
    assert sharding.active() is None
    assert _constraints(jaxpr) == 1
    assert _constraints(hlo) >= 1
    assert _constraints(step.lower(x).as_text()) == 0  # outside again: unconstrained
    if len(jax.devices()) > 1:
        assert "data" in hlo
    # chartjax.mesh re-exports the same context, so the loops and the models agree.
    assert mesh_lib.activate is sharding.activate and mesh_lib.constrain is sharding.constrain


@pytest.mark.slow
def test_model_constraints_apply_without_chartjax_mesh_or_gin():
    """The GPU machine imports the models without chartjax.mesh (and has no gin): the T5
    activations are still constrained inside `activate`."""
    script = textwrap.dedent(
        f"""
        import sys
        import jax, jax.numpy as jnp
        from flax import nnx
        from chartjax import sharding
        from chartjax.models import t5, tiny

        rules = {RULES + (("vocab", "model"),)!r}
        model = t5.build(tiny.tiny_t5(), 0)
        batch = {{
            k: jnp.ones((4, 6), jnp.int32)
            for k in ("encoder_input_tokens", "decoder_input_tokens", "decoder_target_tokens")
        }}
        fwd = lambda b: model(b, deterministic=True)
        auto = (jax.sharding.AxisType.Auto,) * 2
        mesh = jax.make_mesh((1, 1), ("data", "model"), devices=jax.devices()[:1], axis_types=auto)
        outside = str(jax.make_jaxpr(fwd)(batch)).count("sharding_constraint")
        with sharding.activate(mesh, rules):
            inside = str(jax.make_jaxpr(fwd)(batch)).count("sharding_constraint")
        leaked = sorted(m for m in ("chartjax.mesh", "gin") if m in sys.modules)
        print("RESULT", outside, inside, leaked)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ)
    )
    assert run.returncode == 0, run.stderr
    outside, inside, leaked = run.stdout.split("RESULT ", 1)[1].split(" ", 2)
    assert int(outside) == 0 and int(inside) > 0, run.stdout
    assert leaked.strip() == "[]", run.stdout
