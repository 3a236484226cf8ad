"""Feature maps in loader worker processes, batches out in order whatever the worker count.

A task's feature map is Python (PIL, SentencePiece, NumPy). Run in threads of the training
process it would share one GIL with the step's dispatch; here `map_ordered` sends each batch's
examples to a pool of worker processes and yields the results in submission order, so a batch
is the same with 0, 1 or 16 workers, and a resumed run sees the batches of an uninterrupted one.

Hand-written rather than Grain's `mp_prefetch` or `multiprocessing.Pool`: the work unit is a
whole batch (one round trip per batch), the window is bounded (an infinite training stream is
never read ahead without limit), large arrays come back through shared memory instead of the
pipe, and the FigureQA image cache stays in the training process (`Task.batch_features` runs
there, on the stacked batch). Workers are spawned (never forked: the parent runs JAX's
threads), ignore Ctrl-C (the training loop turns the first one into save-and-stop), and take the
map as cloudpickle bytes, loaded once per worker.

Per example a worker costs no more CPU than the map in this process (tools/bench/input.py).
It cost 15-25% more through memory, measured per 8-image Pix2Struct batch: spawned workers did
not inherit the parent's `host_memory.keep_freed_memory()` (19 CPU ms more per image, all page
faults; their initializer calls it now); filling a fresh shared block through its mapping faults
in every 4 KiB page (44 ms for the batch's 50 MB; write(2) to the block's file: 23 ms); and the
parent copied the block out (23 ms; on Linux the array now is the block, mapped copy-on-write,
its name unlinked at once: the memory goes with the array's last view).

Workers: `loader_workers.count` in gin, else the CHARTJAX_LOADER_WORKERS environment variable,
else one per core beyond the first (at most 8); 0 runs the map in a background thread of this
process.
"""

from __future__ import annotations

import atexit
import collections
import hashlib
import itertools
import mmap
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from multiprocessing import shared_memory

import gin
import numpy as np

_SHARED_MIN_BYTES = 1 << 20  # arrays from this size come back through shared memory
# Where POSIX shared memory blocks are files (Linux): written and mapped through their paths.
_SHM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else None
_MAPS: dict[str, Callable] = {}  # in a worker: the maps it has loaded, by digest
_POOLS: dict[int, object] = {}  # in the parent: one pool per worker count, reused
_PENDING: set = set()  # in the parent: futures submitted and not yet read, of every map


class WorkerDied(RuntimeError):
    """A loader worker process died: the CLIs say so in one line."""


@gin.configurable
def loader_workers(count: int | None = None) -> int:
    """The number of loader worker processes (module docstring)."""
    if count is None:
        env = os.environ.get("CHARTJAX_LOADER_WORKERS")
        if env and not env.strip().isdigit():
            raise ValueError(
                f"CHARTJAX_LOADER_WORKERS={env!r}: expected a whole number >= 0 of loader "
                "worker processes"
            )
        count = int(env) if env else min(max((os.cpu_count() or 1) - 1, 1), 8)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ValueError(f"loader_workers.count must be a whole number >= 0, got {count!r}")
    return count


def stack(rows: list[dict]) -> dict:
    """Feature dicts -> one batch dict: numbers stacked, strings as an object array of bytes."""
    out = {}
    for key in rows[0]:
        values = [r[key] for r in rows]
        if isinstance(values[0], str | bytes):  # UTF-8 bytes, as evaluation has always read
            arr = np.empty(len(values), object)
            arr[:] = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in values]
            out[key] = arr
        else:
            out[key] = np.stack([np.asarray(v) for v in values])
    return out


def chunked(examples: Iterable[dict], size: int, drop_remainder: bool) -> Iterator[list[dict]]:
    """Lists of `size` consecutive examples (the last one shorter unless `drop_remainder`)."""
    it = iter(examples)
    while chunk := list(itertools.islice(it, size)):
        if len(chunk) < size and drop_remainder:
            return
        yield chunk


def batch_of(fn: Callable[[dict], dict], examples: list[dict]) -> dict:
    """The batch of `examples` through the per-example map `fn`."""
    return stack([fn(ex) for ex in examples])


