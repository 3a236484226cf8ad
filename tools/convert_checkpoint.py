"""Convert model checkpoints between T5X, HuggingFace and chartjax.

    chartjax-convert --from t5x --to hf  gs_download/deplot_base/checkpoint_... out/deplot_hf
    chartjax-convert --from hf  --to t5x out/deplot_hf out/checkpoint_0 [--t5x_dtype bfloat16]
    chartjax-convert --from t5x --to chartjax IN_CKPT OUT_DIR

Formats:
  t5x       a `checkpoint_<step>` directory (msgpack `checkpoint` + zarr arrays); the model config
            is inferred from the shapes (chartjax.interop.t5x.infer_config).
  hf        a HuggingFace directory (`config.json` + `model.safetensors` or `pytorch_model.bin`,
            or the shards their `*.index.json` lists; every tensor must be used, so a config.json
            with fewer layers than the weights is refused) of T5, Pix2Struct, DeBERTa-v2/v3
            (`DebertaV2ForSequenceClassification`), TAPAS (`TapasForSequenceClassification`),
            BART (`BartForConditionalGeneration`) or PaliGemma / PaliGemma 2 / ChartGemma
            (`PaliGemmaForConditionalGeneration`), the family and size read from config.json. Supported: DeBERTa's relative_attention,
            position_buckets, max_relative_positions, pos_att_type (c2p, p2c), share_att_key,
            norm_rel_ebd (none, layer_norm), position_biased_input, conv_kernel_size (0 or odd);
            TAPAS's type_vocab_sizes, reset_position_index_per_cell; BART's scale_embedding,
            normalize_before (false only), activation_function; activations gelu, gelu_new,
            gelu_pytorch_tanh, relu, silu, swish, tanh. Any other value is refused, naming the
            field (the config dataclasses' from_hf_config).
  chartjax  an Orbax params checkpoint: OUT/config.json (family + model config) and OUT/params/
            (layout in chartjax/interop/chartjax_ckpt.py); as input also a train run's step
            folder `<workdir>/checkpoints/<step>`, or the workdir itself (its latest step), the
            model rebuilt from `<workdir>/config.gin`; a LoRA run's adapters are merged into
            its weights (W + alpha/rank A B), so the output is a plain model (docs/peft.md).

A classifier's label names (`id2label`) travel with it between hf and chartjax directories, and
an hf or chartjax output is a complete checkpoint: HF's `AutoTokenizer` / `Pix2StructProcessor`
and `chartjax-infer` (no --vocab) read it alone. Its tokenizer files are the input's own
(spm.model, vocab.txt, tokenizer.json, tokenizer.model, vocab.json + merges.txt, a PaliGemma's
processor_config.json, ...; for a train run those of
the HF checkpoint it started from), or, for a T5 / Pix2Struct model, the SentencePiece model of
`--vocab` or of the run's config.gin (`Features.vocab_file`), written as HF's T5 files
(spiece.model, tokenizer_config.json, special_tokens_map.json). A Pix2Struct output also gets
preprocessor_config.json: the model's patch size, `max_patches` and `is_vqa` (the prompt drawn
above the image) from the flags, else the run's config.gin (DePlot, ChartCheck and CHART-Info
6b runs are VQA), else HF's defaults (2048, false). chartjax/interop/tokenizer_export.py.

The output must be a new or empty directory, checked before the work; it is written under a
temporary name beside it and renamed when complete, so a failure (a full disk) leaves nothing.

Prints one JSON line: source, destination, family, parameter count, the tokenizer and processor
files written, and seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time

from chartjax import quiet
from chartjax.interop import tokenizer_export

# The chartjax params format lives in chartjax/interop/chartjax_ckpt.py (infer reads it too);
# the old names stay importable from here.
from chartjax.interop.chartjax_ckpt import load as load_chartjax
from chartjax.interop.chartjax_ckpt import save as save_chartjax

FORMATS = ("t5x", "hf", "chartjax")


def load_any(fmt: str, path: str):
    """(model, step) from a checkpoint of format `fmt`."""
    if fmt == "t5x":
        from chartjax.interop import t5x

        model, _, step = t5x.load(path)
        return model, step
    if fmt == "hf":
        from chartjax.interop import hf

        return hf.load(path)[0], 0
    from chartjax.interop import chartjax_ckpt, formats

    if os.path.isdir(os.path.join(path, "checkpoints")):  # a run's workdir: its latest step
        path = formats.locate(path, "chartjax").path
    if chartjax_ckpt.is_run_checkpoint(path):  # a train run's <workdir>/checkpoints/<step>
        return chartjax_ckpt.load_run(path)[0], int(os.path.basename(os.path.normpath(path)))
    return load_chartjax(path)[0], 0


def _labels_and_inputs(a) -> tuple[tuple[str, ...] | None, tokenizer_export.Inputs]:
    """A classifier's label names, and how the input checkpoint's inputs were made (its
    vocabulary and patches), the flags taking precedence."""
    from chartjax.interop import formats

    loc = formats.locate(a.input, a.src)
    labels = None if a.src == "t5x" else formats.read_labels(loc)
    own = tokenizer_export.of_checkpoint(loc, vocab=a.vocab)
    flags = {"max_patches": a.max_patches, "is_vqa": a.is_vqa}
    return labels, dataclasses.replace(own, **{k: v for k, v in flags.items() if v is not None})


def write(a, model, step: int, labels, inputs: tokenizer_export.Inputs, out: str) -> list[str]:
    """Write `model` in format `a.dst` into directory `out`, with its tokenizer and processor
    files (not for T5X, which holds none); returns their names."""
    if a.dst == "t5x":
        from chartjax.interop import t5x

        t5x.save(
            model,
            out,
            step=a.step if a.step is not None else step,
            dtype=a.t5x_dtype,
            layout=a.t5x_layout,
        )
        return []
    if a.dst == "hf":
        from chartjax.interop import hf

        hf.save(model, out, safe_serialization=not a.pytorch_bin, labels=labels)
    else:
        save_chartjax(model, out, labels=labels)
    return tokenizer_export.write(out, model.cfg, inputs, hf=a.dst == "hf")


def claim_output(out: str) -> tuple[str, str, list[str]]:
    """Check, before any work, that directory `out` can be written: it must be absent or an
    empty directory, and a directory made beside it. Returns (the destination, symbolic links
    resolved; that temporary directory, which the output is written into and then renamed to
    the destination; the parent directories made for it). Raises ValueError or OSError with a
    one-line reason."""
    out, dest = os.path.abspath(out), os.path.realpath(out)
    if os.path.isdir(dest):
        if os.listdir(dest):
            raise ValueError(f"output exists and is not empty: {out}")
    elif os.path.lexists(dest):
        raise ValueError(f"output {out} exists and is not a directory")
    parent = os.path.dirname(dest)
    made = []
    p = parent
    while not os.path.lexists(p):
        made.append(p)
        p = os.path.dirname(p)
    if not os.path.isdir(p):
        raise ValueError(f"cannot write output {out}: {p} is a file, not a directory")
    try:
        os.makedirs(parent, exist_ok=True)
        # A random name, so a killed run's leftover never blocks the next; os.mkdir (not
        # mkdtemp) keeps the umask's permissions, which the output then has.
        tmp = os.path.join(parent, f".{os.path.basename(dest)}.{os.urandom(4).hex()}.partial")
        os.mkdir(tmp)
    except OSError as e:
        _remove_dirs(made)
        where = os.path.dirname(e.filename) if e.filename else parent
        raise OSError(
            f"cannot write output {out}: cannot create a directory in {where} ({e.strerror or e})"
        ) from None
    return dest, tmp, made


def _remove_dirs(made: list[str]) -> None:
    for d in made:  # deepest first; only the ones still empty
        try:
            os.rmdir(d)
        except OSError:
            break


def _yes_no(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected true or false")
    return text.lower() == "true"


def _fail(msg) -> None:
    print(f"chartjax-convert: {msg}", file=sys.stderr)
    sys.exit(1)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--from", dest="src", choices=FORMATS, required=True, help="input format")
    p.add_argument("--to", dest="dst", choices=FORMATS, required=True, help="output format")
    p.add_argument("input", help="the checkpoint to convert (see Formats above)")
    p.add_argument("output", help="a new or empty directory")
    p.add_argument(
        "--t5x_dtype",
        default="float32",
        choices=["float32", "bfloat16"],
        help="stored dtype when writing T5X",
    )
    p.add_argument(
        "--t5x_layout",
        default="kvstore",
        choices=["kvstore", "top_level", "inline"],
        help="how a T5X output stores arrays: zarr with the path in kvstore (as t5x writes "
        "today), zarr with a top-level path (older t5x), or inline in the msgpack file",
    )
    p.add_argument(
        "--step",
        type=int,
        default=None,
        help="step recorded in a T5X output (default: the input's T5X step, else 0)",
    )
    p.add_argument("--pytorch_bin", action="store_true", help="HF output as pytorch_model.bin")
    p.add_argument(
        "--vocab",
        help="the tokenizer an hf / chartjax output carries: a SentencePiece model or a "
        "directory of tokenizer files (default: the input's own, or the vocabulary its run's "
        "config.gin names; a T5X input has none)",
    )
    p.add_argument(
        "--max_patches",
        type=int,
        help="Pix2Struct: max_patches of the output's preprocessor_config.json (default: the "
        "run's Features.max_patches, else 2048)",
    )
    p.add_argument(
        "--is_vqa",
        type=_yes_no,
        metavar="{true,false}",
        help="Pix2Struct: whether the prompt is rendered above the image (DePlot, ChartQA, "
        "ChartCheck's MatCha: true; captioning: false; default: from the run's task, else false)",
    )
    quiet.add_flag(p)
    a = p.parse_args(quiet.setup(argv))  # before anything imports TensorFlow
    if not os.path.exists(a.input):
        p.error(f"input not found: {a.input}")
    if a.vocab is not None and not os.path.exists(a.vocab):
        p.error(f"--vocab not found: {a.vocab}")
    if a.max_patches is not None and a.max_patches < 1:
        p.error("--max_patches must be >= 1")
    try:
        dest, tmp, made = claim_output(a.output)  # before the work, which may take minutes
    except (OSError, ValueError) as e:
        _fail(e)
    t0 = time.time()
    done = False
    try:
        try:
            model, step = load_any(a.src, a.input)
            labels, inputs = _labels_and_inputs(a)
        except (OSError, ValueError) as e:
            _fail(e)
        if a.dst == "t5x" and type(model).__name__ not in ("T5Transformer", "Pix2Struct"):
            _fail(f"T5X checkpoints hold T5 / Pix2Struct models, not {type(model).__name__}")
        try:
            files = write(a, model, step, labels, inputs, tmp)
            os.rename(tmp, dest)  # the output appears whole or not at all
        except OSError as e:
            _fail(f"cannot write {a.output}: {e}")
        except ValueError as e:  # a model the output format cannot hold
            _fail(e)
        done = True
    finally:
        if not done:
            shutil.rmtree(tmp, ignore_errors=True)
            _remove_dirs(made)
    if a.dst != "t5x" and inputs.vocab is None:
        print(
            f"chartjax-convert: {a.input} names no vocabulary, so {a.output} holds no "
            "tokenizer files: give --vocab (a SentencePiece model or a tokenizer directory)",
            file=sys.stderr,
        )
    import jax
    from flax import nnx

    n = sum(int(x.size) for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    print(
        json.dumps(
            {
                "from": a.src,
                "to": a.dst,
                "input": a.input,
                "output": a.output,
                "family": type(model).__name__,
                "params": n,
                "files": files,
                "seconds": round(time.time() - t0, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
