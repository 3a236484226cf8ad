"""The antialiased resize in cache-sized row blocks and on several threads computes every output
element with the same operations in the same order as the plain kernel: bit-identical, so still
TF's (compared with TensorFlow in tests/data/test_patches.py)."""

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from chartjax.data import patches, resize


@pytest.fixture
def threads():
    """Sets the resize's thread count for one test, then restores it."""
    before = resize.get_threads()
    yield resize.set_threads
    resize.set_threads(before)


def _image(*shape):
    return np.random.default_rng(0).uniform(-2, 2, shape).astype(np.float32)


def _reference(img: np.ndarray, size) -> np.ndarray:
    """The kernel written plainly: each axis a sum over its span, tap by tap, whole arrays."""
    for axis, out_size in enumerate(size):
        source, weights = resize._spans(img.shape[axis], out_size)
        shape = (-1,) + (1,) * (img.ndim - 1 - axis)
        out = np.take(img, source[:, 0], axis=axis) * weights[:, 0].reshape(shape)
        for k in range(1, source.shape[1]):
            out += np.take(img, source[:, k], axis=axis) * weights[:, k].reshape(shape)
        img = out
    return img


def _workers_used(monkeypatch) -> set:
    """The names of the threads that run `_weighted_sum` from now on."""
    names, real = set(), resize._weighted_sum
    monkeypatch.setattr(
        resize,
        "_weighted_sum",
        lambda *a: names.add(threading.current_thread().name) or real(*a),
    )
    return names


@pytest.mark.parametrize(
    "hw,size",
    [
        ((1200, 1600), (624, 832)),  # the benchmark's 1600x1200 chart at 2048 patches
        ((1201, 1603), (625, 833)),  # odd rows, not divisible by 3 threads nor by the blocks
        ((180, 240), (624, 832)),  # a small chart grown to 2048 patches
    ],
)
def test_threads_and_blocks_change_no_bit(hw, size, threads, monkeypatch):
    img = _image(*hw, 3)
    want = _reference(img, size)
    threads(1)
    np.testing.assert_array_equal(resize.antialiased(img, size), want)
    threads(3)
    used = _workers_used(monkeypatch)
    np.testing.assert_array_equal(resize.antialiased(img, size), want)
    assert any(name.startswith("chartjax-resize") for name in used)  # the threaded path ran


def test_small_chunks_grey_images_and_preprocessing(threads, monkeypatch):
    """Many uneven shares and blocks on small images (the thresholds lowered), a 2-D image and
    the whole Pix2Struct preprocessing, each against one thread and the plain kernel."""
    img = _image(101, 67, 3)
    grey = _image(101, 67)
    chart = (np.abs(_image(300, 410, 3)) * 100).astype(np.uint8)
    threads(1)
    want = [resize.antialiased(img, (53, 89)), resize.antialiased(grey, (211, 30))]
    want_patches = patches.preprocess_image(chart, 512)
    np.testing.assert_array_equal(want[0], _reference(img, (53, 89)))
    np.testing.assert_array_equal(want[1], _reference(grey, (211, 30)))
    monkeypatch.setattr(resize, "MIN_FLOATS_PER_THREAD", 64)
    monkeypatch.setattr(resize, "BLOCK_FLOATS", 500)
    for n in (2, 3, 7):
        threads(n)
        np.testing.assert_array_equal(resize.antialiased(img, (53, 89)), want[0])
        np.testing.assert_array_equal(resize.antialiased(grey, (211, 30)), want[1])
        np.testing.assert_array_equal(patches.preprocess_image(chart, 512), want_patches)


def test_small_images_stay_on_the_callers_thread(threads, monkeypatch):
    threads(4)
    used = _workers_used(monkeypatch)
    resize.antialiased(_image(180, 240, 3), (208, 288))  # a 240x180 chart at 256 patches
    resize.antialiased(_image(180, 240, 3), (304, 416))  # and at 512
    assert used == {threading.current_thread().name}


def test_thread_count_setting(threads):
    threads(None)
    assert resize.get_threads() == resize._usable_cores() >= 1
    with pytest.raises(ValueError, match="threads must be >= 1"):
        threads(0)
    code = "from chartjax.data import resize; print(resize.get_threads())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "CHARTJAX_RESIZE_THREADS": "5"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "5"


def test_a_forked_child_resizes_on_its_own_pool():
    """A forked child inherits the pool object but not its threads: work queued there would never
    run. The child makes a new pool."""
    code = textwrap.dedent(
        """
        import os
        import numpy as np
        from chartjax.data import resize
        resize.set_threads(2)
        img = np.ones((1200, 1600, 3), np.float32)
        resize.antialiased(img, (624, 832))  # the parent's pool starts
        pid = os.fork()
        if pid == 0:
            resize.antialiased(img, (624, 832))
            os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
