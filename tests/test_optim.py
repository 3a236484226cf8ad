"""chartjax.optim: the learning-rate schedules and optimizers train.py builds.

Schedule values are checked against numbers worked out by hand; one update step on a tiny
quadratic is checked against the hand-derived first step and against optax's own
transformation with the same hyperparameters. Explicit arguments override gin bindings, so
the tests that pass every argument need no gin set-up; the ones that exercise the gin path
(train.py calls `make_optimizer()` with no arguments) run inside `clean_gin`, which puts the
global gin state back afterwards.
"""

import math

import gin
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from chartjax import optim

PEAK = 0.01


@pytest.fixture
def clean_gin():
    saved = gin.config_str()
    gin.clear_config()
    try:
        yield
    finally:
        gin.clear_config()
        if saved.strip():
            gin.parse_config(saved)


def _sched(**kw):
    args = dict(peak=PEAK, kind="constant", warmup_steps=0, total_steps=0, end_value=0.0)
    args.update(kw)
    return optim.schedule(**args)


def _at(sched, steps):
    return [float(sched(jnp.asarray(s))) for s in steps]


# ---------------------------------------------------------------- schedules -------------


def test_constant_schedule_is_the_peak_at_every_step():
    assert _at(_sched(), [0, 1, 10, 10**6]) == pytest.approx([PEAK] * 4, rel=1e-6)


def test_linear_warmup_reaches_the_peak_then_holds():
    s = _sched(warmup_steps=10)
    assert _at(s, [0, 5, 10, 11, 1000]) == pytest.approx(
        [0.0, PEAK / 2, PEAK, PEAK, PEAK], rel=1e-6, abs=1e-12
    )


def test_rsqrt_is_t5s_inverse_square_root_continuous_with_the_warmup():
    # T5: lr(step) = peak * sqrt(warmup / max(step, warmup)).
    s = _sched(kind="rsqrt", warmup_steps=100)
    steps = [0, 50, 100, 400, 10_000]
    expected = [0.0, PEAK / 2, PEAK, PEAK / 2, PEAK / 10]
    assert _at(s, steps) == pytest.approx(expected, rel=1e-6, abs=1e-12)


def test_rsqrt_without_warmup_starts_at_the_peak():
    # No warmup: peak / sqrt(step + 1).
    s = _sched(kind="rsqrt")
    assert _at(s, [0, 3, 99]) == pytest.approx([PEAK, PEAK / 2, PEAK / 10], rel=1e-6)


def test_cosine_decays_from_the_peak_to_end_value_after_the_warmup():
    s = _sched(kind="cosine", warmup_steps=10, total_steps=110, end_value=0.001)
    # After the warmup: end + (peak - end) * (1 + cos(pi * t / 100)) / 2, t = step - 10.
    half = 0.001 + (PEAK - 0.001) * 0.5
    quarter = 0.001 + (PEAK - 0.001) * 0.5 * (1 + math.cos(math.pi / 4))
    assert _at(s, [0, 5, 10, 35, 60, 110, 500]) == pytest.approx(
        [0.0, PEAK / 2, PEAK, quarter, half, 0.001, 0.001], rel=1e-5, abs=1e-12
    )


def test_cosine_without_warmup_ends_at_zero_by_default():
    s = _sched(kind="cosine", total_steps=100)
    assert _at(s, [0, 50, 100]) == pytest.approx([PEAK, PEAK / 2, 0.0], rel=1e-5, abs=1e-9)


def test_cosine_needs_more_total_steps_than_warmup_steps():
    with pytest.raises(ValueError, match="total_steps=10 must exceed warmup_steps=10"):
        _sched(kind="cosine", warmup_steps=10, total_steps=10)


def test_unknown_schedule_kind_is_an_error():
    with pytest.raises(ValueError, match="unknown schedule kind 'exponential'"):
        _sched(kind="exponential")


# ---------------------------------------------------------------- optimizers ------------


