"""Batch inference with a T5X, HuggingFace or chartjax checkpoint -> predictions.jsonl.

    chartjax-infer --task deplot --checkpoint ~/ckpt/deplot_v1 --vocab ~/ckpt/sentencepiece.model \
        --images charts/ --out out/deplot --max_patches 4096 --max_decode_len 512

Inputs (exactly one): `--images` files and/or folders; `--inputs` a JSONL file of rows
`{"id", "image"?, <fields>}`; `--tfds NAME[/CONFIG]:SPLIT` (with `--data_dir`). Prompts: each task's own
(chartjax/tasks/catalog.py). Preprocessing is the training pipeline's own
(chartjax/tasks/core/seq2seq.py: header rendering, Pix2Struct patches, SentencePiece), so a model
sees what it was trained on.

Outputs in `--out`:
  predictions.jsonl  one row per example: {"id", "prediction", "input" (prompt, shortened),
                     "target" (TFDS/JSONL inputs that have one)}; deplot rows add "table"
                     ({"title", "header", "rows"}, parsed by chartjax.data.tables) and
                     "table_file".
  tables/<id>.csv    deplot only: header row + rows of the parsed table (the title stays in the
                     JSONL row). An id's "/" makes subfolders; characters outside [A-Za-z0-9._-]
                     in each part become "_" (a clash gets a "~N" suffix); `table_file` gives
                     each row's path.
  classify rows: "prediction" is the checkpoint's id2label name of the highest logit and
                     "scores" the logits (one per label, in id order), e.g.
      chartjax-infer --task classify --checkpoint ~/ckpt/deberta_nli --inputs claims.jsonl \
          --template "{claim}" --pair_template "{table}" --max_input_len 1024 --out out/nli
      chartjax-infer --task classify --checkpoint ~/ckpt/tapas_tabfact --inputs claims.jsonl \
          --template "{claim}" --table_field table --out out/tapas
  figureqa rows (a FigureQA train run: `make demo`'s Relation Network, the CNN+LSTM, text-only):
                     "prediction" "yes" or "no", "scores" the (no, yes) logits and
                     "yes_probability"; inputs `{"id", "image", "question"}` (or FigureQA's
                     `question_string`), featurized as the run's evaluation was.
  infer_progress.json  how many inputs are done (and the run's settings): rows are appended to
                     predictions.jsonl as batches finish, and every `--flush_every` inputs the
                     file is fsync'd and this record updated. `--resume` continues a stopped
                     run after its last record (a partial last line and rows past it are cut
                     off, those inputs run again): the files equal an uninterrupted run's.
stdout: one JSON summary line (examples, skipped, truncated inputs, devices, processes, the
global batch, shard, inputs resumed, seconds, examples/s); stderr: a progress bar (examples/s).

Decoding is KV-cached greedy (`--beam_size 1`) or beam search (the best beam); PaliGemma also
samples (`--temperature` > 0, `--top_k`, `--top_p`, `--seed`). It is batched and data parallel
over every device (`--batch_size` is the global batch, rounded up to a multiple of the
device count); the last batch is padded (masked rows) so decoding compiles once. While the
accelerators decode one batch the host prepares the next (JAX dispatch is asynchronous).

Splitting the work: `--shard I/N` takes the I-th of N contiguous blocks of the inputs (in input
order), each job with its own `--out`; the N predictions.jsonl, concatenated in shard order,
are one run's. Multi-host (CHARTJAX_COORDINATOR etc., README "Sharding and multi-host"): every
process runs the same command, featurizes its slice of each global batch, and process 0 writes
every row into --out (the other processes need no access to it).

The model's family and size are read from the checkpoint (config.json for HF: T5, Pix2Struct,
BART with `--task text`, DeBERTa / TAPAS with `--task classify`, PaliGemma / PaliGemma 2 /
ChartGemma with an image task, its prompt the processor's prefix: its tokenizer.json, else
tokenizer.model, and processor_config.json as HF's PaliGemmaProcessor reads them; chartjax/
inference/paligemma_features.py); no gin file is needed. The
model settings (--max_patches, --max_input_len, --header_font_size, --font_path,
--max_decode_len, --beam_size, --alpha) default to the checkpoint's own: a train run's
config.gin, an HF export's preprocessor_config.json (`max_patches`), as `chartjax.load` takes
them; a flag that overrides one says so on stderr. The engine is chartjax/inference/engine.py;
this file only turns flags into its typed settings (chartjax/inference/settings.py).

Errors stop the run with a message naming the file: an unreadable image or an input a
classifier cannot encode (unless `--skip_bad`, which reports each skipped input on stderr and
counts them), a missing vocabulary, an unknown checkpoint format, or a checkpoint whose family
does not fit the task (a T5 for an image task, a Pix2Struct-family model for `text`).
"""

