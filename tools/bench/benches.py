"""The benches the runner runs (tools/bench/runner.py): corpora, recipes, bindings, baselines,
checks. Data only, and the small functions that read results; every update is chartjax-train's.

`{corpus}` in a command or binding is the corpus folder, `{workdir}` the arm's run folder,
`{runs}` the folder of all the arms' runs (an earlier arm's checkpoint: `{runs}/<arm>/...`).
Benches on a released corpus (Chart-to-Text) take its build as `--gin_bindings
"DATA_DIR='...'" --gin_bindings "VOCAB='...'"`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from chartjax.tools.bench import baselines


@dataclasses.dataclass(frozen=True)
class Arm:
    """One `chartjax-train` run: gin files, bindings, and `chartjax-eval` runs after it, each
    `(split, bindings)`."""

    recipe: tuple[str, ...]
    bindings: tuple[str, ...] = ()
    evals: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclasses.dataclass(frozen=True)
class Bench:
    name: str
    doc: str
    arms: dict[str, Arm]
    corpus: tuple[str, ...] = ()  # shell commands writing into {corpus}
    bindings: tuple[str, ...] = ()  # every arm's, before its own
    compile_only: bool = False
    train_keys: tuple[str, ...] = ("loss",)
    metric_keys: tuple[str, ...] = ()  # of metrics.json's `metrics` (all when empty)
    baseline: Callable[[str], dict] | None = None  # of the corpus folder
    check: Callable[[dict], dict] | None = None  # of `results`


# Short runs of the product's step: timing rows every 5 updates, no evaluation, no checkpoint.
TIMED = (
    "train.log_every = 5",
    "train.final_eval = False",
    "train.eval_every = 0",
    "train.checkpoint_every = 100000",
    "train.progress = False",
)


def _figureqa_corpus(types: str, train: int, val: int) -> tuple[str, ...]:
    raw = "{corpus}/raw"
    return (
        f"chartjax-synth figureqa --out {raw} --train-images {train} --val-images {val} "
        f"--figure-types {types} --max-elements 3 --templates 0,1 --colors-per-set 4 --seed 0 "
        "--workers 2",
        f"tfds build tfds_builders/figureqa --manual_dir={raw} --data_dir={{corpus}}/tfds",
    )


def _chart_info_corpus(train: int, heldout: int) -> tuple[str, ...]:
    """tools/gpu/checks.py's lattice corpus: labels on the patch grid at 256 patches."""
    opts = (
        "--types 'Grouped vertical bar' --size 576x416 --max-categories 3 --max-topics 4 "
        "--max-series 1 --value-labels 20 --text-grid 32 --workers 2"
    )
    out = []
    for split, num, seed in (("train", train, 1), ("heldout", heldout, 2)):
        raw = f"{{corpus}}/raw_{split}"
        out += [
            f"chartjax-synth chart_info --out {raw} --num {num} --seed {seed} {opts}",
            f"tfds build tfds_builders/chart_info --config synthetic_2019 --manual_dir={raw} "
            f"--data_dir={{corpus}}/tfds_{split}",
        ]
    return (
        *out,
        "chartjax-train-vocab --input {corpus}/raw_train/tables/*.txt --out {corpus}/spm "
        "--vocab_size 1000 --soft_vocab_limit --split_digits",
    )