def map_ordered(
    fn: Callable[[list[dict]], dict],
    chunks: Iterable[list[dict]],
    workers: int | None = None,
    ahead: int = 2,
) -> Iterator[dict]:
    """`fn(chunk)` for every chunk, in order: in `workers` processes, `ahead` chunks in flight
    per worker (at least 2 in all); with 0 workers, in one background thread."""
    workers = loader_workers() if workers is None else workers
    if workers == 0:
        return threaded((fn(c) for c in chunks), max(ahead, 2))
    return _in_workers(fn, chunks, workers, max(ahead * workers, 2))


THREAD_NAME = "chartjax-loader"  # the thread of `threaded`
_JOIN_S = 60.0  # how long a closing iterator waits for its thread's item in flight
_LIVE: dict = {}  # thread -> its stop, for the threads of iterators not yet closed


def threaded(items: Iterator, size: int) -> Iterator:
    """`items` computed `size` ahead in a daemon thread; its errors raised here. Closed (or at
    exit, if never closed), the thread ends once the item it is computing is done, and is
    joined: a daemon thread still inside JAX's C++ (a `device_put` of the next batch) when the
    interpreter finalizes is unwound by pthread_exit through C++ frames, and the process
    aborts after the run finished ("terminate called ... exception not rethrown", rc -6)."""
    q: queue.Queue = queue.Queue(maxsize=size)
    done = object()
    stop = threading.Event()

    def work():
        try:
            for item in items:
                q.put(item)
                if stop.is_set():  # before computing another
                    break
            else:
                q.put(done)
        except BaseException as e:  # surfaced in the consumer, never swallowed
            q.put(e)
        finally:
            close = getattr(items, "close", None)
            if close is not None:  # an upstream `threaded` ends its own thread too
                close()

    thread = threading.Thread(target=work, name=THREAD_NAME, daemon=True)
    _LIVE[thread] = (stop, q)
    end = _end  # a generator finalized at interpreter teardown no longer sees module globals
    thread.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        end(thread)


def _end(
    thread: threading.Thread, live=_LIVE, clock=time.monotonic, empty=queue.Empty, wait_s=_JOIN_S
) -> None:
    stop, q = live.pop(thread, (None, None))
    if stop is None:
        return
    stop.set()
    deadline = clock() + wait_s
    while thread.is_alive() and clock() < deadline:
        try:  # a full queue would block the thread's last put forever
            while True:
                q.get_nowait()
        except empty:
            pass
        thread.join(0.05)


def _pool(workers: int):
    import concurrent.futures
    import multiprocessing

    pool = _POOLS.get(workers)
    if pool is None:
        pool = concurrent.futures.ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(os.getpid(),),
        )
        _POOLS[workers] = pool
    return pool


@atexit.register
def _shutdown() -> None:
    for thread in list(_LIVE):  # iterators never closed (a loop left with `break`)
        _end(thread)
    # Batches still in flight (read ahead of a loop that ended without closing its iterator)
    # hold shared memory: free it, or the resource tracker reports it leaked at exit.
    for future in list(_PENDING):
        if not future.cancel():
            _release(future)
    _PENDING.clear()
    for pool in _POOLS.values():
        pool.shutdown(wait=False, cancel_futures=True)
    _POOLS.clear()


def _init_worker(parent: int | None) -> None:
    from chartjax import host_memory
    from chartjax.data import resize

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    host_memory.keep_freed_memory()  # spawned: the parent's mallopt does not carry over
    resize.set_threads(1)  # each worker holds a core already: more threads only contend
    if parent is not None:
        threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()


_PARENT_POLL_S = 0.2


def _exit_with_parent(parent: int) -> None:
    """Ends this worker once `parent` is gone (kill -9, the OOM killer: no shutdown ran).
    Orphaned workers would otherwise live on under pid 1 for good, holding their memory, the
    parent's stdout pipe (`... | tee log` never returns) and the resource tracker, which unlinks
    the /dev/shm blocks and semaphores left registered only when its last client has exited.

    A polling thread rather than PR_SET_PDEATHSIG: that signal follows the *thread* that
    spawned the worker, and the pool may be started from a loader thread that ends first."""
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL_S)
    os._exit(0)


