"""The loader (chartjax/data/loader.py): batches come out in order and equal with 0, 1 or 2
worker processes, large arrays through shared memory (none left behind), the stream is read a
bounded window ahead, a worker's error reaches the caller with its message, a worker's large
array is its shared block mapped here (no copy) and freed with the array, and workers keep freed
memory as the entry points do, and end with their parent (kill -9) leaving nothing behind."""

import functools
import json
import os
import signal

import numpy as np
import pytest

from chartjax.data import loader


def _features(scale: int, ex: dict) -> dict:
    big = np.full((600, 600), ex["i"] * scale, np.float32)  # 1.4 MB: through shared memory
    return {"i": np.int32(ex["i"]), "big": big, "name": f"ex{ex['i']}", "raw": b"\xff"}


def _shm_names() -> set[str]:
    return (
        {n for n in os.listdir("/dev/shm") if n.startswith("psm_")}
        if os.path.isdir("/dev/shm")
        else set()
    )


@pytest.fixture
def blocks(monkeypatch) -> set[str]:
    """The names of the shared blocks this process received from its workers, read or freed
    unread: the test's own blocks, whatever concurrent tests create in /dev/shm meanwhile."""
    seen: set[str] = set()

    def note(result):
        seen.update(v[1] for v in result.values() if loader._is_shared(v))

    unshared, release = loader._unshared, loader._release

    def _unshared(batch):
        note(batch)
        return unshared(batch)

    def _release(future):
        if not future.cancelled() and future.exception() is None:
            note(future.result())
        return release(future)

    monkeypatch.setattr(loader, "_unshared", _unshared)
    monkeypatch.setattr(loader, "_release", _release)
    return seen


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_batches_in_order_for_any_worker_count(workers, blocks):
    fn = functools.partial(loader.batch_of, functools.partial(_features, 3))
    chunks = loader.chunked(({"i": i} for i in range(11)), 4, drop_remainder=False)
    got = list(loader.map_ordered(fn, chunks, workers=workers))
    assert [b["i"].tolist() for b in got] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]
    assert got[2]["big"].shape == (3, 600, 600) and got[2]["big"].dtype == np.float32
    np.testing.assert_array_equal(got[1]["big"][:, 7, 9], [12, 15, 18, 21])
    assert got[0]["name"].tolist() == [b"ex0", b"ex1", b"ex2", b"ex3"]  # strings as UTF-8 bytes
    assert got[0]["raw"].tolist() == [b"\xff"] * 4
    assert len(blocks) == (3 if workers else 0)  # "big" of each batch through shared memory
    assert not blocks & _shm_names()  # every shared block unlinked once read


def test_drop_remainder_and_a_bounded_read_ahead():
    pulled = []

    def examples():
        for i in range(1000):
            pulled.append(i)
            yield {"i": i}

    chunks = loader.chunked(examples(), 5, drop_remainder=True)
    fn = functools.partial(loader.batch_of, functools.partial(_features, 1))
    it = loader.map_ordered(fn, chunks, workers=1, ahead=2)
    first = next(it)
    assert first["i"].tolist() == [0, 1, 2, 3, 4]
    assert len(pulled) <= 5 * 3  # the window (2 chunks) plus the one being refilled
    it.close()
    assert [len(c) for c in loader.chunked(iter(range(7)), 3, drop_remainder=True)] == [3, 3]


def _fails(ex):
    raise ValueError(f"example {ex['i']} has no chart")


@pytest.mark.parametrize("workers", [0, 1])
def test_a_feature_map_error_reaches_the_caller(workers):
    fn = functools.partial(loader.batch_of, _fails)
    with pytest.raises(ValueError, match="example 0 has no chart"):
        list(loader.map_ordered(fn, [[{"i": 0}]], workers=workers))


def test_worker_count_from_gin_or_environment(monkeypatch):
    monkeypatch.setenv("CHARTJAX_LOADER_WORKERS", "3")
    assert loader.loader_workers() == 3
    assert loader.loader_workers(0) == 0
    monkeypatch.delenv("CHARTJAX_LOADER_WORKERS")
    assert 1 <= loader.loader_workers() <= 8
    with pytest.raises(ValueError, match="loader_workers.count"):
        loader.loader_workers(-1)