def _make(name, lr=PEAK, **kw):
    args = dict(name=name, lr=lr, grad_clip_norm=None, weight_decay=0.0, b1=0.9, b2=0.999, eps=1e-8)
    args.update(kw)
    return optim.make_optimizer(**args)


def _quadratic_params():
    # loss = 0.5 * sum((p - target)^2) for every leaf, so grad = p - target.
    params = {
        "w": jnp.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]], jnp.float32),
        "b": jnp.array([0.5, -0.5, 2.0], jnp.float32),
    }
    target = jax.tree.map(lambda p: jnp.full_like(p, 0.75), params)
    return params, target


def _one_step(tx, params, target):
    grads = jax.grad(
        lambda p: sum(
            jax.tree.leaves(jax.tree.map(lambda a, t: 0.5 * jnp.sum((a - t) ** 2), p, target))
        )
    )(params)
    updates, _ = tx.update(grads, tx.init(params), params)
    return grads, updates, optax.apply_updates(params, updates)


def _assert_trees_equal(a, b, **tol):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), **tol)


def test_make_optimizer_returns_the_schedule_it_was_given_or_a_constant():
    sched = _sched(kind="rsqrt", warmup_steps=4)
    _, got = _make("adam", lr=sched)
    assert got is sched
    _, const = _make("adam", lr=0.25)
    assert _at(const, [0, 7, 10**5]) == [0.25] * 3


def test_adam_first_step_moves_each_param_by_lr_against_the_gradient_sign():
    params, target = _quadratic_params()
    tx, _ = _make("adam")
    grads, _, new = _one_step(tx, params, target)
    # Bias-corrected first Adam step: -lr * g / (|g| + eps).
    hand = jax.tree.map(lambda p, g: p - PEAK * g / (jnp.abs(g) + 1e-8), params, grads)
    _assert_trees_equal(new, hand, rtol=1e-6)
    _, ref_updates, _ = _one_step(optax.adam(PEAK, b1=0.9, b2=0.999, eps=1e-8), params, target)
    _, updates, _ = _one_step(tx, params, target)
    _assert_trees_equal(updates, ref_updates, rtol=0, atol=0)


def test_adamw_decays_the_weights_decoupled_from_the_gradient():
    params, target = _quadratic_params()
    tx, _ = _make("adamw", weight_decay=0.1)
    grads, updates, _ = _one_step(tx, params, target)
    # optax.adamw: -lr * (g / (|g| + eps) + wd * p).
    hand = jax.tree.map(lambda p, g: -PEAK * (g / (jnp.abs(g) + 1e-8) + 0.1 * p), params, grads)
    _assert_trees_equal(updates, hand, rtol=1e-4)  # float32 bias correction: ~1e-5 off
    ref = optax.adamw(PEAK, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.1)
    _assert_trees_equal(updates, _one_step(ref, params, target)[1], rtol=0, atol=0)


def test_sgd_update_is_minus_lr_times_the_gradient():
    params, target = _quadratic_params()
    tx, _ = _make("sgd")
    grads, updates, _ = _one_step(tx, params, target)
    _assert_trees_equal(updates, jax.tree.map(lambda g: -PEAK * g, grads), rtol=1e-7)


def test_grad_clip_norm_clips_the_global_norm_before_the_optimizer():
    params, target = _quadratic_params()
    tx, _ = _make("sgd", lr=1.0, grad_clip_norm=0.5)
    grads, updates, _ = _one_step(tx, params, target)
    norm = float(optax.global_norm(grads))
    assert norm > 0.5
    _assert_trees_equal(updates, jax.tree.map(lambda g: -g * 0.5 / norm, grads), rtol=1e-6)
    # A norm already under the threshold is left alone.
    tx, _ = _make("sgd", lr=1.0, grad_clip_norm=100.0)
    _, updates, _ = _one_step(tx, params, target)
    _assert_trees_equal(updates, jax.tree.map(lambda g: -g, grads), rtol=1e-7)


