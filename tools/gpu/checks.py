"""The GPU checks, run through the product (issue 25, item 6): each check is a list of
`chartjax-train` / `chartjax-eval` runs of the package's recipes, prepared HERE (a full
chartjax environment: the corpora are built with `tfds build`, which needs TensorFlow) and run
THERE, on a bare accelerator host that has JAX but neither TensorFlow nor gin, as one command.

    python tools/gpu/checks.py prepare CHECK      # here: corpora, vocabulary, wheels, command
    python3 tools/gpu/checks.py run CHECK --out $OUT/CHECK     # there (what prepare prints)
    python tools/gpu/checks.py score CHECK --result FETCHED/CHECK  # here, the reading checks

`prepare` writes the check's data under `runs/gpu/CHECK/` and the wheels the host lacks under
`.whl/` (tools/gpu/wheels.py: chartjax itself, gin-config, tensorflow-datasets and the pure-Python
libraries pinned here), then prints the device tool's call: the command, which installs the
wheels into /tmp/site and runs this file's `run`, and its `carry` list. `run` needs only the
standard library and the installed package: each step is `python -m chartjax.tools.train` (or
`.evaluate`) in a child process, its output in `<out>/log.txt`; then one `<out>/result.json`
with every run's logged training metrics (loss, examples/s, TFLOP/s, MFU, peak device memory)
and evaluation metrics. `--tiny` shrinks every model and step count to a CPU smoke size (the
test, tests/tools/test_gpu_checks.py, runs it with TensorFlow made unimportable).

Checked without a GPU (2026-12-03): every check's `--tiny` run passed in a Python 3.12.1
virtual environment holding only packages of the host's list (jax/jaxlib 0.11.2 from PyPI, NumPy,
Pillow, SentencePiece, protobuf, pyarrow, etils, scipy, matplotlib, ...; no TensorFlow, gin or
TFDS) plus the carried wheels, with JAX_PLATFORMS=cpu; that is how wheels.py's list was found.
`prepare reading` at full size carries 58.8 MiB, `figureqa` about 54 MiB, `memory_*` 18.4 MiB.

Checks (none has run on a GPU yet: no device was lent to the sessions that wrote them, and the
step counts are guesses at what fits one 10-minute call):
* `figureqa`: `make demo`'s two runs (tasks/figureqa_demo_rn.gin, figureqa_demo_text_only.gin)
  on the demo's corpus, without its 10-minute cap: the RN must beat text-only on validation1.
* `reading` (issue 28, item 4): the toy MatCha curriculum at a GPU size: stage 1 reads
  rendered text (tasks/matcha_reading_toy.gin), stage 2 reads tables off charts from stage 1's
  checkpoint (tasks/matcha_chart_table_toy.gin), then `chartjax-eval` on held-out charts
  (1,800 + 200 charts: what the 64 MiB upload carries besides the wheels). The
  CPU version, with the constant baseline and its CI, is tools/bench/benches.py's `reading`.
* `reading_lattice` (issue 28): the CPU bench's lattice run (`--text_grid 32`: labels on the
  patch grid; tasks/chart_table_lattice_toy.gin from scratch) at 4x its width for 400 s, then
  the held-out charts (1,800 + 200). On the CPU it reads
  values after 3,000 steps but row labels only 17% of the time: how far does a GPU take it?
* `chartqa` (issue 41, item 7): the CPU bench `chartqa_learning`'s two runs (chart -> table on
  the build's charts, then ChartQA fine-tuning from it: tasks/chartqa_lattice_toy.gin, questions
  rendered as headers above lattice charts) at the reading checks' GPU width for 180 s each, on
  1,600 + 50 + 200 charts with 6 questions each; then `chartjax-eval` on the test charts.
  `score` sets its relaxed accuracy against the bench's constant and question-only answers
  (`baselines.json`, computed here), interval against interval.
* The reading checks bring their held-out predictions back; `score` sets them against the
  constant tables `prepare` chose on the training tables (`baselines.json`), with the bench's
  metrics and CIs: RMS F1 without the title row, number cells read exactly.
* `memory_base`, `memory_large` (issue 29, item 5): Pix2Struct-base at 2,048 patches and -large at 4,096 on the
  synthetic patch task (tasks/pix2struct_synthetic_smoke.gin, no corpus), bf16, under each
  rematerialization policy at the batch XLA:CPU's memory analysis fits in 139 GB
  (docs/memory.md): the train log's MFU and peak device memory. Packing is left out: it
  applies to the text rows and, for patches, measured slower (docs/packing.md).
* `paligemma2_lora`, `paligemma2_28b` (issue 42, item 6): PaliGemma 2 LoRA training on the
  synthetic prefix-LM task (tasks/paligemma_synthetic_smoke.gin, no corpus; random weights, as
  only speed and memory are read): 3B at 448 with LoRA over a float32 base and over an int8 one
  (peft/lora_paligemma_int8.gin), then the 28B at 448 over an int8 base, which must fit one
  80 GB card (docs/peft.md §6): 30 steps each, the train log's MFU and peak device memory.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# One device call is 600 s, the wheels' install included: the runs share what is left.
RUN_BUDGET_S = 540
# Checks whose runs depend on the one before (a failure ends the check); elsewhere a failed
# run (an out-of-memory batch, say) is a result and the next one runs.
CHAINED = ("reading", "reading_lattice", "chartqa")
READING = ("reading", "reading_lattice")  # scored against constant tables (`score`)
SCORED = (*READING, "chartqa")

# The demo's corpus settings (chartjax.tools.demo).
FIGUREQA_TRAIN, FIGUREQA_VAL = 2000, 250
# Charts of the reading check: tools/bench/benches.py's `reading`'s corpus, more of them.
READING_CORPUS = {
    "types": ["Grouped vertical bar"],
    "size": (480, 360),
    "max_categories": 3,
    "max_topics": 4,
    "max_series": 1,
    "value_labels": 16,
}
# ~21.6 KB a chart built: 2,000 charts, the wheels (~16 MB) and the checkout fit the 64 MiB.
READING_TRAIN, READING_HELDOUT, READING_VOCAB = 1800, 200, 1000
# The lattice charts of tools/bench/benches.py's `reading`'s `--text_grid 32` run (docs/pretraining.md): the
# labels on Pix2Struct's patch grid at 256 patches.
READING_LATTICE_CORPUS = {**READING_CORPUS, "size": (576, 416), "value_labels": 20, "text_grid": 32}
READING_LATTICE_TRAIN = 1800
# The CPU bench `chartqa_learning`'s charts and questions (tools/bench/benches.py), 6 questions
# a chart (each kind in both wordings) instead of 4: more questions, not more charts, fit the
# upload (~23 KB a chart built: ~42 MB; the call carries ~60 MiB with the wheels and checkout).
CHARTQA_CORPUS = {
    "kinds": ("retrieval", "max", "min"),
    "types": ("Grouped vertical bar",),
    "size": (576, 416),
    "max_categories": 3,
    "max_topics": 4,
    "max_series": 1,
    "value_labels": 20,
    "text_grid": 32,
    "tick_size": 20,
    "questions": 3,
}
CHARTQA_CHARTS = {"train_charts": 1600, "val_charts": 50, "test_charts": 200}
# Its stage 1 (chart -> table) bindings, the bench's own (tools/bench/benches.py).
CHARTQA_TABLE = (
    "deplot_task.source = 'chartqa'",
    "deplot_task.train_split = 'train'",
    "deplot_task.eval_splits = ('validation',)",
    "Features.max_target_len = 64",
    "Decoding.max_decode_len = 64",
)
BASELINES = "baselines.json"  # the constant tables / answers the scored checks are set against
CARRY_LIMIT = 64 * 2**20
# Pix2Struct patches at patch_size 16: 2 + 16*16*3.
PATCH_DIM = 770


def _figureqa(tiny: bool) -> list[dict]:
    data = ["DATA_DIR = '{data}/tfds'", "train.progress = False"]
    steps = ["train.num_train_steps = 2", "schedule.total_steps = 2"] if tiny else []
    return [
        {
            "name": name,
            "tool": "train",
            "gin_file": [f"tasks/figureqa_demo_{name}.gin"],
            "bindings": [*data, "train.max_train_time_s = None", *steps],
        }
        for name in ("rn", "text_only")
    ]


# The reading checks' Pix2Struct: a CPU smoke size, and a guess at what learns in a few GPU
# minutes (4x the CPU bench's width).
READING_TINY_MODEL = [
    "Pix2StructConfig.emb_dim = 32",
    "Pix2StructConfig.mlp_dim = 64",
    "Pix2StructConfig.num_heads = 2",
    "Pix2StructConfig.head_dim = 16",
    "Pix2StructConfig.num_encoder_layers = 1",
    "Pix2StructConfig.num_decoder_layers = 1",
]
READING_GPU_MODEL = [
    "Pix2StructConfig.emb_dim = 512",
    "Pix2StructConfig.mlp_dim = 1024",
    "Pix2StructConfig.num_heads = 8",
    "Pix2StructConfig.head_dim = 64",
    "Pix2StructConfig.num_encoder_layers = 4",
    "Pix2StructConfig.num_decoder_layers = 4",
    "Pix2StructConfig.dtype = 'bfloat16'",
]


def _reading(tiny: bool) -> list[dict]:
    size = (
        READING_TINY_MODEL + ["Features.max_patches = 64", "matcha_task.eval_examples = 4"]
        if tiny
        else [
            *READING_GPU_MODEL,
            "Features.max_patches = 1024",
            "train.global_batch_size = 64",
            "schedule.peak = 0.003",
        ]
    )
    steps1, steps2 = (2, 2) if tiny else (3000, 3000)
    every = 2 if tiny else 1000
    common = [
        "VOCAB = '{data}/vocab/spm.model'",
        "Pix2StructConfig.vocab_size = {vocab_size}",
        *size,
        f"train.eval_every = {every}",
        f"train.checkpoint_every = {every}",
        "train.progress = False",
        # two stages, start-ups and the held-out evaluation in one 10-minute call
        "train.max_train_time_s = 180" if not tiny else "train.max_train_time_s = None",
    ]
    return [
        {
            "name": "stage1",
            "tool": "train",
            "gin_file": ["tasks/matcha_reading_toy.gin"],
            "bindings": [
                *common,
                "DATA_DIR = '{data}/tfds_train'",
                f"train.num_train_steps = {steps1}",
            ],
        },
        {
            "name": "stage2",
            "tool": "train",
            "gin_file": ["tasks/matcha_chart_table_toy.gin"],
            "bindings": [
                *common,
                "DATA_DIR = '{data}/tfds_train'",
                "INIT_PATH = '{stage1_checkpoint}'",
                f"train.num_train_steps = {steps2}",
                # all of the training build; the held-out build is scored next
                "deplot_task.train_split = 'train'",
                "train.eval_every = 0",
                "train.final_eval = False",
            ],
        },
        {  # the held-out charts, scored with the run's own settings (its config.gin)
            "name": "stage2",
            "tool": "evaluate",
            "gin_file": [],
            "bindings": ["DATA_DIR = '{data}/tfds_heldout'"],
            "split": "train",
        },
    ]


def _reading_lattice(tiny: bool) -> list[dict]:
    """The lattice run from scratch (tasks/chart_table_lattice_toy.gin: no stage 1), 4x the CPU
    bench's width at its 256 patches (the lattice needs that resize), then the held-out charts.
    How far past the CPU's 3,000 steps does the reading go, the row labels' 17% included?"""
    size = (
        READING_TINY_MODEL + ["train.num_train_steps = 2", "train.max_train_time_s = None"]
        if tiny
        else [
            *READING_GPU_MODEL,
            "train.global_batch_size = 64",
            "schedule.peak = 0.003",
            "train.num_train_steps = 20000",  # a bound: the time limit ends it first
            "train.max_train_time_s = 400",
        ]
    )
    return [
        {
            "name": "lattice",
            "tool": "train",
            "gin_file": ["tasks/chart_table_lattice_toy.gin"],
            "bindings": [
                "VOCAB = '{data}/vocab/spm.model'",
                "DATA_DIR = '{data}/tfds_train'",
                "Pix2StructConfig.vocab_size = {vocab_size}",
                *size,
                "deplot_task.train_split = 'train'",
                "train.eval_every = 0",
                "train.final_eval = False",
                "train.progress = False",
            ],
        },
        {
            "name": "lattice",
            "tool": "evaluate",
            "gin_file": [],
            "bindings": ["DATA_DIR = '{data}/tfds_heldout'"],
            "split": "train",
        },
    ]


def _chartqa(tiny: bool) -> list[dict]:
    """The CPU bench `chartqa_learning`'s two runs at the reading checks' GPU width, 180 s each:
    chart -> table on the build's charts (tasks/chart_table_lattice_toy.gin, the bench's
    bindings), then ChartQA fine-tuning from it (tasks/chartqa_lattice_toy.gin, its 276-patch
    geometry kept); then the test charts."""
    from_bench = [b for b in CHARTQA_TABLE if not b.startswith("train.")]
    size = (
        READING_TINY_MODEL + ["train.num_train_steps = 2", "train.max_train_time_s = None"]
        if tiny
        else [
            *READING_GPU_MODEL,
            "train.global_batch_size = 64",
            "schedule.peak = 0.003",
            "train.num_train_steps = 20000",  # a bound: the time limit ends it first
            "train.max_train_time_s = 180",
        ]
    )
    common = ["VOCAB = '{data}/vocab/spm.model'", "DATA_DIR = '{data}/tfds'"]
    common += ["Pix2StructConfig.vocab_size = {vocab_size}", *size, "train.progress = False"]
    every = ["train.eval_every = 0", "train.final_eval = False"]
    every += [f"train.checkpoint_every = {2 if tiny else 1000}"]
    return [
        {
            "name": "stage1",
            "tool": "train",
            "gin_file": ["tasks/chart_table_lattice_toy.gin"],
            "bindings": [*common, *from_bench, *every],
        },
        {
            "name": "chartqa",
            "tool": "train",
            "gin_file": ["tasks/chartqa_lattice_toy.gin"],
            "bindings": [*common, "INIT_PATH = '{stage1_checkpoint}'", *every],
        },
        {"name": "chartqa", "tool": "evaluate", "gin_file": [], "bindings": [], "split": "test"},
    ]


# (size file, patches, {remat policy: batch}); batches: the largest that XLA:CPU's compiled
# memory analysis fits in 139 GB (the runner's `memory` bench, docs/memory.md).
MEMORY_ROWS = (
    ("sizes/pix2struct_base.gin", 2048, {"none": 12, "dots_saveable": 24, "full": 62}),
    ("sizes/pix2struct_large.gin", 4096, {"none": 1, "dots_saveable": 2, "full": 7}),
)


VOCAB_OWNERS = ("Pix2StructConfig", "synthetic_seq2seq_task")  # Pix2Struct-base's 50,244


def _memory(tiny: bool, rows=MEMORY_ROWS) -> list[dict]:
    out = []
    for size, patches, batches in rows:
        for policy, batch in batches.items():
            name = f"{os.path.basename(size)[:-4]}_{policy}"
            shape = [
                "Pix2StructConfig.patch_size = 16",
                f"Pix2StructConfig.max_position_embeddings = {4096 if not tiny else 64}",
                "Pix2StructConfig.dtype = 'bfloat16'",
                f"Pix2StructConfig.remat_policy = '{policy}'",
                f"synthetic_seq2seq_task.patch_dim = {PATCH_DIM}",
                f"synthetic_seq2seq_task.input_len = {patches if not tiny else 16}",
                f"synthetic_seq2seq_task.target_len = {128 if not tiny else 4}",
                *([] if tiny else [f"{k}.vocab_size = 50244" for k in VOCAB_OWNERS]),
            ]
            run = [
                f"train.global_batch_size = {batch if not tiny else 2}",
                f"train.num_train_steps = {30 if not tiny else 2}",
                f"train.log_every = {10 if not tiny else 1}",
                "train.checkpoint_every = 1000000",  # no checkpoint: speed and memory only
                "train.final_eval = False",
                "train.progress = False",
            ]
            out.append(
                {
                    "name": name,
                    "tool": "train",
                    "gin_file": ["tasks/pix2struct_synthetic_smoke.gin", *([] if tiny else [size])],
                    "bindings": shape + run,
                }
            )
    return out


# PaliGemma 2 LoRA training (issue 42, item 6) on the synthetic prefix-LM task (no corpus):
# (run, size, image side, peft file, remat policy, batch), ChartQA's 48 + 48 text tokens. The
# batches are guesses from the CPU-compiled memory estimates (docs/memory.md, docs/peft.md §6)
# for an 80 GB card. The train log gives MFU (counted as 3x the forward pass, full fine-tuning's
# convention: LoRA computes no weight gradient, about 2x) and peak device memory.
LORA, LORA_INT8 = "peft/lora_paligemma.gin", "peft/lora_paligemma_int8.gin"
NO_BATCH_DOTS = "dots_with_no_batch_dims_saveable"
PALIGEMMA2_3B = (
    ("3b_448_lora", "3b", 448, LORA, NO_BATCH_DOTS, 8),
    ("3b_448_lora_int8", "3b", 448, LORA_INT8, NO_BATCH_DOTS, 8),
)
# The goal: the 28B fine-tunes with LoRA on one 80 GB GPU over its int8 base.
PALIGEMMA2_28B = (("28b_448_lora_int8", "28b", 448, LORA_INT8, "full", 2),)


def _paligemma2(tiny: bool, rows=PALIGEMMA2_3B) -> list[dict]:
    out = []
    for name, size, side, peft, policy, batch in rows:
        out.append(
            {
                "name": name,
                "tool": "train",
                "gin_file": [
                    "tasks/paligemma_synthetic_smoke.gin",
                    *([] if tiny else [f"sizes/paligemma2_{size}.gin"]),
                    peft,
                ],
                "bindings": [
                    f"IMAGE_SIZE = {16 if tiny else side}",  # the tiny model's 16 x 16
                    f"PaliGemmaConfig.remat_policy = '{policy}'",
                    "synthetic_prefix_lm_task.prefix_len = 48",
                    "synthetic_prefix_lm_task.target_len = 48",
                    f"train.global_batch_size = {2 if tiny else batch}",
                    f"train.num_train_steps = {2 if tiny else 30}",
                    f"train.log_every = {1 if tiny else 10}",
                    "train.checkpoint_every = 1000000",  # no checkpoint: speed and memory only
                    "train.final_eval = False",
                    "train.progress = False",
                ],
                # JAX takes 75% of the card by default; the 28B needs more of its 80 GB.
                "env": {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.95"},
            }
        )
    return out


CHECKS = {
    "figureqa": _figureqa,
    "reading": _reading,
    "reading_lattice": _reading_lattice,
    "chartqa": _chartqa,
    # a call each: three compilations of a base or large train step take minutes
    "memory_base": lambda tiny: _memory(tiny, MEMORY_ROWS[:1]),
    "memory_large": lambda tiny: _memory(tiny, MEMORY_ROWS[1:]),
    "paligemma2_lora": _paligemma2,
    "paligemma2_28b": lambda tiny: _paligemma2(tiny, PALIGEMMA2_28B),
}


def latest_checkpoint(workdir: str) -> str:
    """The newest step folder of a finished stage, by name. Not chartjax.checkpoint.latest_step:
    Orbax asks JAX for the process index, and JAX in this parent process would take GPU memory
    from the training child."""
    root = os.path.join(workdir, "checkpoints")
    steps_ = [int(d) for d in os.listdir(root) if d.isdigit()] if os.path.isdir(root) else []
    return os.path.join(root, str(max(steps_))) if steps_ else ""


def vocab_size(data: str) -> str:
    """The pieces of the check's SentencePiece vocabulary (its .vocab file, a line each)."""
    path = os.path.join(data, "vocab", "spm.vocab")
    if not os.path.exists(path):
        return "{vocab_size}"  # a check without one never reads it
    with open(path, encoding="utf-8") as f:
        return str(sum(1 for _ in f))


