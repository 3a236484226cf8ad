"""One training run per workdir, and a rerun that resumes the configuration it started with.

`<workdir>/train.lock` names the run that holds the workdir (host, pid, since when). It is
taken before the run writes anything and removed when the run ends. A second run on the same
workdir is refused in one line naming the holder: two runs would log every step twice, and one
would delete the other's in-flight checkpoints. A lock whose process is gone (killed, a crashed
machine rebooted, its pid reused since) is stale: the next run takes it over with a warning.
Whether a process on another host still runs cannot be seen from here: such a lock is refused
and the message says to remove it if that run has ended. On multi-host runs the workdir is
shared: process 0 alone takes the lock, and every process stops when process 0 refuses.

A rerun whose gin config differs from the saved `config.gin` would resume checkpoints written
under other settings: it is refused, naming each differing binding, unless the caller allows
the change (chartjax-train's `--allow_config_change`); `recipe.gin_files` (how the files were
named) and `train.progress` (display only) are not compared.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator

import jax
import numpy as np

LOCK_FILE = "train.lock"
# Bindings that do not change what a run computes.
NOT_COMPARED = ("recipe.gin_files", "train.progress")


class RunRefusedError(RuntimeError):
    """The run cannot start in this workdir; the message (one line) says why."""


class WorkdirBusyError(RunRefusedError):
    """Another run holds the workdir."""


class ConfigChangedError(RunRefusedError):
    """The rerun's gin config differs from the workdir's config.gin."""


@contextlib.contextmanager
def hold(
    workdir: str,
    config_text: str,
    *,
    allow_config_change: bool,
    warn: Callable[[str], None] = logging.warning,
) -> Iterator[None]:
    """Holds the workdir for the block (process 0; every process raises if it is refused)."""
    lock = WorkdirLock(workdir)
    refusal = None
    if jax.process_index() == 0:
        try:
            lock.acquire(warn)
            check_config(workdir, config_text, allow_config_change=allow_config_change, warn=warn)
        except RunRefusedError as err:
            lock.release()
            refusal = err
    if jax.process_count() > 1:  # the others learn its answer, not wait for it in a collective
        from jax.experimental import multihost_utils

        refused = multihost_utils.broadcast_one_to_all(np.int32(refusal is not None))
        if int(refused) and refusal is None:
            refusal = RunRefusedError(f"process 0 refused to start the run in {workdir}")
    if refusal is not None:
        raise refusal
    try:
        yield
    finally:
        lock.release()


# -- the lock file --------------------------------------------------------------------------------


class WorkdirLock:
    """`name` in `workdir` (train.lock; chartjax-infer's --out takes infer.lock); `flag` is
    what the user changes to pick another folder, for the refusal's message."""

    def __init__(self, workdir: str, name: str = LOCK_FILE, flag: str = "--workdir"):
        self.path = os.path.join(workdir, name)
        self.flag = flag
        self._mine: dict | None = None

    def acquire(self, warn: Callable[[str], None] = logging.warning) -> None:
        """Creates the lock file (and the workdir); raises WorkdirBusyError when a live run
        holds it; takes over a stale one with a warning."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        me = _this_process()
        for _ in range(3):  # another starting run may take a stale lock between our looks
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                text = _read_settled(self.path)
                if text is None:  # removed since
                    continue
                holder = _parse(text)
                if holder is None or not _is_stale(holder, me):
                    raise WorkdirBusyError(_busy_message(self.path, holder, self.flag)) from None
                # Only if it is still the lock judged stale (not one a run just wrote).
                if _read(self.path) == text:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.path)
                    warn(
                        f"took over the stale lock {self.path} of {_describe(holder)}: "
                        "that process is no longer running"
                    )
                continue
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
                f.flush()
                os.fsync(f.fileno())
            self._mine = me
            return
        holder = _parse(_read(self.path) or "")
        raise WorkdirBusyError(_busy_message(self.path, holder, self.flag))

    def release(self) -> None:
        """Removes the lock file if this process wrote it (and nobody has replaced it)."""
        if self._mine is None:
            return
        if _parse(_read(self.path) or "") == self._mine:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        self._mine = None


def _this_process() -> dict:
    pid = os.getpid()
    return {
        "host": socket.gethostname(),
        "pid": pid,
        "since": datetime.datetime.now().astimezone().isoformat(sep=" ", timespec="seconds"),
        # Linux: tell a dead holder from a later process that got its pid (containers restart
        # with the same small pids) and from one of an earlier boot.
        "start_ticks": _start_ticks(pid),
        "boot_id": _boot_id(),
    }


def _is_stale(holder: dict, me: dict) -> bool:
    if holder.get("host") != me["host"]:
        return False  # cannot look at another host's processes
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 0 or pid == me["pid"]:
        return True  # our pid: an earlier process (a restarted container), not us
    if holder.get("boot_id") and me["boot_id"] and holder["boot_id"] != me["boot_id"]:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    ticks = _start_ticks(pid)
    return bool(holder.get("start_ticks") and ticks and holder["start_ticks"] != ticks)


def _busy_message(path: str, holder: dict | None, flag: str = "--workdir") -> str:
    workdir = os.path.dirname(path)
    if os.path.isdir(path):
        return f"{workdir}: its lock file {path} is a directory, not a lock file: remove it"
    if holder is None:
        return (
            f"{workdir} is in use by another run: its lock file {path} cannot be read; "
            "remove it if no run is using this workdir"
        )
    where = (
        "remove it if that run has ended"
        if holder.get("host") != socket.gethostname()
        else f"stop that run or choose another {flag}"
    )
    return f"{workdir} is in use by another run: {_describe(holder)} (lock file {path}; {where})"


def _describe(holder: dict) -> str:
    return f"pid {holder.get('pid')} on host {holder.get('host')} since {holder.get('since')}"


def _read(path: str) -> str | None:
    """The lock file's text (undecodable bytes replaced: a damaged file parses as no holder);
    a directory in its place reads as empty text, which no holder parses from."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        return ""


def _read_settled(path: str, wait_s: float = 2.0) -> str | None:
    """The lock file's text; a just-created one may not hold its JSON yet: wait for it."""
    deadline = time.monotonic() + wait_s
    text = _read(path)
    while text is not None and _parse(text) is None and time.monotonic() < deadline:
        time.sleep(0.05)
        text = _read(path)
    return text


def _parse(text: str) -> dict | None:
    try:
        holder = json.loads(text)
    except ValueError:
        return None
    return holder if isinstance(holder, dict) else None


def _start_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            # Field 22, counted after the parenthesised command name (which may hold spaces).
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


# -- the saved config ----------------------------------------------------------------------------


def check_config(
    workdir: str,
    config_text: str,
    *,
    allow_config_change: bool,
    warn: Callable[[str], None] = logging.warning,
) -> None:
    """Compares `config_text` (gin.config_str()) with `<workdir>/config.gin`, if there is one:
    a difference raises ConfigChangedError, or with `allow_config_change` is a warning."""
    path = os.path.join(workdir, "config.gin")
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        changes = config_changes(f.read(), config_text)
    if not changes:
        return
    shown = "; ".join(changes[:8]) + (
        f"; ... and {len(changes) - 8} more" if len(changes) > 8 else ""
    )
    if allow_config_change:
        warn(f"the config differs from {path} in {len(changes)} binding(s): {shown}")
        return
    raise ConfigChangedError(
        f"the config differs from {path} in {len(changes)} binding(s): {shown}. Its checkpoints "
        "were written with that config: rerun with it, or pass --allow_config_change to resume "
        "with the new one, or choose another --workdir"
    )


def config_changes(saved: str, current: str) -> list[str]:
    """`binding: saved -> current` for each binding the two gin configs set differently
    (`(unset)` where one of them does not set it), sorted by binding."""
    old, new = _bindings(saved), _bindings(current)
    out = []
    for key in sorted(set(old) | set(new)):
        if key in NOT_COMPARED or old.get(key) == new.get(key):
            continue
        out.append(f"{key}: {old.get(key, '(unset)')} -> {new.get(key, '(unset)')}")
    return out


def _bindings(text: str) -> dict[str, str]:
    """`[scope/]configurable.parameter` (or a macro's name) -> the value as gin writes it,
    read with gin's statement parser alone (the caller's gin configuration is left alone)."""
    from gin import config_parser

    from chartjax import output_place

    class Delegate(config_parser.ParserDelegate):
        def configurable_reference(self, scoped_name, evaluate):
            return _Shown(f"@{scoped_name}{'()' if evaluate else ''}")

        def macro(self, macro_name):
            return _Shown(f"%{macro_name}")

    out = {}
    for st in config_parser.ConfigParser(text, Delegate()):
        if isinstance(st, config_parser.BindingStatement):
            key = ".".join(p for p in (st.selector, st.arg_name) if p)
            value = st.value
            if output_place.is_relative_path(value):  # a config.gin saved before paths resolved
                value = os.path.abspath(value)
            out[f"{st.scope}/{key}" if st.scope else key] = repr(value)
    return out


class _Shown(str):
    """A reference or macro, shown as written (`@RNConfig()`, `%STEPS`) inside any value."""

    def __repr__(self) -> str:
        return str(self)
