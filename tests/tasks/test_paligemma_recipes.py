"""PaliGemma recipes (issue 42 item 5): ChartQA, ChartCheck, Chart-to-Text and DePlot-style
chart-to-table as prefix tasks (chartjax/tasks/core/prefix_lm.py), their LoRA variants with the vision
tower frozen, and the zero-shot ChartGemma / PaliGemma 2 mix evaluations. Each recipe loads,
builds its task and featurizes an example of its builder's dummy data (structural); the ChartQA
recipe trains 2 steps of the tiny PaliGemma of runs/smoke.gin through `chartjax-train` and its
evaluation writes the relaxed accuracies."""

from __future__ import annotations

import dataclasses
import glob
import json
import os

import cloudpickle
import gin
import jax
import numpy as np
import pytest
from flax import nnx

from chartjax import config as config_lib
from chartjax import trainable
from chartjax.config_checks import ConfigError
from chartjax.data.sources import as_python
from chartjax.metrics import chartqa as chartqa_metrics
from chartjax.metrics import report
from chartjax.models import paligemma
from chartjax.tasks import catalog
from chartjax.tasks.core import prefix_lm, seq2seq
from chartjax.testing import tiny_paligemma
from tests.gin_configs.test_tasks import TASKS, recipe_kind
from tests.tasks.conftest import ROOT

TRAIN = {  # recipe -> (task, dummy build, eval split)
    "paligemma_chartqa": ("chartqa", "chartqa", "validation"),
    "paligemma_chartcheck": ("chartcheck", "chartcheck", "validation"),
    "paligemma_chart_to_text_statista": ("chart_to_text", "chart_to_text/statista", "validation"),
    "paligemma_deplot_chartqa": ("deplot", "chartqa", "validation"),
}
EVAL = {"paligemma_chartgemma_chartqa_eval": "", "paligemma_2_mix_chartqa_eval": "answer en "}
REGULARIZE = dict.fromkeys(TRAIN, (0.1, 0.2)) | dict.fromkeys(EVAL, (0.0, 0.0))
REGULARIZE["paligemma_chart_to_text_statista"] = (0.1, 0.1)  # big_vision's SciCap transfer
LORA = [f"{r}_lora" for r in TRAIN]
# runs/smoke.gin's PaliGemma (sizes/paligemma_tiny.gin) over the tiny tokenizer's vocabulary.
TINY = paligemma.PaliGemmaConfig(
    vocab_size=tiny_paligemma.PROCESSOR_VOCAB,
    image_token_id=tiny_paligemma.PROCESSOR_IMAGE_TOKEN,
    emb_dim=32,
    num_heads=4,
    num_kv_heads=1,
    head_dim=8,
    mlp_dim=64,
    num_layers=1,
    vision_emb_dim=32,
    vision_num_heads=4,
    vision_mlp_dim=64,
    vision_num_layers=1,
    image_size=16,
    patch_size=4,
    dtype="float32",
)
TINY_VOCAB = [f"PaliGemmaConfig.vocab_size = {TINY.vocab_size}"]
TINY_VOCAB += [f"PaliGemmaConfig.image_token_id = {TINY.image_token_id}"]


@pytest.fixture(autouse=True)
def _clean_gin():
    gin.clear_config()
    yield
    gin.clear_config()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> str:
    """A PaliGemma HF folder as the recipes read it: the tiny model's config.json (chartjax's
    writer) and the tiny Gemma tokenizer.model; no processor file, so images go to the size of
    config.json, and no weights (no test here loads them)."""
    from chartjax.interop import hf_paligemma

    d = tmp_path_factory.mktemp("tiny_paligemma")
    (d / "config.json").write_text(json.dumps(hf_paligemma.config_to_hf(TINY)))
    (d / "tokenizer.model").write_bytes(tiny_paligemma.sentencepiece_model())
    return str(d)


def _bound(key: str, default):
    try:
        return gin.query_parameter(key)
    except ValueError:
        return default


def _example(task, split: str) -> dict:
    """The first eval example of `split`, featurized as evaluation does (host fields kept)."""
    ex = next(iter(task.source.eval_examples(split, process_index=0, process_count=1)))
    return task.features(True)(ex)