@pytest.mark.slow  # a training run in a process of its own
def test_batches_read_ahead_of_a_finished_run_are_freed_at_exit(tmp_path):
    """A training run ends with batches still in flight, its iterator held by the device-prefetch
    thread (never closed): their shared memory is unlinked at exit, where Python's resource
    tracker used to report "1 leaked shared_memory objects" after every run."""
    import subprocess
    import sys

    # A file, not -c: the spawned workers import it as __mp_main__, so they too send every
    # array (the smoke task's are small) through shared memory.
    script = tmp_path / "run_smoke.py"
    script.write_text(
        "import sys\n"
        "from chartjax.data import loader\n"
        "loader._SHARED_MIN_BYTES = 1\n"
        "if __name__ == '__main__':\n"
        "    from chartjax import config as config_lib\n"
        "    from chartjax import train as train_lib\n"
        "    config_lib.parse_gin(['tasks/t5_synthetic_smoke.gin'], ['train.num_train_steps = 2',"
        " 'train.checkpoint_every = 2', 'train.final_eval = False', 'train.progress = False',"
        " 'T5Config.num_encoder_layers = 1', 'T5Config.num_decoder_layers = 1',"
        " 'loader_workers.count = 1'])\n"
        "    train_lib.train(sys.argv[1])\n"
    )
    # One device: the 8 the suite simulates would only make the run's compile and save longer.
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=1")
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "leaked shared_memory" not in out.stderr, out.stderr


def _mapped_psm() -> set[str]:
    """The shared blocks this process maps (a block's name stays in /proc after its unlink)."""
    with open("/proc/self/maps") as f:
        return {line.split()[-2] for line in f if "/psm_" in line and "(deleted)" in line}


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="zero-copy where blocks are files")
def test_a_worker_array_is_its_shared_block_mapped_and_freed_with_the_array(blocks):
    import gc

    mapped = _mapped_psm()
    fn = functools.partial(loader.batch_of, functools.partial(_features, 2))
    it = loader.map_ordered(fn, [[{"i": 1}, {"i": 2}]], workers=3)
    big = next(it)["big"]
    it.close()
    loader._POOLS.pop(3).shutdown()  # the worker that wrote it is gone
    assert len(blocks) == 1 and not blocks & _shm_names()  # unlinked while the array lives
    assert len(_mapped_psm() - mapped) == 1  # not a copy: the block itself
    np.testing.assert_array_equal(big[:, 5, 5], [2, 4])
    big[0, 0, 0] = -1  # writable; copy-on-write, the block is not shared any more
    assert big[0, 0, 0] == -1
    view = big[1]
    del big
    gc.collect()
    assert view[3, 3] == 4 and len(_mapped_psm() - mapped) == 1  # a view keeps the mapping
    del view
    gc.collect()
    assert not _mapped_psm() - mapped  # the memory goes with the last view


def test_workers_keep_freed_memory_as_the_entry_points_do(monkeypatch):
    """The spawned worker does not inherit the parent's mallopt (chartjax/host_memory.py), so its
    initializer sets it (and ignores Ctrl-C), and keeps the resize on one thread (each worker
    holds a core already). Checked on the initializer itself: where a buffer lands (heap or
    mmap) also depends on the address-space layout, which made a /proc/self/maps check flaky."""
    from chartjax import host_memory
    from chartjax.data import resize

    calls = []
    monkeypatch.setattr(host_memory, "keep_freed_memory", lambda: calls.append(1) or True)
    previous, threads = signal.getsignal(signal.SIGINT), resize.get_threads()
    resize.set_threads(3)
    try:
        loader._init_worker(None)  # no parent watch here (the kill -9 test has it)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert resize.get_threads() == 1
    finally:
        signal.signal(signal.SIGINT, previous)
        resize.set_threads(threads)
    assert calls == [1]


def test_a_closed_thread_stream_ends_its_thread():
    """Closed with its queue full, the 0-worker thread used to block on its next put for good,
    holding the batches and the source."""
    import threading
    import time

    computed = []

    def items():
        for i in range(100):
            computed.append(i)
            yield i

    before = set(threading.enumerate())
    it = loader.threaded(items(), 2)
    assert next(it) == 0
    (thread,) = set(threading.enumerate()) - before
    assert thread.name == loader.THREAD_NAME
    deadline = time.monotonic() + 10
    while len(computed) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert computed == [0, 1, 2, 3]  # 1 and 2 queued, 3 waiting for room
    it.close()  # joins the thread
    assert not thread.is_alive() and computed == [0, 1, 2, 3]


_EXIT_INSIDE_JAX = """
import numpy as np, jax
from chartjax.data import loader
x = np.ones((64, 4096), np.float32)
def batches():
    while True:
        yield jax.device_put(x)
for i, _ in enumerate(loader.threaded(batches(), 2)):
    if i == 20:
        break  # the stream is left open: its thread is still putting the next batches
"""


def test_a_stream_left_open_is_ended_before_the_interpreter_finalizes():
    """A daemon thread still inside JAX's C++ at finalization is unwound by pthread_exit and
    the process aborts after its work is done ("terminate called ... exception not rethrown",
    rc -6: a CI run's finished training run, its device prefetch never closed). Without the
    join at exit this script aborted in 8 of 9 runs here (timing: the thread must be inside a put)."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _EXIT_INSIDE_JAX], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "terminate called" not in out.stderr


_KILLED_CHILD = """
import concurrent.futures, itertools, json, sys, time
import numpy as np
from chartjax.data import loader

