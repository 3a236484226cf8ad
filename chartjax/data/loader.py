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

Workers: `loader_workers.count` in gin, else the CHARTJAX_LOADER_WORKERS environment variable,
else one per core beyond the first (at most 8); 0 runs the map in a background thread of this
process.
"""

from __future__ import annotations

import atexit
import collections
import hashlib
import itertools
import os
import queue
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from multiprocessing import shared_memory

import gin
import numpy as np

_SHARED_MIN_BYTES = 1 << 20  # arrays from this size come back through shared memory
_MAPS: dict[str, Callable] = {}  # in a worker: the maps it has loaded, by digest
_POOLS: dict[int, object] = {}  # in the parent: one pool per worker count, reused
_PENDING: set = set()  # in the parent: futures submitted and not yet read, of every map


@gin.configurable
def loader_workers(count: int | None = None) -> int:
    """The number of loader worker processes (module docstring)."""
    if count is None:
        env = os.environ.get("CHARTJAX_LOADER_WORKERS")
        count = int(env) if env else min(max((os.cpu_count() or 1) - 1, 1), 8)
    if count < 0:
        raise ValueError(f"loader_workers.count must be >= 0, got {count}")
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


def threaded(items: Iterator, size: int) -> Iterator:
    """`items` computed `size` ahead in a daemon thread; its errors raised here."""
    q: queue.Queue = queue.Queue(maxsize=size)
    done = object()
    stop = threading.Event()

    def work():
        try:
            for item in items:
                if stop.is_set():
                    return
                q.put(item)
        except BaseException as e:  # surfaced in the consumer, never swallowed
            q.put(e)
        q.put(done)

    threading.Thread(target=work, daemon=True).start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


def _pool(workers: int):
    import concurrent.futures
    import multiprocessing

    pool = _POOLS.get(workers)
    if pool is None:
        pool = concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"), initializer=_ignore_sigint
        )
        _POOLS[workers] = pool
    return pool


@atexit.register
def _shutdown() -> None:
    # Batches still in flight (read ahead of a loop that ended without closing its iterator)
    # hold shared memory: free it, or the resource tracker reports it leaked at exit.
    for future in list(_PENDING):
        if not future.cancel():
            _release(future)
    _PENDING.clear()
    for pool in _POOLS.values():
        pool.shutdown(wait=False, cancel_futures=True)
    _POOLS.clear()


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


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
            while len(pending) < window:
                chunk = next(it, None)
                if chunk is None:
                    break
                pending.append(pool.submit(_work, digest, payload, chunk))
                _PENDING.add(pending[-1])
            if not pending:
                return
            try:
                future = pending.popleft()
                _PENDING.discard(future)
                yield _unshared(future.result())
            except BrokenProcessPool as e:
                _POOLS.pop(workers, None)
                raise RuntimeError(
                    "a loader worker process died (killed, or out of memory?); set "
                    "loader_workers.count = 0 to run the feature map in this process and see "
                    "its error"
                ) from e
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
    _unshared(result)


def _work(digest: str, payload: bytes, chunk: list[dict]) -> dict:
    fn = _MAPS.get(digest)
    if fn is None:
        import cloudpickle

        if len(_MAPS) > 8:  # maps of finished pipelines
            _MAPS.clear()
        fn = _MAPS[digest] = cloudpickle.loads(payload)
    return _shared(fn(chunk))


def _shared(batch: dict) -> dict:
    """Large arrays -> ("shm", name, shape, dtype): copied once into shared memory."""
    out = {}
    for k, v in batch.items():
        if isinstance(v, np.ndarray) and v.dtype != object and v.nbytes >= _SHARED_MIN_BYTES:
            shm = shared_memory.SharedMemory(create=True, size=v.nbytes)
            np.ndarray(v.shape, v.dtype, buffer=shm.buf)[...] = v
            out[k] = ("shm", shm.name, v.shape, v.dtype.str)
            shm.close()
        else:
            out[k] = v
    return out


def _unshared(batch: dict) -> dict:
    out = {}
    for k, v in batch.items():
        if isinstance(v, tuple) and len(v) == 4 and v[0] == "shm":
            shm = shared_memory.SharedMemory(name=v[1])
            try:
                out[k] = np.array(np.ndarray(v[2], np.dtype(v[3]), buffer=shm.buf))
            finally:
                shm.close()
                shm.unlink()
        else:
            out[k] = v
    return out
