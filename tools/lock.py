"""`make lock`: the tested environment as exact versions, one resolve per Python and extras.

    .venv/bin/python tools/lock.py                  # requirements/*.txt and docs/environment.md
    .venv/bin/python tools/lock.py --out DIR --no-docs   # the newest resolve elsewhere

uv's `uv pip compile` is the one tool (not pip-tools): it resolves for a Python this machine does
not have (`--python-version 3.12`, markers included), where pip-compile resolves only for the
interpreter that runs it; and `uv pip sync` installs the lock in seconds. The locks hold versions
only: no hashes (the CPU torch wheel's hash is not PyPI's) and no machine-local path (uv writes
`--find-links` into a lock only when asked to; the header is ours).

torch: the `hf` extra needs the CPU build. PyPI's torch 2.13.0 is the CUDA build (with its
nvidia-* wheels), so the Python 3.11 lock pins `torch==2.13.0+cpu`, resolved from where uv finds
that wheel: `UV_FIND_LINKS` (the Makefile hands on pip's find-links, where this machine keeps
it) or, elsewhere, PyTorch's CPU index (docs/environment.md). The 3.12 lock leaves torch out (no
cp312 CPU wheel here to read its requirements from); `make install` on 3.12 installs it as pip
finds it. Also written: `requirements/system.txt`, the inputs that are not PyPI packages (Debian's
chromium, WordNet), and the generated table of docs/environment.md.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "environment.md"
TESTED, UNTESTED = "tested here", "resolved, not tested here"
# The installers, locked beside the rest: tests run pip (`pip wheel`, `pip download`).
TOOLS = ("pip", "uv")
# Left out of a lock: never-true markers drop a requirement in uv's resolve.
_DROP = "{name} ; python_version < '0'\n"
KEY = (
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "orbax-checkpoint",
    "tensorflow-cpu",
    "tensorflow-datasets",
    "apache-beam",
    "transformers",
    "torch",
    "numpy",
    "protobuf",
    "pip",
    "uv",
)
SYSTEM_PACKAGES = ("chromium", "wordnet-base", "wordnet-sense-index")
BEGIN, END = "<!-- make lock: begin -->", "<!-- make lock: end -->"


@dataclass(frozen=True)
class Lock:
    name: str
    python: str
    extras: tuple[str, ...]
    status: str
    tools: bool = False
    drop: tuple[str, ...] = ()

    @property
    def file(self) -> str:
        return f"{self.name}.txt"


LOCKS = (
    Lock("py3.11", "3.11", ("dev", "hf", "chartqapro"), TESTED, tools=True),
    Lock("py3.12", "3.12", ("dev", "hf", "chartqapro"), UNTESTED, tools=True, drop=("torch",)),
    Lock("py3.11-cuda", "3.11", ("cuda",), UNTESTED),
    Lock("py3.12-cuda", "3.12", ("cuda",), UNTESTED),
    Lock("py3.11-tpu", "3.11", ("tpu",), UNTESTED),
    Lock("py3.12-tpu", "3.12", ("tpu",), UNTESTED),
)


def header(lock: Lock) -> str:
    lines = [
        f"# chartjax {'+'.join(lock.extras)} on Python {lock.python}: {lock.status}.",
        "# Written by `make lock` (tools/lock.py) from pyproject.toml's ranges; do not edit.",
    ]
    if lock.tools:
        lines.append(
            f"# With the installers ({', '.join(TOOLS)}); `make install` syncs .venv to it."
        )
    if lock.drop:
        lines.append(f"# Left out: {', '.join(lock.drop)} (tools/lock.py says why).")
    return "\n".join(lines) + "\n"


def uv_binary() -> str:
    here = Path(sys.executable).with_name("uv")
    found = str(here) if here.exists() else shutil.which("uv")
    if not found:
        sys.exit(
            "tools/lock.py: uv not found beside this Python or on PATH (make lock installs it)"
        )
    return found


def compile_lock(lock: Lock, out: Path, tmp: Path) -> None:
    cmd = [uv_binary(), "pip", "compile", "-q", str(ROOT / "pyproject.toml")]
    cmd += [f"--extra={e}" for e in lock.extras]
    cmd += ["--python-version", lock.python, "--no-header", "-o", str(tmp / lock.file)]
    if lock.tools:
        (tmp / "tools.in").write_text("\n".join(TOOLS) + "\n")
        cmd.append(str(tmp / "tools.in"))
    if lock.drop:
        (tmp / "drop.txt").write_text("".join(_DROP.format(name=n) for n in lock.drop))
        cmd += ["--override", str(tmp / "drop.txt")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        sys.exit(f"tools/lock.py: resolving {lock.file} failed:\n{proc.stderr}")
    body = (tmp / lock.file).read_text()
    # Annotations name the inputs: the temporary files become what they stand for.
    body = body.replace(str(tmp / "tools.in"), "installers").replace(str(ROOT) + "/", "")
    pins = parse(body)
    if "hf" in lock.extras and "torch" not in lock.drop and "+cpu" not in pins.get("torch", ""):
        sys.exit(
            f"tools/lock.py: {lock.file} would pin torch {pins.get('torch')}, not the CPU build: "
            "point UV_FIND_LINKS at the torch-2.13.0+cpu wheel (docs/environment.md)"
        )
    (out / lock.file).write_text(header(lock) + body)


def parse(text: str) -> dict[str, str]:
    """name -> version of a lock's `name==version` lines (names normalized as PEP 503)."""
    pins = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9._-]+)==(\S+)", line)
        if m:
            pins[re.sub(r"[-_.]+", "-", m[1]).lower()] = m[2]
    return pins