def _adafactor_first_step(p, g, lr, wd=0.0):
    """Hand-written first Adafactor step (T5X settings), float64 numpy."""
    p, g = np.asarray(p, np.float64), np.asarray(g, np.float64)
    g2 = g**2 + 1e-30  # decay_rate_t = 1 - 1**-0.8 = 0 at step 0: the moments are g^2
    if p.ndim == 2 and min(p.shape) >= 128:  # factored: row and column means
        v_row, v_col = g2.mean(axis=1), g2.mean(axis=0)
        v = np.outer(v_row, v_col) / v_row.mean()
    else:
        v = g2
    u = g / np.sqrt(v)
    u = u / max(1.0, np.sqrt(np.mean(u**2)) / 1.0)  # update clipping at RMS 1.0
    u = u * lr * max(np.sqrt(np.mean(p**2)), 1e-3)  # relative step (parameter scale)
    return -(u + wd * p)


def test_adafactor_first_step_matches_t5x_settings_factored_and_not():
    rng = np.random.default_rng(0)
    params = {
        # 128 x 130: both dimensions reach min_dim_size_to_factor=128, so it is factored.
        "kernel": jnp.asarray(rng.normal(size=(128, 130)), jnp.float32),
        "bias": jnp.asarray(rng.normal(size=(5,)) * 1e-4, jnp.float32),  # RMS < 1e-3 floor
        "small": jnp.asarray(rng.normal(size=(4, 3)), jnp.float32),  # 2-D but too small
    }
    grads = jax.tree.map(lambda p: jnp.asarray(rng.normal(size=p.shape), jnp.float32), params)
    tx, _ = _make("adafactor", weight_decay=1e-2)
    updates, state = tx.update(grads, tx.init(params), params)
    for k in params:
        np.testing.assert_allclose(
            np.asarray(updates[k]),
            _adafactor_first_step(params[k], grads[k], PEAK, wd=1e-2),
            rtol=5e-4,  # float32 row/column means against float64
            atol=1e-10,
            err_msg=k,
        )
    # The factored leaf keeps only row and column statistics.
    factored = state[0]
    assert factored.v_row["kernel"].shape == (128,)
    assert factored.v_col["kernel"].shape == (130,)
    assert factored.v["small"].shape == (4, 3)
    ref = optax.adafactor(
        PEAK,
        decay_rate=0.8,
        clipping_threshold=1.0,
        eps=1e-30,
        min_dim_size_to_factor=128,
        multiply_by_parameter_scale=True,
        weight_decay_rate=1e-2,
    )
    ref_updates, _ = ref.update(grads, ref.init(params), params)
    _assert_trees_equal(updates, ref_updates, rtol=0, atol=0)


def test_adafactor_without_weight_decay_has_no_decay_term():
    params, target = _quadratic_params()
    tx, _ = _make("adafactor")
    grads, updates, _ = _one_step(tx, params, target)
    for k in params:
        np.testing.assert_allclose(
            np.asarray(updates[k]),
            _adafactor_first_step(params[k], grads[k], PEAK),
            rtol=2e-6,
        )


def test_adafactor_second_step_uses_the_decay_rate_0_8_schedule_and_clips_at_rms_1():
    p = jnp.array([1.0, -2.0, 3.0], jnp.float32)
    g1 = jnp.array([0.1, 0.2, -0.1], jnp.float32)
    g2 = jnp.array([-1.0, 2.0, 0.5], jnp.float32)  # much larger: the update RMS exceeds 1
    tx, _ = _make("adafactor", lr=1.0)
    state = tx.init(p)
    u1, state = tx.update(g1, state, p)
    p1 = p + u1
    u2, _ = tx.update(g2, state, p1)
    beta = 1.0 - 2.0**-0.8  # decay_rate_t at step 1
    v = beta * np.asarray(g1, np.float64) ** 2 + (1 - beta) * np.asarray(g2, np.float64) ** 2
    u = np.asarray(g2, np.float64) / np.sqrt(v)
    rms = np.sqrt(np.mean(u**2))
    assert rms > 1.3  # so the clipping threshold of 1.0 is what scales it down
    u = -(u / rms) * max(np.sqrt(np.mean(np.asarray(p1, np.float64) ** 2)), 1e-3)
    np.testing.assert_allclose(np.asarray(u2), u, rtol=2e-6)


