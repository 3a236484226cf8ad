"""Recognise a checkpoint's format and load any of them (used by `chartjax-infer`).

What a path may be (checked in this order):
  t5x       a directory holding the msgpack file `checkpoint` (`checkpoint_<step>/`, or an
            official release folder such as DePlot's `v1/`); or a folder of `checkpoint_<step>/`
            subfolders, of which the highest step is taken.
  hf        `config.json` + `*.safetensors` or `pytorch_model*.bin` (which of them are read:
            chartjax/interop/hf_files.py, as HF reads them).
  chartjax  `config.json` + `params/` (`chartjax-convert --to chartjax`); or a train run's step
            folder `<workdir>/checkpoints/<step>` (model from `<workdir>/config.gin`); or a run
            workdir, of which the latest step of `checkpoints/` is taken.

`read_config` reads only the small metadata (msgpack tree, config.json, gin), so a task/model
mismatch is reported before gigabytes of weights are read.
"""

from __future__ import annotations

import dataclasses
import os
import re

from chartjax.interop import chartjax_ckpt

FORMATS = ("t5x", "hf", "chartjax")
LOOKED_FOR = (
    "t5x: a `checkpoint` msgpack file (or checkpoint_<step>/ subfolders holding one); "
    "hf: config.json + model.safetensors or pytorch_model.bin; "
    "chartjax: config.json + params/, a train run's checkpoints/<step>/ folder, or a run workdir"
)


@dataclasses.dataclass(frozen=True)
class Located:
    fmt: str  # one of FORMATS
    path: str  # the directory to load (may be a subfolder of what the user gave)
    run: bool = False  # a chartjax train-run step folder (config from gin)


def _is_t5x(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "checkpoint"))


def _is_hf(path: str) -> bool:
    if not os.path.isfile(os.path.join(path, "config.json")):
        return False
    return any(
        f.endswith(".safetensors") or re.fullmatch(r"pytorch_model(-\d+-of-\d+)?\.bin", f)
        for f in os.listdir(path)
    )


def _latest(path: str, pattern: str, ok) -> str | None:
    steps = []
    for name in os.listdir(path):
        m = re.fullmatch(pattern, name)
        if m and ok(os.path.join(path, name)):
            steps.append((int(m.group(1)), name))
    return os.path.join(path, max(steps)[1]) if steps else None


def locate(path: str, fmt: str = "auto") -> Located:
    """What `path` holds; with `fmt` given, checks that it holds that format."""
    if fmt != "auto" and fmt not in FORMATS:
        raise ValueError(
            f"unknown checkpoint format {fmt!r}; choose from auto, {', '.join(FORMATS)}"
        )
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint not found: {path}")
    if not os.path.isdir(path):
        raise ValueError(f"checkpoint {path} is a file; give its directory ({LOOKED_FOR})")
    found = []
    if _is_t5x(path):
        found.append(Located("t5x", path))
    elif (sub := _latest(path, r"checkpoint_(\d+)", _is_t5x)) is not None:
        found.append(Located("t5x", sub))
    if _is_hf(path):
        found.append(Located("hf", path))
    if chartjax_ckpt.is_params_checkpoint(path):
        found.append(Located("chartjax", path))
    elif chartjax_ckpt.is_run_checkpoint(path):
        found.append(Located("chartjax", path, run=True))
    elif (
        os.path.isdir(os.path.join(path, "checkpoints"))
        and (
            sub := _latest(
                os.path.join(path, "checkpoints"), r"(\d+)", chartjax_ckpt.is_run_checkpoint
            )
        )
        is not None
    ):
        found.append(Located("chartjax", sub, run=True))
    if fmt != "auto":
        found = [f for f in found if f.fmt == fmt]
        if not found:
            raise ValueError(f"{path} is not a {fmt} checkpoint (looked for {LOOKED_FOR})")
    if not found:
        raise ValueError(f"{path}: unknown checkpoint format (looked for {LOOKED_FOR})")
    if len(found) > 1:
        raise ValueError(
            f"{path} looks like several formats ({', '.join(f.fmt for f in found)}); pass --format"
        )
    return found[0]


def read_config(loc: Located, *, dtype: str = "float32"):
    """The model config of a located checkpoint, reading no weights."""
    if loc.fmt == "t5x":
        from chartjax.interop import t5x

        return t5x.infer_config(loc.path, dtype=dtype)
    if loc.fmt == "hf":
        from chartjax.interop import hf

        return hf.read_config(loc.path, dtype=dtype)
    cfg = chartjax_ckpt.run_config(loc.path) if loc.run else chartjax_ckpt.read_config(loc.path)
    return chartjax_ckpt.with_dtype(cfg, dtype)


