"""chartjax.data.feature_cache: featurize once (padding dropped), cache on disk, replay in a
seeded, resumable, per-process order."""

import dataclasses
import os

import numpy as np
import pytest

from chartjax.data import feature_cache, pipeline
from chartjax.tasks.core.task import Task


@dataclasses.dataclass
class FakeSource:
    """Eval split "a" holds rows x = 0..num-1 (+100 for split "b"), y = 2x; no training data."""

    num: int = 7
    calls: list | None = None

    def train_examples(self, **kwargs):
        raise AssertionError("not called")

    def eval_examples(self, split, *, process_index, process_count):
        if self.calls is not None:
            self.calls.append(split)
        x = np.arange(self.num) + (100 if split == "b" else 0)
        return [{"x": v, "y": 2 * v} for v in x]


def _task(num=7, calls=None):
    return Task(
        name="fake",
        source=FakeSource(num, calls),
        features=lambda keep_host: lambda ex: ex,
        loss=None,
        predict=None,
        evaluate=None,
        model_inputs=("x",),
    )


def _eval(task, split, batch):
    return pipeline.eval_batches(task, split, batch, 0, 1)


def test_featurize_drops_padding():
    out = feature_cache.featurize(_eval(_task(), "a", 3))
    np.testing.assert_array_equal(out["x"], np.arange(7))
    np.testing.assert_array_equal(out["y"], 2 * np.arange(7))
    assert out["_mask"].all() and len(out["_mask"]) == 7
    b = feature_cache.featurize(_eval(_task(), "b", 4))
    np.testing.assert_array_equal(b["x"], 100 + np.arange(7))


def test_cached_features_are_written_then_read(tmp_path):
    cache = str(tmp_path / "k")
    first = feature_cache.cached_features(lambda: _eval(_task(), "a", 3), ("x",), cache)
    assert sorted(os.listdir(tmp_path)) == ["k"]  # no .partial left behind
    assert sorted(os.listdir(cache)) == ["x.npy"]
    calls = []
    task = _task(calls=calls)
    again = feature_cache.cached_features(lambda: _eval(task, "a", 3), ("x",), cache)
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
    batches = _take(pipeline.train_batches(task, 4, 3, 0, 0, 1), 5)  # 20 positions: two epochs
    xs = np.concatenate([b["x"] for b in batches])
    for epoch in (0, 1):
        want = np.random.default_rng([3, epoch]).permutation(10)
        np.testing.assert_array_equal(xs[10 * epoch : 10 * (epoch + 1)], want)
    for b in batches:
        np.testing.assert_array_equal(b["y"], 10 * b["x"])
    # Resuming at step 3 gives the 4th batch; two processes split each global batch in order.
    np.testing.assert_array_equal(
        next(pipeline.train_batches(task, 4, 3, 3, 0, 1))["x"], batches[3]["x"]
    )
    halves = [_take(pipeline.train_batches(task, 4, 3, 0, p, 2), 5) for p in (0, 1)]
    for step in range(5):
        joined = np.concatenate([halves[0][step]["x"], halves[1][step]["x"]])
        np.testing.assert_array_equal(joined, batches[step]["x"])
    with pytest.raises(ValueError, match="not divisible"):
        next(pipeline.train_batches(task, 5, 3, 0, 0, 2))


def test_replay_task_evaluates_once():
    calls = []
    task = feature_cache.replay_task(_task(calls=calls), {"x": np.arange(4)}, eval_batch_size=2)
    first = list(_eval(task, "a", 3))
    second = list(_eval(task, "a", 3))
    assert calls == ["a"]
    assert len(first) == len(second) == 3
    for b1, b2 in zip(first, second):
        np.testing.assert_array_equal(b1["x"], b2["x"])
    np.testing.assert_array_equal(first[-1]["_mask"], [True, False, False])
    list(_eval(task, "b", 3))
    assert calls == ["a", "b"]


def test_replay_crosses_epochs_in_one_batch():
    feats = {"x": np.arange(6), "y": np.arange(6) * 3}
    task = feature_cache.replay_task(_task(), feats)
    it = pipeline.train_batches(task, 4, 1, 0, 0, 1)
    xs = np.concatenate([next(it)["x"] for _ in range(3)])  # 12 positions, epochs 0 and 1
    want = np.concatenate([np.random.default_rng([1, e]).permutation(6) for e in (0, 1)])
    np.testing.assert_array_equal(xs, want)
    resumed = next(pipeline.train_batches(task, 4, 1, 1, 0, 1))
    np.testing.assert_array_equal(resumed["x"], want[4:8])
    np.testing.assert_array_equal(resumed["y"], 3 * want[4:8])