def _chartqa_corpus(
    train: int, val: int, test: int, gemma: bool = False, size: str = "576x416"
) -> tuple[str, ...]:
    """ChartQA-style lattice charts (tasks/chartqa_lattice_toy.gin's header has why): one
    series, up to 3 bars, value and category labels at 20 pt on the 32-pixel lattice;
    questions asked: retrieval and the highest / lowest category (no arithmetic). `gemma`: also
    a Gemma-layout tokenizer of the training tables and questions, {corpus}/gemma.model (a
    from-scratch PaliGemma's: tasks/paligemma_chartqa_lattice_toy.gin) and its image processor
    file, the training charts' pixel mean and std (at [-1, 1] the toy read no value). `size`:
    the page in pixels; PaliGemma's is square, 512 x 512, so that its 256-pixel input (squeezed
    square) in 16-pixel patches puts one 32-pixel lattice cell in each patch (at 576 x 416 into
    224 pixels a patch held 1.3 cells across and 0.9 down: the table stage read the rows, not
    the values; at 448 x 448 some tables fit no style)."""
    raw = "{corpus}/raw"
    questions = (
        "python -c \"import json, sys; [print(q['query']) for f in sys.argv[1:] "
        f'for q in json.load(open(f))]" {raw}/train/train_human.json '
        f"{raw}/train/train_augmented.json > {{corpus}}/questions.txt",
        f"chartjax-train-vocab --gemma --input {raw}/train/tables/*.csv {{corpus}}/questions.txt "
        "--out {corpus}/gemma --vocab_size 1000 --soft_vocab_limit --split_digits "
        f"--images '{raw}/train/png/*.png' --image_size 256",
    )
    return (
        f"chartjax-synth chartqa --out {raw} --train-charts {train} --val-charts {val} "
        f"--test-charts {test} --seed 1 --questions 2 --kinds retrieval,max,min "
        f"--types 'Grouped vertical bar' --size {size} --max-categories 3 --max-topics 4 "
        "--max-series 1 --value-labels 20 --text-grid 32 --tick-size 20 --workers 2",
        f"tfds build tfds_builders/chartqa --manual_dir={raw} --data_dir={{corpus}}/tfds",
        f"chartjax-train-vocab --input {raw}/train/tables/*.csv --out {{corpus}}/spm "
        "--vocab_size 1000 --soft_vocab_limit --split_digits",
        *(questions if gemma else ()),
    )


def _accuracy(results: dict, arm: str, split: str, best: bool = False) -> dict:
    m = results["arms"][arm]["eval_best" if best else "eval"][split]
    return {"accuracy": m["accuracy"], "n": m["num_examples"]}


def _wilson(acc: float, n: int) -> tuple[float, float]:
    from chartjax.metrics.classification import wilson_interval

    return wilson_interval(round(acc * n), n)


def ordering(arms: tuple[str, ...], split: str, best: bool = False, chance_band: float = 0.05):
    """A check: each arm's `split` accuracy with its 95% Wilson interval, the first within
    `chance_band` of 0.5, each neighbour's intervals apart (arms[0] < arms[1] < ...)."""

    def check(results: dict) -> dict:
        acc = {a: _accuracy(results, a, split, best) for a in arms}
        for v in acc.values():
            v["ci95"] = _wilson(v["accuracy"], v["n"])
        pairs = [acc[lo]["ci95"][1] < acc[hi]["ci95"][0] for lo, hi in zip(arms, arms[1:])]
        first = abs(acc[arms[0]]["accuracy"] - 0.5) <= chance_band if len(arms) > 2 else True
        return {"split": split, "accuracy": acc, "holds": all(pairs) and first}

    return check


def reading_check(results: dict) -> dict:
    """The held-out tables against the best constant ones (RMS F1 without titles, number
    cells read exactly), paired bootstrap over charts."""
    base = results["baseline"]
    arm = results["arms"]["lattice"]
    step, folder = arm["train"]["step"], arm["eval_folders"]["train"]
    return {
        "reads_values": baselines.reads_values(folder, step, base, 0),
        "number_cells": baselines.number_cells(folder, step, base, 0),
    }


def chartqa_check(results: dict) -> dict:
    """The held-out (test) relaxed accuracy's 95% interval above both baselines' intervals
    (Wilson per source, the overall mean's by MOVER: chartjax.metrics.chartqa)."""
    m, base = results["arms"]["qa"]["eval"]["test"], results["baseline"]
    above = {
        b: m["relaxed_accuracy_ci95_low"] > base[b]["relaxed_accuracy_ci95_high"]
        for b in ("constant", "question_only")
    }
    return {"above": above, "holds": all(above.values())}