def test_unknown_optimizer_is_an_error():
    with pytest.raises(ValueError, match="unknown optimizer 'lamb'"):
        _make("lamb")


# ---------------------------------------------------------------- gin -------------------


def test_defaults_without_gin_bindings_are_adam_at_a_constant_1e_3(clean_gin):
    tx, sched = optim.make_optimizer()
    assert _at(sched, [0, 10**4]) == pytest.approx([1e-3, 1e-3], rel=1e-6)
    params, target = _quadratic_params()
    _, updates, _ = _one_step(tx, params, target)
    _assert_trees_equal(updates, _one_step(optax.adam(1e-3), params, target)[1], rtol=0, atol=0)


def test_gin_bindings_reach_make_optimizer_and_its_default_schedule(clean_gin):
    # As a task .gin file configures train.py's argument-free make_optimizer() call.
    gin.parse_config(
        """
        make_optimizer.name = "sgd"
        make_optimizer.grad_clip_norm = 1.0
        schedule.peak = 0.5
        schedule.kind = "rsqrt"
        schedule.warmup_steps = 4
        """
    )
    tx, sched = optim.make_optimizer()
    assert _at(sched, [0, 2, 4, 16]) == pytest.approx([0.0, 0.25, 0.5, 0.25], rel=1e-6)
    params, target = _quadratic_params()
    grads, updates, _ = _one_step(tx, params, target)
    norm = float(optax.global_norm(grads))
    # sgd at step 0 of the warmup: learning rate 0, whatever the (clipped) gradient.
    assert norm > 1.0
    _assert_trees_equal(updates, jax.tree.map(jnp.zeros_like, grads), atol=0)


# ------------------------------------------------------------------ HF Trainer's AdamW (issue 16)


def test_linear_decays_from_the_peak_to_end_value_after_the_warmup():
    s = optim.schedule(peak=1e-3, kind="linear", warmup_steps=10, total_steps=110)
    assert float(s(5)) == pytest.approx(5e-4)
    assert float(s(10)) == pytest.approx(1e-3)
    assert float(s(60)) == pytest.approx(5e-4)
    assert float(s(110)) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="must exceed"):
        optim.schedule(kind="linear", warmup_steps=5, total_steps=5)


def test_decay_exclude_skips_biases_and_norms():
    params = {
        "dense": {"kernel": jnp.ones((2,)), "bias": jnp.ones((2,))},
        "layer_norm": {"scale": jnp.ones((2,)), "bias": jnp.ones((2,))},
    }
    tx, _ = optim.make_optimizer("adamw", lr=0.1, weight_decay=0.5, decay_exclude=("bias", "norm"))
    zero = jax.tree.map(jnp.zeros_like, params)
    updates, _ = tx.update(zero, tx.init(params), params)
    assert float(updates["dense"]["kernel"][0]) == pytest.approx(-0.1 * 0.5)
    for leaf in (updates["dense"]["bias"], *updates["layer_norm"].values()):
        assert float(leaf[0]) == 0.0