def make(chunk):
    return {"x": np.full((1 << 21,), chunk[0] % 251, np.uint8)}  # 2 MiB: shared memory

if __name__ == "__main__":
    it = loader.map_ordered(make, ([i] for i in itertools.count()), workers=2, ahead=2)
    next(it), next(it)
    concurrent.futures.wait(list(loader._PENDING))  # the window refilled: the workers idle
    in_flight = [f.result()["x"][1] for f in loader._PENDING]  # ("shm", name, shape, dtype)
    print(json.dumps(in_flight), flush=True)
    print("ready", flush=True)
    time.sleep(600)
"""


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process, from /proc."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[int(name)] = (int(fields[1]), fields[0])
    return out


def _shm_all() -> set[str]:
    return {n for n in os.listdir("/dev/shm") if n.startswith(("psm_", "sem.mp-"))}


def _held_by(pids: set[int]) -> set[str]:
    """The /dev/shm names (shared blocks, semaphores) these processes map or hold open."""
    held = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                text = f.read()
            text += " ".join(
                os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")
            )
        except OSError:
            continue
        held |= {n for n in _shm_all() if f"/dev/shm/{n}" in text}
    return held


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="Linux: /proc and /dev/shm")
def test_kill_9_of_the_parent_leaves_no_worker_and_no_shared_memory(tmp_path):
    """A preempted job or the OOM killer: no shutdown runs. Its loader workers used to live on
    under pid 1 for good (~300 MB each), holding /dev/shm names and the job's stdout pipe."""
    import subprocess
    import sys
    import time

    script = tmp_path / "killed.py"
    script.write_text(_KILLED_CHILD)
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        in_flight = set(json.loads(proc.stdout.readline()))
        assert proc.stdout.readline() == b"ready\n"
        tree = {pid for pid, (ppid, _) in _proc_table().items() if ppid == proc.pid}
        assert len(tree) == 3  # two workers and the resource tracker
        # Only the names of this process tree count: concurrent tests make their own.
        ours = in_flight | _held_by(tree | {proc.pid})
        assert in_flight and in_flight <= _shm_all()  # a batch in flight in shared memory
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 30
    while True:  # a bounded wait for the workers to see their parent gone and exit
        table = _proc_table()
        alive = {p for p in tree if p in table and table[p][1] != "Z"}
        left = ours & _shm_all()
        if not (alive or left) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not alive, f"orphaned workers: {sorted(alive)}"
    assert not left, f"left in /dev/shm: {sorted(left)}"
    assert proc.stdout.read() == b""  # EOF: no orphan holds the pipe (`| tee` returns)


def _dies_on_second(chunk):
    if chunk[0] == 1:
        os._exit(3)  # killed or out of memory: no Python error reaches the parent
    return {"i": np.int32(chunk[0])}


@pytest.mark.slow
def test_a_dead_worker_is_one_error_whichever_call_meets_it():
    """`pool.submit` raises BrokenProcessPool too once a worker has died between batches; it
    used to escape the `try` that words it (issue 44 item 13)."""
    it = loader.map_ordered(_dies_on_second, ([i] for i in range(50)), workers=1, ahead=2)
    with pytest.raises(loader.WorkerDied, match="a loader worker process died"):
        list(it)
    assert 1 not in loader._POOLS  # a broken pool is not reused


def test_a_stream_closed_by_an_error_frees_its_batches_even_a_block_already_gone(blocks):
    """The packer's error (a row shorter than one example) closed the loader's stream with
    batches in flight; freeing one whose shared block was already unlinked raised a second
    traceback, `FileNotFoundError: /psm_...` (issue 44 item 11)."""
    from multiprocessing import shared_memory

    fn = functools.partial(loader.batch_of, functools.partial(_features, 1))
    chunks = loader.chunked(({"i": i} for i in range(40)), 2, drop_remainder=False)
    it = loader.map_ordered(fn, chunks, workers=1, ahead=3)
    next(it)
    in_flight = [f for f in loader._PENDING if not f.cancelled()]
    names = {f.result()["big"][1] for f in in_flight}  # ("shm", name, shape, dtype)
    gone = in_flight[0].result()["big"][1]
    shm = shared_memory.SharedMemory(name=gone)
    shm.close()
    shm.unlink()  # as another cleanup would
    it.close()  # no FileNotFoundError
    loader._unlink(gone)  # nor again
    assert names <= blocks and len(blocks) == 1 + len(names)  # the batch read, those in flight
    assert not blocks & _shm_names()