@pytest.mark.parametrize("recipe", [*TRAIN, *EVAL])
def test_recipe_builds_a_prefix_task_and_featurizes(recipe, checkpoint, tfds_dir):
    kind = "eval" if recipe in EVAL else "train"
    task_name, build, split = TRAIN.get(recipe, ("chartqa", "chartqa", "test"))
    data_dir = tfds_dir(*build.split("/"))
    files = [f"tasks/{recipe}.gin"]
    config_lib.parse_gin(files, [f"INIT_PATH = '{checkpoint}'", f"DATA_DIR = '{data_dir}'"])
    assert recipe_kind(TASKS / f"{recipe}.gin") == kind
    assert gin.query_parameter("train.init_format") == "hf"
    # The model, tokenizer and image size are the checkpoint's own; bf16 activations and the
    # recipe's training fields (big_vision's decoder dropout and label smoothing).
    cfg = config_lib._model_config("train")
    assert (cfg.dtype, cfg.dropout_rate, cfg.label_smoothing) == ("bfloat16", *REGULARIZE[recipe])
    assert dataclasses.replace(cfg, dtype="float32", dropout_rate=0.0, label_smoothing=0.0) == TINY
    config_lib.check_run_vocabulary()
    task = catalog.get_task(task_name)
    assert task.model_inputs == prefix_lm.MODEL_INPUTS and task.pack is None
    p = gin.query_parameter("Features.max_input_len")
    q = gin.query_parameter("Features.max_target_len")
    assert task.lengths.encoder == p and task.lengths.decoder == q
    f = _example(task, split)
    # The feature map runs in loader worker processes: it survives cloudpickle, same output.
    ex = next(iter(task.source.eval_examples(split, process_index=0, process_count=1)))
    again = cloudpickle.loads(cloudpickle.dumps(task.features(True)))(ex)
    assert all(np.array_equal(np.asarray(again[k]), np.asarray(f[k])) for k in f)
    assert f["image"].shape == (16, 16, 3) and f["image"].dtype == np.float32
    assert -1.0 <= f["image"].min() and f["image"].max() <= 1.0
    ids, types, mask = f["input_ids"], f["token_type_ids"], f["attention_mask"]
    assert ids.shape == types.shape == mask.shape == (p + q,)
    proc = prefix_lm.open_processor(seq2seq.Features())  # gin's Features: the recipe's
    n_prefix = int(np.sum((types == 0) & (mask == 1)))
    prefix = proc.tokenizer.decode(ids[1 : n_prefix - 1])  # between <bos> and the newline
    assert ids[0] == proc.bos_id and proc.tokenizer.decode(ids[n_prefix - 1 : n_prefix]) == "\n"
    template = _bound("Features.prompt_template", "{prompt}")
    prompt = template.format(prompt=as_python(f["prompt"]))
    assert prefix == prompt[: len(prefix)] and len(prefix) > 0
    suffix = ids[(types == 1) & (mask == 1)]
    if suffix[-1] == proc.eos_id:  # not cut at max_target_len: the whole target
        assert proc.decode(suffix) == as_python(f["target"])
    assert not mask[int(mask.sum()) :].any()  # padding on the right only
    if recipe in EVAL:
        assert prefix.startswith(EVAL[recipe]) if EVAL[recipe] else "answer en" not in prefix


def test_lora_variants_train_the_decoder_adapters_alone(checkpoint):
    """Every LoRA variant: adapters on the decoder's attention and MLP projections only, the
    vision tower, projector and every base weight frozen (trainable.model_labels)."""
    from chartjax.models.configurables import build_model

    def paligemma_build(rngs):
        return build_model(rngs=rngs)

    for recipe in LORA:
        gin.clear_config()
        config_lib.parse_gin([f"tasks/{recipe}.gin"], [f"INIT_PATH = '{checkpoint}'"])
        assert recipe_kind(TASKS / f"{recipe}.gin") == "train"
        labels = trainable.model_labels(paligemma_build)
        flat = dict(zip(trainable._paths(labels), jax.tree.leaves(labels)))
        training = sorted(k for k, v in flat.items() if v == trainable.TRAIN)
        assert training and all(k.startswith("decoder.layers.") for k in training), recipe
        assert all(k.rsplit(".", 1)[1] in ("lora_a", "lora_b") for k in training)
        adapted = {k.split(".")[-2] for k in training}
        assert adapted == {"query", "key", "value", "out", "wi_0", "wi_1", "wo"}
        assert gin.query_parameter("schedule.peak") > 1e-5  # LoRA's larger rate