def test_accumulate_steps_averages_k_gradients_into_one_update():
    params = {"w": jnp.asarray([1.0, 2.0])}
    g1, g2 = {"w": jnp.asarray([1.0, -3.0])}, {"w": jnp.asarray([3.0, 1.0])}
    sched = optim.schedule(peak=0.1, kind="linear", warmup_steps=0, total_steps=10)
    tx, logged = optim.make_optimizer("sgd", lr=sched, accumulate_steps=2)
    state = tx.init(params)
    u1, state = tx.update(g1, state, params)
    assert float(jnp.abs(u1["w"]).max()) == 0.0  # still accumulating
    u2, state = tx.update(g2, state, params)
    # One SGD update on the mean gradient [2, -1], at the schedule's update 0.
    np.testing.assert_allclose(u2["w"], [-0.2, 0.1], rtol=1e-6)
    # The logged rate is the update's: loop steps 2 and 3 are update 1.
    assert float(logged(3)) == pytest.approx(float(sched(1)))
    with pytest.raises(ValueError, match="accumulate_steps"):
        optim.make_optimizer("sgd", lr=0.1, accumulate_steps=0)


# ------------------------------------------------------------------ HF Adafactor (issue 30) ----
# The ChartCheck authors fine-tuned MatCha with transformers' Adafactor(scale_parameter=False,
# relative_step=False, lr=1e-5) (mubasharaak/ChartCheck cb7541b, matcha_finetuning_ChartFC.py
# line 117): the `adafactor_hf` flavour. Parameters of very different scales show the
# difference from T5X's flavour, whose step is multiplied by each weight's RMS.


def scaled_params(seed: int = 0) -> dict:
    """Leaves of different scales and ranks (3-D: HF factors the last two dimensions)."""
    rng = np.random.default_rng(seed)
    return {
        "kernel": rng.normal(size=(6, 5)) * 1e-2,
        "big": rng.normal(size=(4, 3)) * 30.0,
        "bias": rng.normal(size=(5,)) * 1e-4,
        "cube": rng.normal(size=(2, 3, 4)),
        "row": rng.normal(size=(1, 7)) * 0.3,
    }


def scaled_grads(params: dict, steps: int, seed: int = 1) -> list[dict]:
    rng = np.random.default_rng(seed)
    scales = {"kernel": 1.0, "big": 1e-3, "bias": 50.0, "cube": 0.1, "row": 1.0}
    return [
        {k: rng.normal(size=p.shape) * scales[k] * (1 + t) for k, p in params.items()}
        for t in range(steps)
    ]


def hf_adafactor_reference(params, grads, lrs, weight_decay=0.0):
    """transformers.optimization.Adafactor.step (scale_parameter=False, relative_step=False,
    beta1=None, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8) in float64 NumPy: the
    parameters after each step."""
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    state = {k: {} for k in p}
    out = []
    for t, (g_step, lr) in enumerate(zip(grads, lrs), start=1):
        for k, g in g_step.items():
            g = np.asarray(g, np.float64)
            beta2t = 1.0 - t**-0.8
            sq = g**2 + 1e-30
            s = state[k]
            if g.ndim >= 2:
                s["row"] = beta2t * s.get("row", 0.0) + (1 - beta2t) * sq.mean(-1)
                s["col"] = beta2t * s.get("col", 0.0) + (1 - beta2t) * sq.mean(-2)
                r = 1 / np.sqrt(s["row"] / s["row"].mean(-1, keepdims=True))
                u = r[..., None] / np.sqrt(s["col"])[..., None, :] * g
            else:
                s["v"] = beta2t * s.get("v", 0.0) + (1 - beta2t) * sq
                u = g / np.sqrt(s["v"])
            u = u / max(np.sqrt(np.mean(u**2)) / 1.0, 1.0) * lr
            p[k] = p[k] - weight_decay * lr * p[k] - u
        out.append({k: v.copy() for k, v in p.items()})
    return out


def run_steps(tx, params, grads):
    params = {k: jnp.asarray(v, jnp.float32) for k, v in params.items()}
    state = tx.init(params)
    out = []
    for g in grads:
        updates, state = tx.update(
            {k: jnp.asarray(v, jnp.float32) for k, v in g.items()}, state, params
        )
        params = optax.apply_updates(params, updates)
        out.append({k: np.asarray(v) for k, v in params.items()})
    return out