def _in_workers(fn, chunks: Iterable[list[dict]], workers: int, window: int) -> Iterator[dict]:
    from concurrent.futures.process import BrokenProcessPool

    import cloudpickle

    payload = cloudpickle.dumps(fn)
    digest = hashlib.sha1(payload).hexdigest()
    pool = _pool(workers)
    pending: collections.deque = collections.deque()
    it = iter(chunks)
    try:
        while True:
            try:  # submit raises it too, once a worker has died between batches
                while len(pending) < window:
                    chunk = next(it, None)
                    if chunk is None:
                        break
                    pending.append(pool.submit(_work, digest, payload, chunk))
                    _PENDING.add(pending[-1])
                if not pending:
                    return
                future = pending.popleft()
                _PENDING.discard(future)
                batch = _unshared(future.result())
            except BrokenProcessPool as e:
                _POOLS.pop(workers, None)
                raise WorkerDied(
                    "a loader worker process died (killed, or out of memory?); set "
                    "loader_workers.count = 0 to run the feature map in this process and see "
                    "its error"
                ) from e
            yield batch
    finally:
        for f in pending:
            _PENDING.discard(f)
            if not f.cancel():
                _release(f)


def _release(future) -> None:
    """Free the shared memory of a result nobody will read."""
    try:
        result = future.result()
    except BaseException:
        return
    for v in result.values():
        if _is_shared(v):
            _unlink(v[1])


def _work(digest: str, payload: bytes, chunk: list[dict]) -> dict:
    fn = _MAPS.get(digest)
    if fn is None:
        import cloudpickle

        if len(_MAPS) > 8:  # maps of finished pipelines
            _MAPS.clear()
        fn = _MAPS[digest] = cloudpickle.loads(payload)
    return _shared(fn(chunk))


def _shared(batch: dict) -> dict:
    """Large arrays -> ("shm", name, shape, dtype): written once into shared memory."""
    out = {}
    try:
        for k, v in batch.items():
            if isinstance(v, np.ndarray) and v.dtype != object and v.nbytes >= _SHARED_MIN_BYTES:
                shm = shared_memory.SharedMemory(create=True, size=v.nbytes)
                out[k] = ("shm", shm.name, v.shape, v.dtype.str)
                data = np.ascontiguousarray(v).reshape(-1).view(np.uint8)
                path = _SHM_DIR and os.path.join(_SHM_DIR, shm.name)
                if path and os.path.exists(path):
                    shm.close()
                    with open(path, "r+b") as f:
                        f.write(data)  # the kernel fills the pages: no fault per page
                else:
                    np.ndarray(data.shape, np.uint8, buffer=shm.buf)[...] = data
                    shm.close()
            else:
                out[k] = v
    except BaseException:
        for v in out.values():
            if _is_shared(v):
                _unlink(v[1])
        raise
    return out


def _is_shared(v) -> bool:
    return isinstance(v, tuple) and len(v) == 4 and v[0] == "shm"


def _unlink(name: str) -> None:
    try:
        shm = shared_memory.SharedMemory(name=name)  # unlink() also tells the resource tracker
    except FileNotFoundError:  # already gone (a cleanup after an error, at exit): nothing to do
        return
    shm.close()
    try:
        shm.unlink()
    except FileNotFoundError:  # unlinked by another cleanup in between
        pass


def _unshared(batch: dict) -> dict:
    out = {}
    try:
        for k, v in batch.items():
            out[k] = _array(*v[1:]) if _is_shared(v) else v
    finally:
        for v in batch.values():
            if _is_shared(v):
                _unlink(v[1])
    return out


def _array(name: str, shape: tuple, dtype: str) -> np.ndarray:
    """The array in shared block `name`, before the block's name is unlinked."""
    path = _SHM_DIR and os.path.join(_SHM_DIR, name)
    if path and os.path.exists(path):
        # Zero-copy: the block's copy-on-write mapping (writable, writes stay here) outlives
        # its name and is unmapped with the array's last view.
        with open(path, "rb") as f:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        return np.frombuffer(buf, np.dtype(dtype), count=int(np.prod(shape))).reshape(shape)
    shm = shared_memory.SharedMemory(name=name)
    try:
        return np.array(np.ndarray(shape, np.dtype(dtype), buffer=shm.buf))
    finally:
        shm.close()