def system_versions() -> dict[str, str]:
    """Debian versions of what `make install` takes from apt (chromium installed, WordNet's
    .debs downloaded by tools/nltk_data.py): apt's candidate, the version it would fetch now."""
    out = {}
    for name in SYSTEM_PACKAGES:
        proc = subprocess.run(["apt-cache", "policy", name], capture_output=True, text=True)
        m = re.search(r"Candidate:\s*(\S+)", proc.stdout)
        out[name] = m[1] if m and m[1] != "(none)" else "unknown (apt-get update?)"
    return out


def read_system(path: Path) -> dict[str, str]:
    rows = (
        line.split(None, 1) for line in path.read_text().splitlines() if not line.startswith("#")
    )
    return {name: version.strip() for name, version in rows}


def table(locks: dict[str, dict[str, str]], system: dict[str, str]) -> str:
    """The generated part of docs/environment.md: key versions per lock, then the apt inputs."""
    names = [lock.name for lock in LOCKS]
    rows = ["| package | " + " | ".join(f"`{n}`" for n in names) + " |"]
    rows.append("|---|" + "---|" * len(names))
    rows.append("| status | " + " | ".join(lock.status for lock in LOCKS) + " |")
    for key in KEY:
        cells = [locks[n].get(key, "") for n in names]
        if any(cells):
            rows.append(f"| {key} | " + " | ".join(cells) + " |")
    rows.append("")
    rows.append("| Debian package (apt) | version when the lock was made |")
    rows.append("|---|---|")
    rows += [f"| {name} | {version} |" for name, version in system.items()]
    return "\n".join(rows)


def write_docs(docs: Path, generated: str) -> None:
    text = docs.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    docs.write_text(f"{head}{BEGIN}\n{generated}\n{END}{tail}")


def generated_table(folder: Path) -> str:
    locks = {lock.name: parse((folder / lock.file).read_text()) for lock in LOCKS}
    return table(locks, read_system(folder / "system.txt"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "requirements")
    parser.add_argument("--no-docs", action="store_true", help="leave docs/environment.md alone")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for lock in LOCKS:
            compile_lock(lock, args.out, Path(tmp))
            print(f"{args.out / lock.file}: {lock.status}", flush=True)
    system = "".join(f"{k} {v}\n" for k, v in system_versions().items())
    (args.out / "system.txt").write_text(
        "# Debian packages make install takes from apt (unpinned: Debian replaces old builds), as"
        " installed when the lock was made.\n" + system
    )
    if not args.no_docs:
        write_docs(DOCS, generated_table(args.out))
        print(f"{DOCS}: table regenerated")


if __name__ == "__main__":
    main()
