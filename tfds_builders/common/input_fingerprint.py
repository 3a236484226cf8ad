"""A build remembers the files it was made from, and is not reused once they change.

TFDS reuses a prepared dataset whenever its folder exists (one INFO line), so a corpus that was
regenerated or edited after its build went on being read as it was. Each chartjax build writes
`input_fingerprint.json` beside its data: a digest of every file under `manual_dir` (relative
path, size, modification time), and one per top-level entry to say where a change is. A later
`tfds build` of the same version into the same data_dir compares it with the files as they are
now and refuses to reuse a build whose inputs changed, naming the option that rebuilds it.
"""

from __future__ import annotations

import hashlib
import json
import os

import tensorflow_datasets as tfds
from etils import epath

FINGERPRINT_NAME = "input_fingerprint.json"


class InputsChangedError(RuntimeError):
    """The prepared dataset was built from other files than `manual_dir` holds now."""


def fingerprint(manual_dir: str) -> dict:
    """`{"files", "bytes", "digest", "parts": {top-level entry: digest}}` of a folder's files."""
    parts: dict[str, hashlib._Hash] = {}
    files = total = 0
    root = epath.Path(manual_dir)
    stack = [root]
    while stack:  # epath, not os.walk: manual_dir may be a bucket (and TFDS's tests mock os)
        folder = stack.pop()
        for path in sorted(folder.iterdir(), reverse=True):
            if path.is_dir():
                stack.append(path)
                continue
            st = path.stat()
            rel = os.path.relpath(os.fspath(path), os.fspath(root))
            top = rel.split(os.sep, 1)[0]
            parts.setdefault(top, hashlib.sha256()).update(
                f"{rel}\0{st.length}\0{st.mtime}\n".encode()
            )
            files, total = files + 1, total + st.length
    digests = {top: h.hexdigest() for top, h in sorted(parts.items())}
    whole = hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest()
    return {"files": files, "bytes": total, "digest": whole, "parts": digests}


def changed_parts(stored: dict, now: dict) -> list[str]:
    old, new = stored.get("parts", {}), now["parts"]
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


class InputFingerprintMixin:
    """Builder mixin (first in the bases): writes the fingerprint with each build and checks it
    before TFDS reuses one (only when the build names its `manual_dir`, as `tfds build
    --manual_dir=...` does)."""

    def download_and_prepare(self, *, download_dir=None, download_config=None, **kwargs):
        config = download_config or tfds.download.DownloadConfig()
        built = epath.Path(self.data_dir) / "dataset_info.json"
        reuse = config.download_mode == tfds.download.GenerateMode.REUSE_DATASET_IF_EXISTS
        if reuse and built.exists() and config.manual_dir:
            self._check_inputs_unchanged(os.fspath(config.manual_dir))
        return super().download_and_prepare(
            download_dir=download_dir, download_config=download_config, **kwargs
        )

    def _check_inputs_unchanged(self, manual_dir: str) -> None:
        path = epath.Path(self.data_dir) / FINGERPRINT_NAME
        if not path.exists():  # a build from before fingerprints: nothing to compare
            return
        stored, now = json.loads(path.read_text()), fingerprint(manual_dir)
        if stored["digest"] == now["digest"]:
            return
        where = ", ".join(changed_parts(stored, now)) or "?"
        raise InputsChangedError(
            f"{self.data_dir} was built from other files than {manual_dir} holds now "
            f"({stored['files']} files, {stored['bytes']} bytes then; {now['files']} files, "
            f"{now['bytes']} bytes now; changed: {where}). Rebuild it with `tfds build ... "
            "--overwrite` (DownloadConfig(download_mode=tfds.download.GenerateMode."
            "REUSE_CACHE_IF_EXISTS) in Python), or build into another --data_dir."
        )

    def _download_and_prepare(self, dl_manager, download_config=None):
        manual_dir = os.fspath(dl_manager.manual_dir)
        before = fingerprint(manual_dir)
        super()._download_and_prepare(dl_manager, download_config=download_config)
        if fingerprint(manual_dir) != before:  # edited while being read: the build is unsure
            raise InputsChangedError(f"{manual_dir} changed while {self.name} was built from it")
        # data_dir is the temporary build folder here; tfds renames it with its contents.
        (epath.Path(self.data_dir) / FINGERPRINT_NAME).write_text(json.dumps(before, indent=1))