def read_labels(loc: Located) -> tuple[str, ...] | None:
    """A classifier checkpoint's label names (HF `id2label`; for a train run, those of the HF
    checkpoint its model came from), or None where the checkpoint has none."""
    from chartjax.interop import hf

    if loc.fmt == "hf":
        return hf.read_labels(loc.path)
    if loc.fmt == "chartjax" and not loc.run:
        return chartjax_ckpt.read_labels(loc.path)
    src = _run_source(loc)
    if src and os.path.isfile(os.path.join(src, "config.json")):
        return hf.read_labels(src)
    return None


def run_config_file(loc: Located) -> str | None:
    """The saved gin config (`<workdir>/config.gin`) of a train run's step folder, if any."""
    if not loc.run:
        return None
    workdir = os.path.dirname(os.path.dirname(os.path.abspath(loc.path)))
    gin_file = os.path.join(workdir, chartjax_ckpt.RUN_CONFIG)
    return gin_file if os.path.isfile(gin_file) else None


def _run_source(loc: Located) -> str | None:
    """The HF checkpoint a train run took its model from (`hf_model_config.path`), if any."""
    from chartjax.interop import saved_gin

    gin_file = run_config_file(loc)
    return saved_gin.hf_source(gin_file) if gin_file else None


def tokenizer_dir(loc: Located) -> str | None:
    """Where a located checkpoint's own tokenizer files are: its directory (hf, chartjax), or
    for a train run the HF checkpoint it started from; None when there are none."""
    path = _run_source(loc) if loc.run else loc.path
    return path if path and tokenizer_files(path) else None


def run_inputs(loc: Located) -> dict:
    """What a train run's saved config.gin says about its inputs (saved_gin.input_settings:
    vocabulary, patches, task); empty for other checkpoints."""
    from chartjax.interop import saved_gin

    gin_file = run_config_file(loc)
    return saved_gin.input_settings(gin_file) if gin_file else {}


def tokenizer_source(loc: Located) -> str | None:
    """Where the tokenizer of a located checkpoint is: its own tokenizer files' directory
    (`tokenizer_dir`), else for a train run the vocabulary its config.gin names (a file or a
    directory); None when there is none. A named vocabulary that is gone is an error naming
    both files."""
    own = tokenizer_dir(loc)
    if own is not None or not loc.run:
        return own
    path = run_inputs(loc).get("vocab_file")
    if not isinstance(path, str):
        return None
    path = os.path.expanduser(path)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{run_config_file(loc)} names the vocabulary {path}, which is not found: give its "
            "path (--vocab)"
        )
    return path


def vocabulary(loc: Located) -> str | None:
    """The vocabulary chartjax reads for a located checkpoint (`chartjax-infer` without --vocab):
    `tokenizer_source`, but the SentencePiece model of a directory whose tokenizer.json is not
    BART's BPE (an HF T5 / Pix2Struct checkpoint's; chartjax.data.vocab would read any
    tokenizer.json as BPE)."""
    path = tokenizer_source(loc)
    if path is None or not os.path.isdir(path):
        return path
    tokenizer_json = os.path.join(path, "tokenizer.json")
    if os.path.isfile(tokenizer_json):
        from chartjax.interop import sentencepiece_json

        if not sentencepiece_json.is_bpe(tokenizer_json):
            for name in ("spiece.model", "sentencepiece.model"):
                if os.path.isfile(os.path.join(path, name)):
                    return os.path.join(path, name)
    return path


# The tokenizer files a checkpoint directory may carry (SentencePiece, BPE, WordPiece, HF's
# tokenizer configs; Gemma's SentencePiece model is `tokenizer.model`); `chartjax-convert` copies
# them along, `chartjax-infer` reads them.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "spm.model",
    "spiece.model",
    "sentencepiece.model",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
)


def tokenizer_files(path: str) -> list[str]:
    """The tokenizer files in checkpoint directory `path` (see TOKENIZER_FILES)."""
    if not os.path.isdir(path):
        return []
    return [os.path.join(path, f) for f in TOKENIZER_FILES if os.path.isfile(os.path.join(path, f))]


def load(loc: Located, cfg, *, seed: int = 0):
    """The model of a located checkpoint with config `cfg` (from `read_config`)."""
    if loc.fmt == "t5x":
        from chartjax.interop import t5x

        return t5x.load(loc.path, cfg, seed=seed)[0]
    if loc.fmt == "hf":
        from chartjax.interop import hf

        return hf.load(loc.path, dtype=cfg.dtype, seed=seed)[0]
    if loc.run:
        return chartjax_ckpt.load_run(loc.path, seed=seed, dtype=getattr(cfg, "dtype", None))[0]
    return chartjax_ckpt.load(loc.path, seed=seed, dtype=getattr(cfg, "dtype", None))[0]