def steps(check: str, tiny: bool, data: str) -> list[dict]:
    """The check's runs, with {data} and {vocab_size} filled in ({stage1_checkpoint} is read
    when the step starts: the stage before it must have run)."""
    fill = {"{data}": data, "{vocab_size}": vocab_size(data)}

    def bind(b):
        for k, v in fill.items():
            b = b.replace(k, v)
        return b

    return [{**s, "bindings": [bind(b) for b in s["bindings"]]} for s in CHECKS[check](tiny)]


def argv(step: dict, work: str) -> list[str]:
    module = {"train": "chartjax.tools.train", "evaluate": "chartjax.tools.evaluate"}[step["tool"]]
    cmd = [sys.executable, "-m", module, f"--workdir={os.path.join(work, step['name'])}"]
    cmd += [f"--gin_file={f}" for f in step["gin_file"]]
    cmd += [f"--split={step['split']}"] if "split" in step else []
    return cmd + [f"--gin_bindings={b}" for b in step["bindings"]]


# ------------------------------------------------------------------ there -----------------


def _read_jsonl(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _eval_metrics(workdir: str) -> dict:
    """eval/<split>/step_<N>/metrics.json of a workdir: {split: {step: metrics}}."""
    out = {}
    root = os.path.join(workdir, "eval")
    for split in sorted(os.listdir(root)) if os.path.isdir(root) else ():
        for d in sorted(os.listdir(os.path.join(root, split))):
            path = os.path.join(root, split, d, "metrics.json")
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    out.setdefault(split, {})[d] = json.load(f)
    return out


def run(check: str, data: str, out: str, tiny: bool, work: str | None = None, only=None) -> dict:
    """Runs the check's steps in order (`only`: those of these names; a failed step ends the
    check) and writes `<out>/result.json` and `<out>/log.txt`."""
    os.makedirs(out, exist_ok=True)
    work = work or os.path.join("/tmp", f"chartjax_gpu_{check}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    result = {"check": check, "tiny": tiny, "runs": []}
    deadline = time.time() + RUN_BUDGET_S
    with open(os.path.join(out, "log.txt"), "w", encoding="utf-8") as log:
        for step in steps(check, tiny, os.path.abspath(data)):
            if only and step["name"] not in only:
                continue
            ckpt = latest_checkpoint(os.path.join(work, "stage1"))
            step["bindings"] = [b.replace("{stage1_checkpoint}", ckpt) for b in step["bindings"]]
            cmd = argv(step, work)
            log.write("\n$ " + " ".join(cmd) + "\n")
            log.flush()
            t0 = time.time()
            try:
                # Run in `work`, not the checkout: the installed chartjax (with chartjax.tools)
                # must come first, not the checkout's chartjax/ folder.
                rc = subprocess.run(
                    cmd,
                    cwd=work,
                    env={**os.environ, **step.get("env", {})},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=max(deadline - t0, 1),
                ).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
            workdir = os.path.join(work, step["name"])
            row = {"name": step["name"], "tool": step["tool"], "rc": rc}
            row["wall_s"] = round(time.time() - t0, 1)
            row["train_metrics"] = _read_jsonl(os.path.join(workdir, "train_metrics.jsonl"))
            row["eval"] = _eval_metrics(workdir)
            if step["tool"] == "evaluate":  # its predictions come back for `score`
                shutil.copytree(
                    os.path.join(workdir, "eval"),
                    os.path.join(out, step["name"], "eval"),
                    dirs_exist_ok=True,
                )
            result["runs"].append(row)
            print(json.dumps({k: row[k] for k in ("name", "tool", "rc", "wall_s")}), flush=True)
            if rc != 0 and (check in CHAINED or rc == "timeout"):
                break
    result["ok"] = all(r["rc"] == 0 for r in result["runs"])
    with open(os.path.join(out, "result.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return result


# ------------------------------------------------------------------ here ------------------


def prepare_data(check: str, data: str, tiny: bool) -> None:
    """Builds the check's corpora (and vocabulary) under `data` with the package's generators
    and TFDS builders; needs the full environment."""
    from chartjax.tools import demo
    from chartjax.tools.bench import baselines, corpora

    if check == "figureqa":
        n_train, n_val = (20, 10) if tiny else (FIGUREQA_TRAIN, FIGUREQA_VAL)
        stamp = {"name": demo.CORPUS_NAME, "train_images": n_train, "val_images": n_val}
        generate = dict(
            train_images=n_train,
            val_images=n_val,
            test_images=0,
            seed=0,
            workers=2,
            overwrite=True,
            options=demo.CORPUS,
        )
        corpora.figureqa_stamped(
            os.path.join(data, "raw"),
            os.path.join(data, "tfds"),
            os.path.join(data, "corpus.json"),
            {**stamp, "seed": 0, **demo.CORPUS},
            generate,
            log=print,
        )
        shutil.rmtree(os.path.join(data, "raw"), ignore_errors=True)  # not carried
    elif check in READING:
        lattice = check == "reading_lattice"
        n_train = READING_LATTICE_TRAIN if lattice else READING_TRAIN
        n_train, n_held = (8, 4) if tiny else (n_train, READING_HELDOUT)
        corpus = READING_LATTICE_CORPUS if lattice else READING_CORPUS
        for split, num, seed in (("train", n_train, 1), ("heldout", n_held, 2)):
            raw = os.path.join(data, f"raw_{split}")
            corpora.chart_info(
                raw, os.path.join(data, f"tfds_{split}"), num, seed, workers=2, **corpus
            )
        raw_train = os.path.join(data, "raw_train")
        # the lattice recipe's vocabulary: one piece per digit (chartjax-train-vocab --split_digits)
        baselines.train_vocab(raw_train, os.path.join(data, "vocab", "spm"), READING_VOCAB, lattice)
        write_baselines(raw_train, os.path.join(data, "raw_heldout"), os.path.join(data, BASELINES))
        for split in ("train", "heldout"):
            shutil.rmtree(os.path.join(data, f"raw_{split}"), ignore_errors=True)
    elif check == "chartqa":
        prepare_chartqa(data, tiny)


def prepare_chartqa(data: str, tiny: bool) -> dict:
    """The ChartQA check's build (`tfds build tfds_builders/chartqa`), its vocabulary (the
    training tables, one piece per digit) and `baselines.json` (the bench's constant and
    question-only answers, tools/bench/baselines.chartqa_answers); the raw charts are dropped."""
    import glob as glob_

    from chartjax.synth import chartqa
    from chartjax.tools import train_vocab
    from chartjax.tools.bench import baselines

    raw = os.path.join(data, "raw")
    charts = {"train_charts": 8, "val_charts": 2, "test_charts": 4} if tiny else CHARTQA_CHARTS
    chartqa.generate(raw, seed=1, workers=2, overwrite=True, **charts, **CHARTQA_CORPUS)
    tfds_cli = os.path.join(os.path.dirname(sys.executable), "tfds")
    build = [tfds_cli, "build", "tfds_builders/chartqa", f"--manual_dir={raw}"]
    subprocess.run([*build, f"--data_dir={os.path.join(data, 'tfds')}"], check=True, cwd=ROOT)
    texts = []
    for path in sorted(glob_.glob(os.path.join(raw, "train", "tables", "*.csv"))):
        with open(path, encoding="utf-8") as f:
            texts.append(f.read())
    os.makedirs(os.path.join(data, "vocab"), exist_ok=True)
    train_vocab.train(
        texts,
        os.path.join(data, "vocab", "spm"),
        vocab_size=READING_VOCAB,
        hard_vocab_limit=False,
        split_digits=True,
    )
    answers = baselines.chartqa_answers(data)
    with open(os.path.join(data, BASELINES), "w", encoding="utf-8") as f:
        json.dump(answers, f, indent=1)
    shutil.rmtree(raw, ignore_errors=True)
    return answers


def write_baselines(raw_train: str, raw_heldout: str, path: str, seed: int = 0) -> dict:
    """The constant tables (chosen on the training tables, scored on the held-out ones: the
    baselines.constant_baselines), kept for `score`: the raw corpora are
    not carried."""
    from chartjax.tools.bench import baselines

    targets = []
    for f in sorted(glob.glob(os.path.join(raw_heldout, "tables", "*.txt"))):
        with open(f, encoding="utf-8") as fh:
            targets.append(fh.read())
    baselines = baselines.constant_baselines(raw_train, targets, seed)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(baselines, f, indent=1)
    return baselines


def score(check: str, data: str, result_dir: str, seed: int = 0) -> dict:
    """A reading check's held-out predictions (as `run` brought them back) against the constant
    tables, as tools/bench/benches.py's `reading` scores its runs: RMS F1 without the title row and number
    cells read exactly, each with the paired bootstrap 95% CI of the margin over charts; the
    ChartQA check's test relaxed accuracy against the constant and question-only answers."""
    from chartjax.tools.bench import baselines as bench_baselines

    with open(os.path.join(data, BASELINES), encoding="utf-8") as f:
        baselines = json.load(f)
    out = {"check": check, "seed": seed, "runs": {}}
    for step in CHECKS[check](False):
        if step["tool"] != "evaluate":
            continue
        workdir = os.path.join(result_dir, step["name"])
        folder = bench_baselines.eval_folder_of(workdir, step["split"])
        root = os.path.join(folder, step["split"])
        # eval_folder_of found a step_<N> there
        n = max(int(d[5:]) for d in os.listdir(root) if d.startswith("step_"))
        if check == "chartqa":
            out["runs"][step["name"]] = {"step": n, **_chartqa_score(root, n, baselines)}
            continue
        out["runs"][step["name"]] = {
            "step": n,
            "reads_values": bench_baselines.reads_values(folder, n, baselines, seed),
            "number_cells": bench_baselines.number_cells(folder, n, baselines, seed),
        }
    with open(os.path.join(result_dir, "score.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
    return out


def _chartqa_score(root: str, step: int, baselines: dict) -> dict:
    """The test split's relaxed accuracy against the constant and question-only answers, as
    tools/bench/benches.py's `chartqa_learning` checks it."""
    from chartjax.tools.bench import benches

    with open(os.path.join(root, f"step_{step}", "metrics.json"), encoding="utf-8") as f:
        m = json.load(f)["metrics"]
    model = {k: v for k, v in m.items() if k.startswith("relaxed_accuracy")}
    results = {"arms": {"qa": {"eval": {"test": m}}}, "baseline": baselines}
    return {"model": model, **benches.chartqa_check(results)}


def _size(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def carried_bytes(call: dict) -> int:
    """What the device call sends: the checkout's tracked and untracked-not-ignored files and
    the carried paths."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    tree = sum(_size(os.path.join(ROOT, f.decode())) for f in files if f)
    return tree + sum(_size(os.path.join(ROOT, c)) for c in call["carry"])


def device_call(check: str, data: str) -> dict:
    """The device tool's arguments for `check`."""
    rel = os.path.relpath(data, ROOT)
    command = (
        "python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade "
        "--target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 || exit; "
        f"python3 tools/gpu/checks.py run {check} --data {rel} --out $OUT/{check}"
    )
    carry = [".whl"] + ([rel] if check in ("figureqa", *SCORED) else [])
    return {"command": command, "carry": carry, "timeout_s": 600}


def main(argv_=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="verb", required=True)
    for verb in ("prepare", "run", "score"):
        s = sub.add_parser(verb)
        s.add_argument("check", choices=sorted(SCORED if verb == "score" else CHECKS))
        s.add_argument("--data", help="the check's data folder (default runs/gpu/CHECK)")
        s.add_argument("--tiny", action="store_true", help="CPU smoke sizes (the test's)")
        if verb == "run":
            s.add_argument("--out", required=True, help="result.json and log.txt go here")
            s.add_argument("--work", help="workdirs (default /tmp/chartjax_gpu_CHECK)")
            s.add_argument("--only", action="append", help="run only this step (repeatable)")
        elif verb == "score":
            s.add_argument("--result", required=True, help="the check's $OUT/CHECK, fetched")
        else:
            s.add_argument("--no-wheels", action="store_true", help="data only")
    args = p.parse_args(argv_)
    data = args.data or os.path.join(ROOT, "runs", "gpu", args.check)
    if args.verb == "score":
        print(json.dumps(score(args.check, data, args.result), indent=1))
        return 0
    if args.verb == "run":
        result = run(args.check, data, args.out, args.tiny, args.work, args.only)
        print(json.dumps({"check": args.check, "ok": result["ok"]}))
        return 0 if result["ok"] else 1
    prepare_data(args.check, data, args.tiny)
    if not args.no_wheels:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import wheels

        wheels.download(os.path.join(ROOT, ".whl"))
    call = device_call(args.check, data)
    print(json.dumps(call, indent=1))
    size = carried_bytes(call)
    print(f"carried: {size / 2**20:.1f} MiB of the device call's {CARRY_LIMIT // 2**20} MiB")
    return 0 if size <= CARRY_LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
