"""The wheels a bare accelerator host needs to run chartjax-train / -eval / -infer (issue 25,
item 6), for the device tool's `carry` (its README: Python 3.12, x86-64 manylinux, 64 MiB with
the repository).

    python tools/gpu/wheels.py [--dest .whl]

The host's image has JAX, NumPy, Pillow, SentencePiece, protobuf, etils, absl, cloudpickle,
tensorstore, msgpack, matplotlib, scipy and the like (tools/gpu/host_packages.txt, copied from
the device tool's package list of 2026-11-17), but no TensorFlow, gin or TFDS. CARRIED lists what
the product's train / eval / infer path imports beyond that, found by running tools/gpu/checks.py
--tiny in a Python 3.12 virtual environment holding the host's packages only, adding what the
first failing import named (the versions of the environment `prepare` runs in). flax, optax and
orbax-checkpoint are carried although the host has them: their versions there are not known and
the package pins them (pyproject.toml; flax at the newest of its Python 3.12 range, HOST_RANGES). TensorFlow itself is not needed: the array_record builds
are read by tfds.data_source. The host's JAX (0.11.2 when last read) is used as it is: within
pyproject's range for Python 3.12.
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CARRIED = (
    # the product's own pins
    "gin-config",
    "flax",
    "optax",
    "orbax-checkpoint",
    "tensorboardX",
    # tfds.data_source and what tensorflow_datasets imports on the way there
    "tensorflow-datasets",
    "array-record",
    "dm-tree",
    "immutabledict",
    "promise",
    "simple-parsing",
    "docstring-parser",
    "tensorflow-metadata",
    "googleapis-common-protos",
    "termcolor",
    "toml",
    # the MatCha toy pages are drawn during training (synth/png_encode.py)
    "zlib-ng",
    # the metrics an evaluation computes
    "sacrebleu",
    "rouge-score",
    "nltk",
    "editdistance",
    "unicodeit",
)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64")
PLATFORMS += ("manylinux2014_x86_64", "manylinux1_x86_64")


# Where the host's Python and JAX need another version than this environment's: flax 0.12.8
# (Python 3.11's) fails to import on JAX 0.11 (jax.experimental.hijax lost HiPrimitive), and
# pyproject.toml's range for Python 3.12 asks for flax >= 0.12.9.
HOST_RANGES = {"flax": "flax>=0.12.9,<0.13"}


def pins(names=CARRIED) -> list[str]:
    """The requirement of each carried distribution: HOST_RANGES', else NAME==VERSION as
    installed here."""
    return [HOST_RANGES.get(n) or f"{n}=={importlib.metadata.version(n)}" for n in names]


def download(dest: str, names=CARRIED) -> list[str]:
    """Downloads the carried wheels for CPython 3.12 on x86-64 Linux into `dest` (a source-only
    release is built into a wheel here: they are pure Python), and a wheel of chartjax itself;
    returns the wheel paths."""
    os.makedirs(dest, exist_ok=True)
    pip = [sys.executable, "-m", "pip"]
    for pin in pins(names):
        binary = [*pip, "download", "--no-deps", "--only-binary=:all:", "-d", dest, "-q"]
        binary += ["--python-version", "3.12", "--implementation", "cp"]
        for plat in PLATFORMS:
            binary += ["--platform", plat]
        if subprocess.run([*binary, pin], capture_output=True).returncode:
            subprocess.run([*pip, "wheel", "--no-deps", "-q", "-w", dest, pin], check=True)
    for old in glob.glob(os.path.join(dest, "chartjax-*.whl")):
        os.remove(old)
    subprocess.run([*pip, "wheel", "--no-deps", "-q", "-w", dest, ROOT], check=True)
    return sorted(glob.glob(os.path.join(dest, "*.whl")))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dest", default=os.path.join(ROOT, ".whl"))
    args = p.parse_args(argv)
    paths = download(args.dest)
    size = sum(os.path.getsize(w) for w in paths)
    print(f"{len(paths)} wheels, {size / 2**20:.1f} MiB in {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
