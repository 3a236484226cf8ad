"""chartjax.data.feature_cache: featurize once (padding dropped), cache on disk, replay in a
seeded, resumable, per-process order."""

import dataclasses
import os
from collections.abc import Callable

import numpy as np
import pytest

from chartjax.data import feature_cache


@dataclasses.dataclass(frozen=True)
class FakeTask:
    """The two fields replay_task replaces, and one it keeps."""

    name: str
    train_batches: Callable
    eval_batches: Callable


def _task(num=7, calls=None):
    """A task whose eval split "a" holds rows x = 0..num-1 (+100 for split "b"), y = 2x."""

    def eval_batches(split, global_batch_size, process_index, process_count):
        if calls is not None:
            calls.append(split)
        ids = np.arange(num) + (100 if split == "b" else 0)
        for start in range(0, num, global_batch_size):
            rows = ids[start : start + global_batch_size]
            x = np.resize(rows, global_batch_size)  # padded with repeats, masked out
            yield {"x": x, "y": 2 * x, "_mask": np.arange(global_batch_size) < len(rows)}

    def unused(*args, **kwargs):
        raise AssertionError("not called")

    return FakeTask("fake", unused, eval_batches)


def test_featurize_drops_padding():
    out = feature_cache.featurize(_task().eval_batches("a", 3, 0, 1))
    np.testing.assert_array_equal(out["x"], np.arange(7))
    np.testing.assert_array_equal(out["y"], 2 * np.arange(7))
    assert out["_mask"].all() and len(out["_mask"]) == 7
    b = feature_cache.featurize(_task().eval_batches("b", 4, 0, 1))
    np.testing.assert_array_equal(b["x"], 100 + np.arange(7))


def test_cached_features_are_written_then_read(tmp_path):
    cache = str(tmp_path / "k")
    first = feature_cache.cached_features(lambda: _task().eval_batches("a", 3, 0, 1), ("x",), cache)
    assert sorted(os.listdir(tmp_path)) == ["k"]  # no .partial left behind
    assert sorted(os.listdir(cache)) == ["x.npy"]
    calls = []
    batches = _task(calls=calls).eval_batches
    again = feature_cache.cached_features(lambda: batches("a", 3, 0, 1), ("x",), cache)
    assert calls == []  # read from disk: the pipeline never started
    assert list(again) == ["x"]
    np.testing.assert_array_equal(again["x"], first["x"])
    np.testing.assert_array_equal(again["x"], np.arange(7))


def test_cache_key():
    k = feature_cache.cache_key(b"corpus", b"vocab", 256, 96)
    assert len(k) == 16 and int(k, 16) >= 0
    assert k == feature_cache.cache_key(b"corpus", b"vocab", 256, 96)
    assert k != feature_cache.cache_key(b"corpus", b"vocab", 256, 97)
    assert k != feature_cache.cache_key(b"corpus", b"vocab2", 256, 96)


def _take(it, n):
    return [next(it) for _ in range(n)]


def test_replay_task_order_resume_and_processes():
    feats = {"x": np.arange(10), "y": 10 * np.arange(10)}
    task = feature_cache.replay_task(_task(), feats)
    assert task.name == "fake"
    batches = _take(task.train_batches(4, 3, 0, 0, 1), 5)  # 20 positions: two epochs
    xs = np.concatenate([b["x"] for b in batches])
    for epoch in (0, 1):
        want = np.random.default_rng([3, epoch]).permutation(10)
        np.testing.assert_array_equal(xs[10 * epoch : 10 * (epoch + 1)], want)
    for b in batches:
        np.testing.assert_array_equal(b["y"], 10 * b["x"])
    # Resuming at step 3 gives the 4th batch; two processes split each global batch in order.
    np.testing.assert_array_equal(next(task.train_batches(4, 3, 3, 0, 1))["x"], batches[3]["x"])
    halves = [_take(task.train_batches(4, 3, 0, p, 2), 5) for p in (0, 1)]
    for step in range(5):
        joined = np.concatenate([halves[0][step]["x"], halves[1][step]["x"]])
        np.testing.assert_array_equal(joined, batches[step]["x"])
    with pytest.raises(ValueError, match="not divisible"):
        next(task.train_batches(5, 3, 0, 0, 2))


def test_replay_task_evaluates_once():
    calls = []
    task = feature_cache.replay_task(_task(calls=calls), {"x": np.arange(4)})
    first = list(task.eval_batches("a", 3, 0, 1))
    second = list(task.eval_batches("a", 3, 0, 1))
    assert calls == ["a"]
    assert len(first) == len(second) == 3
    for b1, b2 in zip(first, second):
        np.testing.assert_array_equal(b1["x"], b2["x"])
    np.testing.assert_array_equal(first[-1]["_mask"], [True, False, False])
    list(task.eval_batches("b", 3, 0, 1))
    assert calls == ["a", "b"]


def test_replay_crosses_epochs_in_one_batch():
    feats = {"x": np.arange(6), "y": np.arange(6) * 3}
    it = feature_cache.replay(feats, 4, seed=1)
    xs = np.concatenate([next(it)["x"] for _ in range(3)])  # 12 positions, epochs 0 and 1
    want = np.concatenate([np.random.default_rng([1, e]).permutation(6) for e in (0, 1)])
    np.testing.assert_array_equal(xs, want)
    resumed = next(feature_cache.replay(feats, 4, seed=1, start_step=1))
    np.testing.assert_array_equal(resumed["x"], want[4:8])
    np.testing.assert_array_equal(resumed["y"], 3 * want[4:8])