def test_freezing_the_vision_tower_by_name(checkpoint):
    config_lib.parse_gin(
        ["tasks/paligemma_chartqa.gin", "peft/freeze_vision_tower.gin"],
        [f"INIT_PATH = '{checkpoint}'"],
    )
    from chartjax.models.configurables import build_model

    labels = trainable.model_labels(lambda rngs: build_model(rngs=rngs))
    flat = dict(zip(trainable._paths(labels), jax.tree.leaves(labels)))
    frozen = {k for k, v in flat.items() if v == trainable.FREEZE}
    assert frozen == {k for k in flat if k.startswith("vision_tower.")} and len(frozen) == 21
    assert flat["multi_modal_projector.kernel"] == flat["decoder.embedder.embedding"] == "train"


def test_big_vision_transfer_optimizer(checkpoint):
    """big_vision's ChartQA transfer: its weight decay 1e-6 lands on the kernels alone, as
    optax.adamw's decay 1e-6 / lr (big_vision adds it after the rate); cosine to 0 after a 5 %
    warm-up of 30 epochs of 28,299 questions at batch 256."""
    from chartjax import optim
    from chartjax.models.configurables import build_model

    config_lib.parse_gin(["tasks/paligemma_chartqa.gin"], [f"INIT_PATH = '{checkpoint}'"])
    assert gin.query_parameter("make_optimizer.weight_decay") * 1e-5 == pytest.approx(1e-6)
    exclude = gin.query_parameter("make_optimizer.decay_exclude")
    params = nnx.to_pure_dict(nnx.state(nnx.eval_shape(lambda: build_model(rngs=0)), nnx.Param))
    names = trainable._paths(params)
    decayed = dict(zip(names, jax.tree.leaves(optim._decay_mask(exclude)(params))))
    assert {n for n, d in decayed.items() if d} == {n for n in names if n.endswith(".kernel")}
    total = gin.query_parameter("train.num_train_steps")
    assert total == 30 * 28_299 // 256 == gin.query_parameter("schedule.total_steps")
    assert gin.query_parameter("schedule.warmup_steps") == int(0.05 * total)
    sched = optim.schedule()
    assert float(sched(165)) == pytest.approx(1e-5) and float(sched(total)) == pytest.approx(0.0)


def test_a_tokenizer_that_is_not_the_models_is_refused(checkpoint):
    config_lib.parse_gin(
        ["tasks/paligemma_chartqa.gin", "runs/smoke.gin"],
        [f"INIT_PATH = '{checkpoint}'", "PaliGemmaConfig.vocab_size = 1480"],
    )
    # smoke's tiny model keeps PaliGemma 1's <image> id (257,152); the tiny tokenizer's is 320
    with pytest.raises(ConfigError, match="image_token_id = 257152, but the tokenizer"):
        config_lib.check_run_vocabulary()


