"""chartjax.selection: the moving-average arithmetic against hand-computed values, no selection
before update `start`, the held best state is the one at the average's maximum (and survives
the donation of later updates), its metadata and its write to best/, and the rule's bounds.

The train-loop runs (random batches of a split, resume restoring the average, the recipes) are
in tests/tasks/test_figureqa.py."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from chartjax import checkpoint as ckpt_lib
from chartjax import selection

SCORES = [0.5, 0.6, 0.4, 0.8]
# decay 0.9, by hand: biased_t = 0.9 biased_{t-1} + 0.1 score_t from 0, i.e.
# 0.05, 0.045 + 0.06 = 0.105, 0.0945 + 0.04 = 0.1345, 0.12105 + 0.08 = 0.20105;
# zero-debiased (TF's ExponentialMovingAverage(zero_debias=True)): biased_t / (1 - 0.9^t),
# 0.05 / 0.1, 0.105 / 0.19, 0.1345 / 0.271, 0.20105 / 0.3439.
BIASED = [0.05, 0.105, 0.1345, 0.20105]
DEBIASED = [0.5, 0.105 / 0.19, 0.1345 / 0.271, 0.20105 / 0.3439]


def _rule(**kw):
    return selection.BatchEmaSelection(**{"start": 1, **kw})


def _tracker(rule):
    return selection.Tracker.from_state(rule, None)


@pytest.mark.parametrize("zero_debias,want", [(True, DEBIASED), (False, BIASED)])
def test_the_moving_average_matches_hand_computed_values(zero_debias, want):
    t = _tracker(_rule(zero_debias=zero_debias))
    assert t.value is None
    got = []
    for step, s in enumerate(SCORES, 1):
        t.observe(step, s)
        got.append(t.value)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert DEBIASED[1] == pytest.approx(0.5526315789, abs=1e-10)  # the hand division
    assert t.count == 4 and t.biased == pytest.approx(0.20105, abs=1e-15)


def test_best_is_the_strictly_highest_average_from_update_start_on():
    t = _tracker(_rule(start=3, zero_debias=False))
    # Averages 0.1, 0.19, 0.171, 0.2539, then 0.9 * 0.2539 + 0.1 * 0.2539 = 0.2539 (equal).
    chosen = [t.observe(step, s) for step, s in enumerate([1.0, 1.0, 0.0, 1.0, 0.2539], 1)]
    assert t.best_step == 4 and t.best_value == pytest.approx(0.2539)
    # Updates 1 and 2 have the highest score but come before start=3; update 3 is the first
    # candidate, 4 beats it, 5 does not (0.9 * 0.2539 + 0.1 * 0.2539 = 0.2539, not higher).
    assert chosen == [False, False, True, True, False]


def test_nothing_is_selected_before_update_start():
    t = _tracker(_rule(start=100))
    for step in range(1, 100):
        assert not t.observe(step, 1.0 - 1.0 / step)  # rising scores, yet no selection
    assert t.best_step is None and t.state_dict()["best_value"] is None
    assert t.observe(100, 0.0)  # the first candidate is always taken
    assert t.best_step == 100


def test_state_dict_round_trips_and_a_restored_tracker_continues_identically():
    rule = _rule(start=2)
    a = _tracker(rule)
    for step, s in enumerate(SCORES[:2], 1):
        a.observe(step, s)
    b = selection.Tracker.from_state(rule, a.state_dict())
    assert (
        b.state_dict()
        == a.state_dict()
        == {
            "biased": pytest.approx(0.105),
            "count": 2,
            "best_value": pytest.approx(DEBIASED[1]),
            "best_step": 2,
        }
    )
    for step, s in enumerate(SCORES[2:], 3):
        assert a.observe(step, s) == b.observe(step, s)
    assert a.state_dict() == b.state_dict()
    assert b.best_step == 4 and b.value == pytest.approx(DEBIASED[3])


def test_a_non_finite_score_is_an_error():
    with pytest.raises(FloatingPointError, match="nan at update 7"):
        _tracker(_rule()).observe(7, math.nan)


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"decay": 1.0}, "decay must be in"),
        ({"start": 0}, "start must be >= 1"),
        ({"batch_size": 0}, "batch_size must be >= 1"),
    ],
)
def test_the_rule_refuses_bad_numbers(kw, match):
    with pytest.raises(ValueError, match=match):
        selection.BatchEmaSelection(**kw)


# ---------------------------------------------------------------- Selector ----------------


def _mesh():
    return jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))


def _shardings():
    mesh = _mesh()
    return {
        "step": NamedSharding(mesh, PartitionSpec()),
        "params": {"w": NamedSharding(mesh, PartitionSpec("data"))},
        "opt_state": {"mu": NamedSharding(mesh, PartitionSpec())},
        "model_state": {},
        "rng": NamedSharding(mesh, PartitionSpec()),
    }


def _state(step):
    sh = _shardings()
    return {
        "step": jax.device_put(jnp.int32(step), sh["step"]),
        "params": {"w": jax.device_put(jnp.full((8,), float(step)), sh["params"]["w"])},
        "opt_state": {"mu": jax.device_put(jnp.full((3,), -float(step)), sh["opt_state"]["mu"])},
        "model_state": {},
        "rng": jax.device_put(jax.random.key_data(jax.random.key(0)), sh["rng"]),
    }


def test_the_held_state_is_the_one_at_the_average_maximum_and_survives_donation(tmp_path):
    # Scores per update; the debiased averages peak at update 5 (from start=3 on).
    scores = {1: 0.9, 2: 0.1, 3: 0.3, 4: 0.8, 5: 0.9, 6: 0.2, 7: 0.1, 8: 0.5}
    rule = _rule(start=3)
    sel = selection.Selector(
        rule, score=lambda step, st: scores[step], state_shardings=_shardings()
    )
    sh = _shardings()
    step_fn = jax.jit(
        lambda st: jax.tree.map(lambda x: x + 1 if x.dtype != jnp.uint32 else x, st),
        in_shardings=(sh,),
        out_shardings=sh,
        donate_argnums=0,
    )
    state = _state(0)
    averages = []
    for step in range(1, 9):
        state = step_fn(state)  # donates the previous state's buffers, as train_step does
        sel.after_update(step, state)
        averages.append(sel.tracker.value)
    want = 3 + int(np.argmax(averages[2:]))
    assert want == 5 and sel.tracker.best_step == 5 and sel.held_step == 5
    np.testing.assert_array_equal(np.asarray(sel.held["params"]["w"]), np.full(8, 5.0))
    np.testing.assert_array_equal(np.asarray(sel.held["opt_state"]["mu"]), np.full(3, 5.0))
    assert sel.held["params"]["w"].sharding == sh["params"]["w"]
    assert sel.last == {"selection_accuracy": 0.5, "selection_accuracy_ema": averages[-1]}
    assert sel.held_meta["selection"]["best_step"] == 5
    assert sel.held_meta["selection"]["count"] == 5  # the average as it was at update 5

    # Written once to best/<5> with that update's metadata; the current state is step 8's.
    ck = ckpt_lib.Checkpointer(str(tmp_path), keep=1, best_metric=rule.key)
    sel.write_best(ck, lambda s: {"step": s})
    sel.write_best(ck, lambda s: {"step": s})  # no second save of the same step
    assert ck.best.all_steps() == [5]
    got = sel.best(ck, state, jax.tree.map(lambda x: x, state), sh)
    assert got[0] == 5 and got[1] is sel.held
    ck.close()

    # A resumed run that has not improved since reads the selected state back from best/.
    resumed = selection.Selector(
        rule,
        score=lambda step, st: 0.0,
        state_shardings=sh,
        resumed_meta={"selection": sel.tracker.state_dict()},
    )
    assert resumed.tracker.state_dict() == sel.tracker.state_dict()
    ck = ckpt_lib.Checkpointer(str(tmp_path), keep=1, best_metric=rule.key)
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state)
    step, restored = resumed.best(ck, state, abstract, sh)
    ck.close()
    assert step == 5
    np.testing.assert_array_equal(np.asarray(restored["params"]["w"]), np.full(8, 5.0))
    assert int(restored["step"]) == 5
    assert restored["opt_state"] is state["opt_state"]  # prediction does not read it


def test_best_before_start_is_none_and_a_missing_best_folder_is_an_error(tmp_path):
    rule = _rule(start=5)
    sel = selection.Selector(rule, score=lambda step, st: 1.0, state_shardings=_shardings())
    sel.after_update(1, _state(1))
    ck = ckpt_lib.Checkpointer(str(tmp_path), keep=1, best_metric=rule.key)
    assert sel.best(ck, _state(1), None, None) is None
    resumed = selection.Selector(
        rule,
        score=lambda step, st: 1.0,
        state_shardings=_shardings(),
        resumed_meta={"selection": {"biased": 0.5, "count": 7, "best_value": 0.6, "best_step": 6}},
    )
    with pytest.raises(ckpt_lib.CheckpointError, match=r"update 6.*not in .*best"):
        resumed.best(ck, _state(7), None, None)
    ck.close()


def _figureqa_batch(answers):
    n = len(answers)
    return {
        "image": np.zeros((n, 4, 4, 3), np.uint8),
        "question_tokens": np.zeros((n, 24), np.int32),
        "question_length": np.full(n, 3, np.int32),
        "label": np.maximum(np.asarray(answers), 0),
        "answer": np.asarray(answers),
        "id": np.asarray([f"{i}/0".encode() for i in range(n)], object),
        "question": np.asarray([b"Is Red the minimum?"] * n, object),
        "figure_type": np.asarray([b"vbar_categorical"] * n, object),
        "question_id": np.zeros(n, np.int64),
    }


def test_a_batch_is_scored_by_the_tasks_own_evaluate():
    from chartjax.tasks import figureqa

    task = figureqa.make_task()  # nothing is read before a split is
    batch = _figureqa_batch([1, 1, 1, 0])
    preds = np.asarray([1, 0, 1, 1])
    assert selection.batch_score(task, preds, batch, "validation2", "accuracy") == 0.5
    with pytest.raises(KeyError, match=r"metric='f1'.*\['accuracy'"):
        selection.batch_score(task, preds, batch, "validation2", "f1")
    # A test split without its key is predicted only (issue 27 item 4): nothing to select by.
    with pytest.raises(KeyError, match=r"metrics on 'no_annot_test2': \[\]"):
        selection.batch_score(task, preds, _figureqa_batch([-1] * 4), "no_annot_test2", "accuracy")