from __future__ import annotations

import argparse
import json
import sys

from chartjax import host_memory, quiet
from chartjax.data import loader
from chartjax.inference import settings as settings_lib
from chartjax.inference.inputs import InputError
from chartjax.tasks import catalog

DEFAULTS = settings_lib.DEFAULTS


def _shard(text: str) -> tuple[int, int]:
    i, sep, n = text.partition("/")
    try:
        i, n = int(i), int(n)
    except ValueError:
        i = n = -1
    if not sep or not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"{text!r}: expected I/N with 0 <= I < N, e.g. 0/4")
    return i, n


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="chartjax-infer",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--task",
        required=True,
        choices=sorted(catalog.INFERENCE),
        help="what to predict: its prompt, input features and post-processing",
    )
    p.add_argument("--checkpoint", required=True, help="T5X, HF or chartjax checkpoint directory")
    p.add_argument(
        "--format",
        default="auto",
        choices=["auto", "t5x", "hf", "chartjax"],
        help="checkpoint format; auto reads it from the directory's files",
    )
    p.add_argument(
        "--vocab",
        help="SentencePiece model (sentencepiece.model), or a directory of tokenizer files "
        "(BART's tokenizer.json / vocab.json + merges.txt, DeBERTa's spm.model, TAPAS's "
        "vocab.txt); default: the checkpoint's own tokenizer files, or for a train run the "
        "vocabulary its config.gin names",
    )
    p.add_argument("--images", nargs="+", help="image files and/or folders")
    p.add_argument("--inputs", help='JSONL: {"id", "image"?, <named fields>} per line')
    p.add_argument("--tfds", help="NAME[/CONFIG]:SPLIT of a built TFDS dataset")
    p.add_argument("--data_dir", default="~/tensorflow_datasets", help="TFDS data_dir of --tfds")
    p.add_argument("--header", help="literal header/prompt for every example")
    p.add_argument(
        "--template",
        help="prompt: a format string over the input fields, or one "
        f"of {sorted(catalog.templates())}",
    )
    p.add_argument(
        "--pair_template",
        help="classify: the second text of a DeBERTa text pair (a format string over the fields)",
    )
    p.add_argument(
        "--table_field",
        help="classify: the field holding a TAPAS table (linearized text or {header, rows})",
    )
    p.add_argument("--target_field", help="field/feature holding the reference (optional)")
    p.add_argument(
        "--out",
        required=True,
        help="output folder; it must be new or empty unless --overwrite",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="first remove what chartjax-infer writes in --out (predictions.jsonl, "
        "infer_progress.json, tables/); other files there are kept",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the stopped run in --out after its last complete chunk (same flags; a "
        "new or empty --out starts afresh)",
    )
    p.add_argument(
        "--shard",
        type=_shard,
        metavar="I/N",
        help="take only the I-th of N contiguous blocks of the inputs (0 <= I < N)",
    )
    p.add_argument(
        "--flush_every",
        type=int,
        default=256,
        help="fsync predictions.jsonl and record progress every N inputs (whole batches)",
    )
    p.add_argument("--batch_size", type=int, default=8, help="inputs per step, over all devices")
    own = "default: the checkpoint's own (its run's config.gin, an HF export's processor), else"
    p.add_argument(
        "--max_decode_len",
        type=int,
        help=f"generated tokens at most, per input ({own} {DEFAULTS['max_decode_len']})",
    )
    p.add_argument("--beam_size", type=int, help=f"1 = greedy decoding ({own} 1)")
    p.add_argument("--alpha", type=float, help=f"beam search length penalty ({own} 0.6)")
    p.add_argument(
        "--header_font_size",
        type=int,
        help="36 as current pix2struct and HF; the released fine-tunes were most "
        f"likely trained with 12 (docs/models.md §1.5) ({own} 36)",
    )
    p.add_argument(
        "--font_path",
        help="TrueType font for headers (the originals used Arial; default DejaVu Sans)",
    )
    p.add_argument(
        "--max_patches", type=int, help=f"Pix2Struct image patches per chart ({own} 2048)"
    )
    p.add_argument(
        "--max_input_len", type=int, help=f"input tokens of text and classify tasks ({own} 512)"
    )
    p.add_argument(
        "--temperature",
        type=float,
        help="PaliGemma: > 0 samples at this temperature (default 0: greedy, or beam search "
        "with --beam_size > 1)",
    )
    p.add_argument("--top_k", type=int, help="PaliGemma sampling: the k likeliest tokens (0: all)")
    p.add_argument("--top_p", type=float, help="PaliGemma sampling: nucleus mass (default 1)")
    p.add_argument("--seed", type=int, help="PaliGemma sampling: the random seed (default 0)")
    p.add_argument(
        "--dtype",
        default="auto",
        choices=list(settings_lib.DTYPES),
        help="activation dtype; auto = bfloat16 on GPU/TPU, float32 on CPU",
    )
    p.add_argument(
        "--skip_bad",
        action="store_true",
        help="skip (and count) unreadable images and inputs a classifier cannot encode",
    )
    quiet.add_flag(p)
    a = p.parse_args(argv)
    for name in (
        "batch_size",
        "flush_every",
        "max_decode_len",
        "beam_size",
        "max_patches",
        "max_input_len",
        "header_font_size",
    ):
        if getattr(a, name) is not None and getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    return a


def typed(args: argparse.Namespace):
    """The flags as the engine's settings objects (chartjax/inference/settings.py)."""
    s = settings_lib
    model = s.Settings.of({k: getattr(args, k) for k in s.DEFAULTS})
    prompt = s.Prompt(
        args.header, args.template, args.pair_template, args.table_field, args.target_field
    )
    inputs = s.Inputs(
        tuple(args.images) if args.images else None, args.inputs, args.tfds, args.data_dir
    )
    job = s.Job(
        args.out,
        args.overwrite,
        args.resume,
        args.shard,
        args.batch_size,
        args.flush_every,
        args.skip_bad,
    )
    return model, prompt, inputs, job


def run(args: argparse.Namespace) -> dict | None:
    from chartjax.inference import job as job_lib
    from chartjax.inference.engine import Engine

    model, prompt, inputs, job = typed(args)

    def make_engine():
        return Engine.from_checkpoint(
            args.checkpoint, task=args.task, format=args.format, vocab=args.vocab, settings=model
        )

    output_dirs = {d for spec in catalog.INFERENCE.values() for d in spec.output_dirs}
    return job_lib.run(
        catalog.inference(args.task),
        make_engine,
        {"format": args.format, "vocab": args.vocab},
        inputs,
        prompt,
        job,
        catalog.templates(),
        output_dirs,
        say_note=lambda note: print(f"chartjax-infer: {note}", file=sys.stderr, flush=True),
    )


def main(argv=None) -> None:
    args = parse_args(quiet.setup(argv))  # before anything imports TensorFlow
    host_memory.keep_freed_memory()
    try:
        summary = run(args)
    except (InputError, OSError, ValueError, loader.WorkerDied) as e:  # OSError: disk full...
        print(f"chartjax-infer: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        print(
            f"chartjax-infer: stopped by Ctrl-C; the rows committed in {args.out} are kept "
            "(--resume continues)",
            file=sys.stderr,
        )
        raise SystemExit(130) from None
    if summary is not None:  # process 0 reports
        print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