# ------------------------------------------------------------------ the benches ------------

FIGUREQA_DEMO = _figureqa_corpus("vbar_categorical", 2000, 250)
FIGUREQA_BARS = _figureqa_corpus("vbar_categorical,hbar_categorical", 4000, 500)
FIGUREQA_BINDINGS = ("DATA_DIR = '{corpus}/tfds'", "train.progress = False")
SELECTION = (  # chartjax/selection.py: the paper's rule, on a batch of validation2 per update
    "train.selection = @BatchEmaSelection()",
    "BatchEmaSelection.split = 'validation2'",
    "BatchEmaSelection.metric = 'accuracy'",
    "BatchEmaSelection.decay = 0.9",
    "BatchEmaSelection.start = 100",
    "BatchEmaSelection.batch_size = 250",
    "BatchEmaSelection.final_split = 'validation2'",
    "figureqa_task.eval_splits = ('validation1', 'validation2')",
    "train.max_train_time_s = None",
)
DEMO_LIKE = (  # the CNN+LSTM at the demo RN's settings (tasks/figureqa_demo_rn.gin)
    "RNConfig.image_size = 64",
    "RNConfig.conv_layers = 4",
    "RNConfig.dropout = 0.0",
    "figureqa_task.image_size = 64",
    "figureqa_task.antialias = True",
    "figureqa_task.train_pad = 0",
    "train.global_batch_size = 32",
    "train.eval_batch_size = 250",
    "evaluate.eval_batch_size = 250",
    "train.num_train_steps = 1200",
    "train.eval_every = 0",
    "train.log_every = 50",
    "make_optimizer.lr = None",
    "schedule.kind = 'cosine'",
    "schedule.peak = 1e-3",
    "schedule.total_steps = 1200",
)
CHARTQA_TABLE = (  # stage 1 of chartqa_learning: chart -> table on the build's charts
    "deplot_task.source = 'chartqa'",
    "deplot_task.train_split = 'train'",
    "deplot_task.eval_splits = ('validation',)",
    "Features.max_target_len = 64",
    "Decoding.max_decode_len = 64",
    "train.num_train_steps = 2500",
    "train.eval_every = 0",
    "train.checkpoint_every = 2500",
)
PG_QA = ("tasks/paligemma_chartqa_lattice_toy.gin",)
# Each stage 1,700 steps: 2,000 + 2,000 took 65.1 CPU minutes with the corpus (0.87 CPU s a
# step on 2 cores), over item 7's 60.
PG_STEPS = 1700
PG_STAGE = (  # each stage's length, schedule and one checkpoint at its end
    f"train.num_train_steps = {PG_STEPS}",
    f"schedule.total_steps = {PG_STEPS}",
    f"train.checkpoint_every = {PG_STEPS}",
)
PALIGEMMA_TABLE = (  # stage 1 of paligemma_learning: the same model, chart -> table
    "train.task = 'deplot'",
    "evaluate.task = 'deplot'",
    *CHARTQA_TABLE[:3],
    "deplot_task.prompt = 'table'",  # 7 prefix tokens; DePlot's prompt takes 45 here
    "Features.max_input_len = 8",
    "Features.max_target_len = 64",
    "Decoding.max_decode_len = 64",
    *PG_STAGE,
    "train.eval_every = 0",
    "train.best_metric = None",
)
PG_SMALL_FLAGS = "--hidden 384 --layers 4 --heads 6 --mlp 1536 --vocab 16384"  # step.py's
PG_SMALL = (  # PaliGemma 1 of step.py --model paligemma PG_SMALL_FLAGS (22.3M parameters), fp32
    "PaliGemmaConfig.version = 1",
    "PaliGemmaConfig.layer_types = ()",
    "PaliGemmaConfig.sliding_window = None",
    "PaliGemmaConfig.attn_logit_softcap = None",
    "PaliGemmaConfig.final_logit_softcap = None",
    "PaliGemmaConfig.query_pre_attn_scalar = None",
    "PaliGemmaConfig.vocab_size = 16384",
    "PaliGemmaConfig.image_token_id = 16383",
    *(f"PaliGemmaConfig.{p}emb_dim = 384" for p in ("", "vision_")),
    *(f"PaliGemmaConfig.{p}num_heads = 6" for p in ("", "vision_")),
    *(f"PaliGemmaConfig.{p}mlp_dim = 1536" for p in ("", "vision_")),
    *(f"PaliGemmaConfig.{p}num_layers = 4" for p in ("", "vision_")),
    "PaliGemmaConfig.num_kv_heads = 1",
    "PaliGemmaConfig.head_dim = 64",
    "PaliGemmaConfig.patch_size = 14",
    "PaliGemmaConfig.dtype = 'float32'",
    "IMAGE_SIZE = 224",  # 256 image tokens
    "synthetic_prefix_lm_task.prefix_len = 32",
    "synthetic_prefix_lm_task.target_len = 16",
    "train.global_batch_size = 8",
)
PIX2STRUCT_BASE = ("sizes/pix2struct_base.gin",)
BASE_SHAPES = (  # Pix2Struct-base on the synthetic patch task: 2,048 patches, 128 targets
    "Pix2StructConfig.patch_size = 16",
    "Pix2StructConfig.max_position_embeddings = 4096",
    "synthetic_seq2seq_task.patch_dim = 770",
    "synthetic_seq2seq_task.input_len = 2048",
    "synthetic_seq2seq_task.target_len = 127",
    "Pix2StructConfig.dtype = 'bfloat16'",
    "train.global_batch_size = 8",
)
P2S_SMOKE = ("tasks/pix2struct_synthetic_smoke.gin",)
# PaliGemma 2 at its sizes (sizes/paligemma2_*.gin) on the synthetic prefix-LM task, batch 1:
# full fine-tuning, LoRA (peft/lora_paligemma.gin), LoRA over an int8 base (models/quantize.py).
PG2_MODELS = {
    "3b_448": ("3b", 448),
    "3b_896": ("3b", 896),
    "10b_448": ("10b", 448),
    "28b_448": ("28b", 448),
}
PG2_PEFT = {
    "full": (),
    "lora": ("peft/lora_paligemma.gin",),
    "lora_int8": ("peft/lora_paligemma_int8.gin",),
}
REMAT_POLICIES = ("none", "full", "dots_saveable", "dots_with_no_batch_dims_saveable")
C2T_TINY = ("runs/smoke.gin",)  # a tiny model of each family, on the release's build

