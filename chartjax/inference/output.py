"""Where `chartjax-infer` writes: predictions.jsonl streamed in chunks, the task's own files
(InferenceSpec.output_dirs), and infer_progress.json, the record a stopped run resumes from.

Rows are appended as their batch finishes and never held. A chunk is committed after whole
batches: predictions.jsonl is flushed and fsync'd (with the task's files), then
infer_progress.json is replaced atomically with the number of inputs done and the file's size.
Whatever lies past that size (rows of an unfinished chunk, a line half written when the process
died) is cut off by `--resume` and those inputs run again, so a resumed run's files equal an
uninterrupted run's byte for byte.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil

from chartjax import output_place
from chartjax.inference.inputs import InputError

PREDICTIONS = "predictions.jsonl"
PROGRESS = "infer_progress.json"
_PROGRESS_TMP = PROGRESS + ".tmp"
# Held while a job writes in --out (chartjax/workdir_lock.py, as train.lock holds a workdir).
LOCK = "infer.lock"


# ------------------------------------------------------------------------ the output place ----


def check_writable(out: str) -> None:
    """One line naming the problem when `out` cannot be created or written in (a file in the
    way, a read-only folder), before any work; a probe file is created and removed, since
    permission bits alone do not tell (root, read-only mounts, ACLs)."""
    if os.path.isfile(out):
        raise InputError(f"--out {out} is a file, not a folder")
    why = output_place.unwritable(out)
    if why:
        raise InputError(f"--out {out}: {why}")


def prepare_out(out: str, output_dirs, overwrite: bool, resume: bool = False) -> dict | None:
    """`--out` must be new or empty, so no earlier output can sit next to the new one. With
    `overwrite`, what chartjax-infer writes there (predictions.jsonl, infer_progress.json and
    the tasks' `output_dirs`) is removed first; any other file is kept. With `resume`, the
    folder's progress record is returned (None for a new or empty folder: a fresh start)."""
    if resume and overwrite:
        raise InputError("--resume continues what --out holds and --overwrite removes it: give one")
    check_writable(out)
    ours = [PREDICTIONS, PROGRESS, *sorted(output_dirs)]
    entries = sorted(os.listdir(out)) if os.path.isdir(out) else []
    entries = [e for e in entries if e != LOCK]
    if all(_is_empty_leftover(out, e, output_dirs) for e in entries):
        # Nothing, or what a job killed before its first commit leaves (an empty
        # predictions.jsonl, empty task folders): a new run starts afresh there.
        _remove(out, [*ours, _PROGRESS_TMP])
        return None
    if resume:
        if PROGRESS not in entries:
            raise InputError(
                f"--out {out} holds no {PROGRESS}: nothing to resume there (give a new or empty "
                "folder, or --overwrite)"
            )
        return read_progress(out)
    if not overwrite:
        shown = ", ".join(entries[:5]) + (
            f" and {len(entries) - 5} more" if len(entries) > 5 else ""
        )
        again = (
            f"; --resume continues the run recorded in {PROGRESS}" if PROGRESS in entries else ""
        )
        raise InputError(
            f"--out {out} is not empty ({shown}): give a new or empty folder, or --overwrite "
            f"to replace what chartjax-infer writes there ({', '.join(ours)}; other files are "
            f"kept){again}"
        )
    _remove(out, [*ours, _PROGRESS_TMP])
    return None


def _is_empty_leftover(out: str, name: str, output_dirs) -> bool:
    path = os.path.join(out, name)
    if name == PREDICTIONS:
        return os.path.isfile(path) and os.path.getsize(path) == 0
    return name in output_dirs and os.path.isdir(path) and not os.listdir(path)


def _remove(out: str, names) -> None:
    for name in names:
        path = os.path.join(out, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)


def read_progress(out: str) -> dict:
    path = os.path.join(out, PROGRESS)
    try:
        with open(path, encoding="utf-8") as f:
            progress = json.load(f)
        for key in ("run", "inputs", "done", "rows", "bytes", "skipped", "truncated", "complete"):
            progress[key]  # noqa: B018 (a missing key is the error below)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: not a chartjax-infer progress record ({e})") from None
    return progress


def check_resume(out: str, progress: dict, run: dict, inputs: int, id_at) -> None:
    """A run resumes only with the settings and inputs it started with: any difference would
    mix two runs' rows in one file. `id_at(i)`: the id of the job's input i (the last one done
    is checked, so a changed input folder is caught)."""
    where = os.path.join(out, PROGRESS)
    differ = [
        f"--{k} {progress['run'].get(k)!r} then, {run.get(k)!r} now"
        for k in sorted(set(run) | set(progress["run"]))
        if run.get(k) != progress["run"].get(k)
    ]
    if differ:
        raise InputError(f"--resume: {where} was written with other settings: {'; '.join(differ)}")
    if progress["inputs"] != inputs:
        raise InputError(
            f"--resume: {where} counts {progress['inputs']} inputs, there are {inputs} now"
        )
    done = progress["done"]
    if done and id_at(done - 1) != progress.get("last_id"):
        raise InputError(
            f"--resume: input {done - 1} was {progress.get('last_id')!r} when {where} was "
            f"written and is {id_at(done - 1)!r} now: the inputs changed"
        )


# ------------------------------------------------------------------------ the writer ----------


class TakenPaths:
    """`used` of InferenceSpec.write_outputs, read from the disk: a path is taken when its file
    exists under --out. Memory stays flat however many rows there are, and a resumed run (its
    unfinished chunk's files removed) names files as an uninterrupted run does."""

    def __init__(self, out: str):
        self.out = out

    def __contains__(self, rel: str) -> bool:
        return os.path.lexists(os.path.join(self.out, *rel.split("/")))

    def add(self, rel: str) -> None:
        pass  # taken once its file is written, just after


class Writer:
    """Appends rows to predictions.jsonl and commits them in chunks (see the module doc).

    `progress`: the record of the run to resume (None: a fresh start in a new or empty --out).
    """

    def __init__(self, out: str, output_dirs, run: dict, inputs: int, progress: dict | None):
        self.out, self.output_dirs = out, tuple(output_dirs)
        self._created = not os.path.exists(out)
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, PREDICTIONS)
        if progress is None:
            self.state = {
                "run": run,
                "inputs": inputs,
                "done": 0,
                "rows": 0,
                "bytes": 0,
                "skipped": 0,
                "truncated": 0,
                "last_id": None,
                "complete": False,
            }
            self._f = open(path, "wb")  # noqa: SIM115 (open for the run; closed by close())
        else:
            self.state = dict(progress)
            self._f = self._reopen(path)
        self.fresh = progress is None
        self.committed = dict(self.state)
        self.commit()  # the folder is marked as a run's before the first row

    def _reopen(self, path: str):
        size, rows = self.state["bytes"], self.state["rows"]
        if not os.path.isfile(path) or os.path.getsize(path) < size:
            raise InputError(
                f"--resume: {path} is shorter than {PROGRESS} records ({size} bytes): "
                "cannot resume; start again with --overwrite"
            )
        f = open(path, "r+b")  # noqa: SIM115 (open for the run; closed by close())
        f.truncate(size)  # rows of the unfinished chunk and any partial line
        keep, n = set(), 0
        for line in f:
            n += 1
            if self.output_dirs:
                keep.update(_output_paths(json.loads(line), self.output_dirs))
        if n != rows:
            f.close()
            raise InputError(
                f"--resume: {path} holds {n} rows where {PROGRESS} records {rows}: cannot "
                "resume; start again with --overwrite"
            )
        self._remove_unfinished(keep)
        f.seek(size)
        return f

    def _remove_unfinished(self, keep: set[str]) -> None:
        """Files of the task that no committed row names (the unfinished chunk's): they would
        take the names the inputs, run again, must get."""
        for d in self.output_dirs:
            top = os.path.join(self.out, d)
            for root, dirs, files in os.walk(top, topdown=False):
                for name in files:
                    full = os.path.join(root, name)
                    if os.path.relpath(full, self.out).replace(os.sep, "/") not in keep:
                        os.remove(full)
                for name in dirs:
                    full = os.path.join(root, name)
                    if not os.listdir(full):
                        os.rmdir(full)

    def write(self, rows: list[dict], *, done: int, skipped: int, truncated: int, last_id):
        """Append the rows of finished batches; `done` etc.: the totals once they are in."""
        lines = []
        for row in rows:
            try:
                lines.append(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
            except (TypeError, ValueError) as e:
                raise ValueError(f"row {row.get('id')!r}: not JSON-serializable: {e}") from e
        self._f.write("".join(lines).encode("utf-8"))
        # One assignment after the write: an interrupt leaves the state at a batch boundary.
        self.state = {
            **self.state,
            "done": done,
            "rows": self.state["rows"] + len(rows),
            "bytes": self._f.tell(),
            "skipped": skipped,
            "truncated": truncated,
            "last_id": last_id,
        }

    @property
    def uncommitted(self) -> int:
        return self.state["done"] - self.committed["done"]

    def commit(self, complete: bool = False) -> None:
        state = {**self.state, "complete": complete}
        self._f.flush()
        os.fsync(self._f.fileno())
        if self.output_dirs:
            _sync_filesystem(self.out)
        tmp = os.path.join(self.out, _PROGRESS_TMP)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(state, indent=1) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.out, PROGRESS))
        _fsync_dir(self.out)
        self.committed = state

    def close(self) -> None:
        self._f.close()

    def discard(self) -> None:
        """Leave --out as it was found, for a fresh run that stopped before any input was
        done: there is nothing to resume, and a plain rerun must not be refused."""
        self.close()
        for name in (PREDICTIONS, PROGRESS):
            path = os.path.join(self.out, name)
            if os.path.lexists(path):
                os.remove(path)
        if self._created and not os.listdir(self.out):
            os.rmdir(self.out)


def _output_paths(row: dict, output_dirs) -> list[str]:
    """The files a row names: its string values that are paths below an output folder."""
    return [v for v in row.values() if isinstance(v, str) and v.split("/", 1)[0] in output_dirs]


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:  # some filesystems cannot sync a folder; the rename stands regardless
        pass
    finally:
        os.close(fd)


def _sync_filesystem(path: str) -> None:
    """The task's files (many small ones) reach the disk with their chunk: syncfs(2) on
    --out's filesystem where libc has it, else sync(2)."""
    try:
        syncfs = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        syncfs(fd)
    finally:
        os.close(fd)