def test_adafactor_hf_matches_the_transcribed_hf_steps():
    params, steps = scaled_params(), 5
    grads = scaled_grads(params, steps)
    sched = optim.schedule(peak=0.01, kind="cosine", warmup_steps=2, total_steps=6)
    tx, _ = _make("adafactor_hf", lr=sched, weight_decay=0.01)
    got = run_steps(tx, params, grads)
    want = hf_adafactor_reference(params, grads, [float(sched(t)) for t in range(steps)], 0.01)
    for step, (g, w) in enumerate(zip(got, want)):
        for k in params:
            np.testing.assert_allclose(g[k], w[k], rtol=2e-5, atol=1e-9, err_msg=f"{k} @ {step}")


def test_adafactor_hf_equals_transformers_adafactor_in_torch():
    torch = pytest.importorskip("torch")
    hf_opt = pytest.importorskip("transformers.optimization")
    params, steps = scaled_params(), 6
    grads = scaled_grads(params, steps)
    tensors = {
        k: torch.nn.Parameter(torch.tensor(v, dtype=torch.float32)) for k, v in params.items()
    }
    ref = hf_opt.Adafactor(
        list(tensors.values()),
        scale_parameter=False,
        relative_step=False,
        warmup_init=False,
        lr=1e-2,
    )
    # The authors' schedule shape (matcha_finetuning_ChartFC.py line 118), shortened.
    lr_sched = hf_opt.get_cosine_schedule_with_warmup(ref, num_warmup_steps=2, num_training_steps=6)
    sched = optim.schedule(peak=1e-2, kind="cosine", warmup_steps=2, total_steps=6)
    got = run_steps(_make("adafactor_hf", lr=sched)[0], params, grads)
    for step, g in enumerate(grads):
        for k, t in tensors.items():
            t.grad = torch.tensor(g[k], dtype=torch.float32)
        ref.step()
        lr_sched.step()
        for k, t in tensors.items():
            np.testing.assert_allclose(
                got[step][k], t.detach().numpy(), rtol=1e-5, atol=1e-8, err_msg=f"{k} @ {step}"
            )


def first_update(tx, params, grads) -> dict:
    params = {k: jnp.asarray(v, jnp.float32) for k, v in params.items()}
    grads = {k: jnp.asarray(v, jnp.float32) for k, v in grads.items()}
    updates, _ = tx.update(grads, tx.init(params), params)
    return {k: np.asarray(v, np.float64) for k, v in updates.items()}


def test_adafactor_hf_steps_by_the_rate_where_t5x_steps_by_the_weights_rms():
    params = scaled_params()
    (grads,) = scaled_grads(params, 1)
    hf = first_update(_make("adafactor_hf", lr=1e-5)[0], params, grads)
    t5x = first_update(_make("adafactor", lr=1e-5)[0], params, grads)
    for k, p in params.items():
        hf_step = np.sqrt(np.mean(hf[k] ** 2))
        t5x_step = np.sqrt(np.mean(t5x[k] ** 2))
        assert hf_step == pytest.approx(1e-5, rel=0.05), k  # an update RMS of 1 times lr
        rms = max(np.sqrt(np.mean(p**2)), 1e-3)
        assert t5x_step == pytest.approx(1e-5 * rms, rel=0.05), k


def test_adafactor_hf_state_is_factored_over_the_last_two_dimensions():
    params = {k: jnp.asarray(v, jnp.float32) for k, v in scaled_params().items()}
    state = optim.hf_adafactor(1e-3).init(params)
    assert state.exp_avg_sq_row["cube"].shape == (2, 3)
    assert state.exp_avg_sq_col["cube"].shape == (2, 4)
    assert state.exp_avg_sq_row["row"].shape == (1,)  # small 2-D leaves are factored too
    assert state.exp_avg_sq["bias"].shape == (5,)