BENCHES = {
    b.name: b
    for b in (
        Bench(
            "smoke",
            "the runner's own check: a tiny T5 on the synthetic copy task, no corpus",
            {"t5": Arm(("tasks/t5_synthetic_smoke.gin",))},
            bindings=("train.num_train_steps = 4", "train.log_every = 2", "train.progress = False"),
            metric_keys=("token_accuracy",),
        ),
        Bench(
            "step",
            "the product's train step (step_s, input wait) of small recipes, 30 updates",
            {
                "t5_tiny": Arm(("tasks/t5_synthetic_smoke.gin",)),
                "pix2struct_tiny": Arm(P2S_SMOKE),
                "rn_256": Arm(
                    ("tasks/synthetic_rn.gin",),
                    (
                        "RNConfig.image_size = 256",
                        "RNConfig.conv_layers = 5",
                        "synthetic_task.image_size = 256",
                    ),
                ),
            },
            bindings=(*TIMED, "train.num_train_steps = 30"),
        ),
        Bench(
            "paligemma_step",
            "the product's PaliGemma 1 train step (step_s) at a small config, 20 updates; HF's "
            f"on the same shapes: step.py --model paligemma {PG_SMALL_FLAGS} --hf-train-steps",
            {"small": Arm(("tasks/paligemma_synthetic_smoke.gin",), PG_SMALL)},
            bindings=(*TIMED, "train.num_train_steps = 20"),
        ),
        Bench(
            "memory",
            "XLA memory and FLOPs of the Pix2Struct-base step per remat policy (compile only)",
            {
                p: Arm(P2S_SMOKE + PIX2STRUCT_BASE, (f"Pix2StructConfig.remat_policy = '{p}'",))
                for p in ("none", "dots_saveable", "full")
            },
            bindings=BASE_SHAPES,
            compile_only=True,
        ),
        Bench(
            "peft_memory",
            "LoRA against full fine-tuning of Pix2Struct-base: XLA memory (compile only)",
            {
                "full": Arm(P2S_SMOKE + PIX2STRUCT_BASE),
                "lora": Arm(P2S_SMOKE + PIX2STRUCT_BASE + ("peft/lora.gin",)),
            },
            bindings=(*BASE_SHAPES[:-2], "train.global_batch_size = 2"),
            compile_only=True,
        ),
        Bench(
            "paligemma2_memory",
            "XLA memory of PaliGemma 2 3B / 10B / 28B train steps: full, LoRA, LoRA over an "
            "int8 base, per remat policy (compile only; an arm is <size>_<res>_<peft>_<policy>)",
            {
                f"{m}_{p}_{r}": Arm(
                    ("tasks/paligemma_synthetic_smoke.gin", f"sizes/paligemma2_{size}.gin", *g),
                    (f"IMAGE_SIZE = {res}", f"PaliGemmaConfig.remat_policy = '{r}'"),
                )
                for m, (size, res) in PG2_MODELS.items()
                for p, g in PG2_PEFT.items()
                for r in REMAT_POLICIES
            },
            bindings=("train.global_batch_size = 1", "train.progress = False"),
            compile_only=True,
        ),
        Bench(
            "peft_step",
            "LoRA against full fine-tuning of Pix2Struct-base: step_s of 20 updates",
            {
                "full": Arm(P2S_SMOKE + PIX2STRUCT_BASE),
                "lora": Arm(P2S_SMOKE + PIX2STRUCT_BASE + ("peft/lora.gin",)),
            },
            bindings=(
                *TIMED,
                "synthetic_seq2seq_task.input_len = 64",
                "synthetic_seq2seq_task.target_len = 16",
                "train.global_batch_size = 2",
                "train.num_train_steps = 20",
            ),
        ),
        Bench(
            "packing",
            "Chart-to-Text TAB-T5 rows packed or not: step_s, target tokens/s (needs the build)",
            {
                "unpacked": Arm(("tasks/chart_to_text_statista_tab_t5.gin", *C2T_TINY)),
                "packed": Arm(
                    ("tasks/chart_to_text_statista_tab_t5.gin", *C2T_TINY),
                    ("Features.pack = True",),
                ),
            },
            bindings=(
                *TIMED,
                "Features.max_input_len = 512",
                "Features.max_target_len = 128",
                "train.global_batch_size = 16",
                "train.num_train_steps = 30",
            ),
        ),
        Bench(
            "demo",
            "make demo's runs: the RN against text-only on the demo's FigureQA (validation1)",
            {
                "rn": Arm(("tasks/figureqa_demo_rn.gin",)),
                "text_only": Arm(("tasks/figureqa_demo_text_only.gin",)),
            },
            corpus=FIGUREQA_DEMO,
            bindings=(*FIGUREQA_BINDINGS, "train.max_train_time_s = None"),
            train_keys=("loss", "accuracy"),
            metric_keys=("accuracy",),
            baseline=baselines.figureqa_majority,
            check=ordering(("text_only", "rn"), "validation1"),
        ),
        Bench(
            "ordering",
            "FigureQA's ordering, text-only ~ 50% < CNN+LSTM < RN on validation2, train.selection",
            {
                "text_only": Arm(
                    ("tasks/figureqa_demo_text_only.gin",), ("train.num_train_steps = 1200",)
                ),
                "cnn_lstm": Arm(("tasks/figureqa_cnn_lstm.gin",), DEMO_LIKE),
                "rn": Arm(("tasks/figureqa_demo_rn.gin",)),
            },
            corpus=FIGUREQA_BARS,
            bindings=(*FIGUREQA_BINDINGS, *SELECTION),
            train_keys=("loss", "accuracy"),
            metric_keys=("accuracy",),
            baseline=baselines.figureqa_majority,
            check=ordering(("text_only", "cnn_lstm", "rn"), "validation2", best=True),
        ),
        Bench(
            "reading",
            "the tiny Pix2Struct reads chart values off lattice charts, against constant tables",
            {
                "lattice": Arm(
                    ("tasks/chart_table_lattice_toy.gin",),
                    ("deplot_task.train_split = 'train'", "train.final_eval = False"),
                    evals=(("train", ("DATA_DIR = '{corpus}/tfds_heldout'",)),),
                )
            },
            corpus=_chart_info_corpus(3000, 200),
            bindings=(
                "VOCAB = '{corpus}/spm.model'",
                "DATA_DIR = '{corpus}/tfds_train'",
                "Pix2StructConfig.vocab_size = 1000",
                "train.eval_every = 0",
                "train.progress = False",
            ),
            metric_keys=("rms_f1", "rnss"),
            baseline=baselines.chart_info_tables,
            check=reading_check,
        ),
        Bench(
            "chartqa_learning",
            "the tiny Pix2Struct, fine-tuned from a chart -> table run on the same charts, "
            "answers ChartQA-style questions (as headers) against question-only answers",
            {
                "table": Arm(("tasks/chart_table_lattice_toy.gin",), CHARTQA_TABLE),
                "qa": Arm(
                    ("tasks/chartqa_lattice_toy.gin",),
                    ("INIT_PATH = '{runs}/table/checkpoints/2500'",),
                    evals=(("test", ()),),
                ),
            },
            corpus=_chartqa_corpus(3000, 50, 300),
            bindings=(
                "VOCAB = '{corpus}/spm.model'",
                "DATA_DIR = '{corpus}/tfds'",
                "train.progress = False",
            ),
            train_keys=("loss", "accuracy"),
            baseline=baselines.chartqa_answers,
            check=chartqa_check,
        ),
        Bench(
            "paligemma_learning",
            "a tiny PaliGemma from scratch, chart -> table then ChartQA-style questions as the "
            "prefix, against question-only answers",
            {
                "table": Arm(PG_QA, PALIGEMMA_TABLE),
                "qa": Arm(
                    PG_QA,
                    (
                        "train.init_format = 'chartjax'",
                        f"train.init_path = '{{runs}}/table/checkpoints/{PG_STEPS}'",
                        *PG_STAGE,
                    ),
                    evals=(("test", ()),),
                ),
            },
            corpus=_chartqa_corpus(3000, 50, 300, gemma=True, size="512x512"),
            bindings=(
                "VOCAB = '{corpus}/gemma.model'",
                "DATA_DIR = '{corpus}/tfds'",
                "train.progress = False",
            ),
            train_keys=("loss", "accuracy"),
            baseline=baselines.chartqa_answers,
            check=chartqa_check,
        ),
        Bench(
            "chart_to_text",
            "TAB-T5, Chart2text and Field-Infuse learn Chart-to-Text (tiny, needs the build)",
            {
                m: Arm((f"tasks/chart_to_text_statista_{m}.gin", *C2T_TINY))
                for m in ("tab_t5", "tab_chart2text", "tab_field_infuse")
            },
            bindings=(
                "train.num_train_steps = 1000",
                "schedule.total_steps = 1000",
                "train.max_train_time_s = None",
                "train.progress = False",
            ),
            metric_keys=("bleu", "rouge_l", "content_selection"),
        ),
    )
}