@pytest.mark.slow
@pytest.mark.multi_device
def test_paligemma_chartqa_trains_and_writes_relaxed_accuracy(
    tmp_path, capsys, checkpoint, tfds_dir
):
    """chartjax-train: runs/smoke.gin's tiny PaliGemma from scratch (its tokenizer the
    checkpoint folder's), 2 steps on the chartqa dummy build; the evaluation (greedy decoding
    inside the jitted step, the batch over 8 devices) writes the per-source relaxed accuracies;
    the analytic FLOPs reach the log."""
    from chartjax.models import flops
    from chartjax.tools import train as train_cli

    workdir = tmp_path / "run"
    bindings = [
        f"INIT_PATH = '{checkpoint}'",
        f"DATA_DIR = '{tfds_dir('chartqa')}'",
        *TINY_VOCAB,
        "train.num_train_steps = 2",
        "train.checkpoint_every = 2",
        "train.log_every = 1",
        "train.progress = False",
        "Decoding.max_decode_len = 8",
        "loader_workers.count = 0",  # the feature map in-process (the pickled one: above)
    ]
    args = ["--gin_file=tasks/paligemma_chartqa.gin", "--gin_file=runs/smoke.gin"]
    status = train_cli.main(
        [*args, f"--workdir={workdir}", *(f"--gin_bindings={b}" for b in bindings)]
    )
    assert status == 0, capsys.readouterr().err
    rows = [json.loads(x) for x in (workdir / "train_metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in rows if "loss" in r]
    assert len(losses) == 2 and all(np.isfinite(losses))
    # Analytic FLOPs of a 16-image-token PaliGemma over 64 + 32 text tokens (smoke's lengths).
    want = 3 * flops.paligemma_forward_flops(TINY, 64 + 32)["total"]
    second = [r for r in rows if "tflops_per_s_per_device" in r][0]
    assert second["tflops_per_s_per_device"] == pytest.approx(
        second["examples_per_s"] * want / jax.device_count() / 1e12, rel=1e-6
    )
    step_dir = workdir / "eval" / "validation__1" / "step_2"
    obj = json.loads((step_dir / "metrics.json").read_text())
    report.validate_metrics(obj)
    assert obj["task"] == "chartqa" and obj["num_examples"] == 2  # the first chart's questions
    preds = [json.loads(x) for x in (step_dir / "predictions.jsonl").read_text().splitlines()]
    assert sorted(r["source"] for r in preds) == ["augmented", "human"]
    # Each source's accuracy is its one question's relaxed correctness, recomputed here from the
    # decoded answer; the headline is their mean.
    m = obj["metrics"]
    for r in preds:
        assert isinstance(r["prediction"], str) and r["target"]
        correct = chartqa_metrics.relaxed_correctness(r["target"], r["prediction"])
        assert r["relaxed_correct"] == correct
        assert m[f"relaxed_accuracy_{r['source']}"] == float(correct)
    assert m["relaxed_accuracy"] == pytest.approx(
        (m["relaxed_accuracy_human"] + m["relaxed_accuracy_augmented"]) / 2
    )
    assert (workdir / "checkpoints" / "2").is_dir()


def test_the_lattice_recipe_puts_the_question_in_the_prefix(tmp_path, tfds_dir):
    """tasks/paligemma_chartqa_lattice_toy.gin (the learning check's from-scratch PaliGemma):
    with a `chartjax-train-vocab --gemma` tokenizer its vocabulary covers the model's, the chart
    becomes 256 x 256 pixels, the question the prefix and the answer the suffix."""
    from chartjax.tools import train_vocab

    data_dir = tfds_dir("chartqa")
    raw = os.path.join(ROOT, "tfds_builders", "chartqa", "dummy_data")
    texts = [  # the questions and answers of the dummy build, as the bench's tokenizer has them
        f"{q['query']} {q['label']}"
        for path in glob.glob(os.path.join(raw, "*", "*.json"))
        for q in json.load(open(path))
    ]
    vocab = train_vocab.train(
        texts, str(tmp_path / "gemma"), vocab_size=400, hard_vocab_limit=False, gemma=True
    )
    config_lib.parse_gin(
        ["tasks/paligemma_chartqa_lattice_toy.gin"],
        [f"VOCAB = '{vocab}'", f"DATA_DIR = '{data_dir}'"],
    )
    assert gin.query_parameter("train.init_format") == "random"
    config_lib.check_run_vocabulary()
    cfg = config_lib._model_config("train")
    assert (cfg.image_size, cfg.patch_size, cfg.image_token_id) == (256, 16, 5)
    task = catalog.get_task("chartqa")
    assert task.model_inputs == prefix_lm.MODEL_INPUTS
    f = _example(task, "validation")
    assert f["image"].shape == (256, 256, 3)
    ids, types, mask = f["input_ids"], f["token_type_ids"], f["attention_mask"]
    assert ids.shape == (48 + 24,)
    proc = prefix_lm.open_processor(seq2seq.Features())
    n_prefix = int(np.sum((types == 0) & (mask == 1)))
    assert proc.tokenizer.decode(ids[1 : n_prefix - 1]) == as_python(f["prompt"])
    suffix = ids[(types == 1) & (mask == 1)]
    assert suffix[-1] == proc.eos_id and proc.decode(suffix) == as_python(f["target"])
