"""Training parity with HuggingFace transformers (PyTorch): chartjax's whole train step against
HF's, from the same weights on the same batches (issue 28, item 1; JSON on stdout).

    python -m chartjax.tools.bench.training_parity [--size base|tiny]
        [--families pix2struct t5 paligemma paligemma2]
        [--steps 20] [--seeds 8] [--vocab 8192] [--out FILE]

A random HF Pix2Struct / T5 (`torch.manual_seed`) is saved and read back the way `chartjax-train`
starts from an HF checkpoint (`init_checkpoint.pretrained_state("hf", ...)`, i.e. chartjax's own
converter). Both sides then train on the same batches, with padded patches / encoder tokens and
padded targets (HF's labels are -100 there). chartjax's step is `train.make_train_step` over
`optim.make_optimizer`, jitted as `train.train` jits it; HF's is `model(**inputs, labels=...)`,
`loss.backward()`, the optional `clip_grad_norm_`, `optimizer.step()`, `scheduler.step()`.

Rows (relative error = max |chartjax - HF| / max |HF| over a tensor; a group's is its worst):
- `gradients`: every parameter's gradient of the first step (fp32, z_loss 0, dropout off), taken
  from inside the real step by an optimizer that stores what it is given;
- `optimizers`: the loss at every step and the logits of a held-out batch after `steps` updates,
  z_loss 0, dropout off, fp32, for plain SGD; AdamW as HF Trainer runs it (decay groups from
  `Trainer.get_decay_parameter_names`, global-norm clipping at 1.0, linear schedule with warmup)
  against `runs/adamw_hf_trainer.gin`'s settings; `adafactor_hf` against HF's
  `Adafactor(scale_parameter=False, relative_step=False, warmup_init=False)`; and the T5X
  `adafactor` against HF's `Adafactor(scale_parameter=True, ...)`, once as HF ships it and once
  with HF's factoring rule replaced by T5X's (`adafactor_t5x_rule`): see NOTES;
- `z_loss`: the first step and the AdamW run with the config's z_loss (1e-4) against HF's plain
  cross-entropy: the loss exceeds HF's by the logged `z_loss` term;
- `dropout`: rate 0.3, AdamW, `seeds` runs a side; two-sample tests on the per-run mean loss
  (Welch's t, Mann-Whitney U) and on its spread (Brown-Forsythe), the per-step Welch p-values
  Bonferroni-corrected, beside the effect of dropout itself (so a pass is not a weak test);
- `bf16`: chartjax with `dtype = "bfloat16"` (activations and residual stream in bf16; norms,
  softmax, logits and loss in fp32; fp32 parameters and optimizer) against HF fp32 and against
  HF under `torch.autocast("cpu", torch.bfloat16)`.

Measured (the defaults, `make bench`'s line: base width, 2 + 2 layers, vocab 8,192, 64 patches /
tokens, 24 targets, batch 4, 20 steps, 8 seeds; 716 s wall on 2 shared CPU cores, load 1.3-2.0;
jax 0.10.2, torch 2.13.0, transformers 5.24.0). Relative errors, worst over both families:
first-step gradients <= 3.6e-6 in every group; losses at every step <= 3e-7 and held-out logits
<= 1.4e-5 for SGD, AdamW, adafactor_hf and adafactor_t5x_rule; T5X adafactor against HF's own
factoring 3.7e-6 / 2e-4; z_loss 1e-4 raises the loss by 9.0e-3 (first-step loss minus the logged
term equals HF's to 1.6e-7, gradients differ by <= 6e-4); bf16 losses 5.2e-4 and logits 1.1%
from HF fp32 (HF's own autocast: 5.1e-4 and 0.4%). Dropout: chartjax's loss is the same for every
seed (`chartjax_same_loss_every_seed`, state.reseeded reseeds nothing); with reseeding repaired
the distributions agree (Welch p 0.53 / 0.26, Pix2Struct / T5). tests/interop/
test_training_parity.py runs the tiny size.

PaliGemma (`paligemma`: Gemma decoder, `paligemma2`: Gemma 2; NOTES paligemma) in fp32, measured
with `--size tiny --families paligemma paligemma2 --steps 20 --seeds 0 --threads 1` (570 s wall
on the 2 shared cores at load 8.5-9.4; jax 0.10.2, torch 2.13.0, transformers 5.24.0), worst of
the two: first-step gradients <= 2.7e-6 relative in every group (SigLIP's key bias: 4.7e-10
absolute, NOTES key_bias); the loss at each of the 20 steps <= 4.7e-7 relative and the held-out
logits <= 4.0e-5 absolute for SGD, AdamW and adafactor_t5x_rule; HF's Adafactor 1.1e-4 / T5X's
7e-3 (the patch convolution is factored differently, NOTES paligemma); z-loss 1e-4: the first
loss minus the logged term equals HF's to 1.6e-7; bf16 losses 1.1e-3 from HF fp32. The test
runs 5 AdamW steps of paligemma2.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import re
import tempfile
import time
import types

import numpy as np

from chartjax.tools.bench import harness

LIBS = ("jax", "flax", "optax", "torch", "transformers")
FAMILIES = ("pix2struct", "t5")
# PaliGemma with a Gemma / Gemma 2 decoder: chartjax/testing/tiny_paligemma.py's tiny models at
# every --size (the size gives the batch, the text lengths and the rates), trained through the
# prefix-LM tasks' loss (chartjax/tasks/core/prefix_lm.py: image placeholders added, the loss on the
# suffix alone) against HF's PaliGemmaForConditionalGeneration with -100 labels off the suffix.
PREFIX_LM = ("paligemma", "paligemma2")
ALL_FAMILIES = FAMILIES + PREFIX_LM
# vocab, width, heads, head dim, MLP, layers (encoder and decoder each), patch side, encoder
# length (patches / tokens), target length, batch. "base" is Pix2Struct-base's width with 2
# layers and a smaller vocabulary (50,244 would only make the logits slower: --vocab).
SIZES = {
    "tiny": {
        "vocab": 64,
        "hidden": 32,
        "heads": 4,
        "d_kv": 8,
        "d_ff": 64,
        "layers": 1,
        "patch": 4,
        "enc_len": 12,
        "tgt_len": 10,
        "batch": 4,
    },
    "base": {
        "vocab": 8192,
        "hidden": 768,
        "heads": 12,
        "d_kv": 64,
        "d_ff": 2048,
        "layers": 2,
        "patch": 16,
        "enc_len": 64,
        "tgt_len": 24,
        "batch": 4,
    },
}
PAD, EOS = 0, 1
DROPOUT = 0.3  # high, so that what dropout does to the loss is large against its spread
Z_LOSS = 1e-4  # the chartjax configs' default (T5X's)

# Optimizer settings both sides use. Learning rates by size: at base width the tiny rates make
# training on random targets chaotic (the loss jumps between steps and any float32 difference
# doubles every step or two), which would measure that chaos, not the step; the base rates are
# fine-tuning ones (T5X's 1e-3 Adafactor, HF's 1e-4).
LR = {
    "tiny": {"sgd": 0.05, "adamw": 1e-3, "adafactor_hf": 1e-3, "adafactor": 1e-2},
    "base": {"sgd": 0.01, "adamw": 1e-4, "adafactor_hf": 1e-4, "adafactor": 1e-3},
}
ADAMW = dict(weight_decay=0.01, warmup=2, clip=1.0)  # runs/adamw_hf_trainer.gin, 2 warmup steps
ADAFACTOR_HF_DECAY = 0.01
OPTIMIZERS = ("sgd", "adamw", "adafactor_hf", "adafactor_t5x_rule", "adafactor")
DECAY_EXCLUDE = ("bias", "norm")  # runs/adamw_hf_trainer.gin
# What each row compares, and where the two sides differ (the report carries these).
NOTES = {
    "adamw": "optax.adamw and torch.optim.AdamW take the same step: m_hat / (sqrt(v_hat) + eps), "
    "both moments bias-corrected, eps outside the root; decoupled decay lr * wd * param of the "
    "pre-update param. Decayed: chartjax's paths without 'bias' or 'norm' = HF Trainer's "
    "get_decay_parameter_names, checked name by name. Gradient clipping: torch scales by "
    "1 / (norm + 1e-6), optax by 1 / norm (1e-6 relative).",
    "adafactor_hf": "optim.hf_adafactor transcribes HF's Adafactor step, used directly as the "
    "ChartCheck script does. Under HF Trainer, weight decay skips biases and norms for every "
    "optimizer; hf_adafactor decays every parameter (same when weight_decay = 0, the recipes').",
    "adafactor_factoring": "T5X/optax factor a second moment only when a tensor's two largest "
    "dimensions are both >= 128 (min_dim_size_to_factor), over those two; HF factors every "
    "tensor of >= 2 dimensions over its last two. For 2-D tensors both approximate v by "
    "row x col / mean, so they agree where both factor; they differ on small tensors: at tiny "
    "width every matrix, at base width the relative-position tables [heads, 32]. The "
    "adafactor_t5x_rule row gives HF T5X's rule: then the two are equal.",
    "adafactor_weight_decay": "T5X/optax add weight_decay_rate * param to the update, "
    "independent of the rate; HF subtracts weight_decay * lr * max(eps2, RMS(param)) * param. "
    "runs/adafactor_t5x.gin uses 1e-5; the rows use 0.",
    "adafactor_same": "second-moment decay 1 - t**-0.8 (t from 1), eps1 1e-30 added to g**2, "
    "update clipped to RMS <= 1.0 before the rate, step = lr * max(1e-3, RMS(param)), no "
    "momentum, float32. Schedule: T5X runs the rate it is given; HF's relative_step=True "
    "(min(1e-2, 1/sqrt(t))) is not compared.",
    "z_loss": "seq2seq_loss is the mean over non-padding targets of the cross-entropy + z_loss "
    "* logsumexp**2 (T5X), no label smoothing; HF's is the mean cross-entropy over labels != "
    "-100. Equal at z_loss 0. The model configs default to 1e-4, also when starting from an HF "
    "checkpoint: the loss is then higher by 1e-4 * mean(log Z**2) (~1e-4 * ln(vocab)**2 at "
    "init) and the first gradients differ by ~1e-3 relative.",
    "dropout_sites": "T5: the same sites in both (embeddings, after each sublayer, inside the "
    "MLP, attention probabilities, after the final norm). Pix2Struct's vision encoder in HF "
    "drops only after the embeddings, inside the MLP and (attention_dropout, 0 by default; set "
    "to the rate here) the attention probabilities; chartjax, as T5X's Pix2Struct, also after "
    "attention, after the MLP and after the final norm.",
    "bf16": "chartjax's dtype bfloat16 runs the matmuls and keeps the residual stream in bf16 "
    "(RMSNorm, softmax, logits and loss in fp32; parameters and optimizer fp32); "
    "torch.autocast runs matmuls in bf16 but keeps the residual stream and norms in fp32, so "
    "it stays closer to fp32.",
    "paligemma": "the prefix is <bos> + random ids + newline (padded lengths enc_len), the "
    "suffix random ids + <eos> (tgt_len), both padded on the right, after the 16 image tokens; "
    "token types 0 / 1 and the loss on the suffix as HF's processor labels it. No dropout row: "
    "HF's Gemma has no residual dropout, chartjax's PaliGemmaConfig.dropout_rate is big_vision's. "
    "Adafactor: HF factors the patch convolution's [width, C, p, p] weight over (p, p), "
    "chartjax's patch kernel is [p*p*C, width] (the same products, siglip.py) and is factored "
    "over both: the one tensor whose second moments differ, hence adafactor_hf's ~1e-4.",
    "key_bias": "SigLIP's key projection bias gets a zero gradient in exact arithmetic (the "
    "softmax over keys is invariant to a shift common to all keys): both sides give float32 "
    "noise of ~1e-7, so its group's max_rel is meaningless and its max_abs is the figure.",
    "tied_t5": "transformers 5 ties every T5's LM head to `shared` (T5Config forces "
    "tie_word_embeddings = True; a False in config.json only turns off the d_model**-0.5 "
    "rescale) and unties it on load only when the checkpoint stores a different lm_head.weight "
    "(T5 v1.1, Flan-T5). chartjax reads such a checkpoint (one HF 5 built itself, e.g. trained "
    "from scratch) as HF 5 does: T5Config.logits_via_embedding with scale_decoder_outputs "
    "False (hf.head_from_weights), so one tensor gets both gradients there too. The T5 rows "
    "use an untied head, as Google's checkpoints have; the tied_head row checks the tie.",
}

# ------------------------------------------------------------------ the case ------------------


@dataclasses.dataclass
class Case:
    """One HF model, its checkpoint directory and the batches both sides train on."""

    family: str
    size: dict
    hf: object  # the torch model at its initial weights (not trained here)
    ckpt_dir: str
    train: list  # [(chartjax batch, HF kwargs)] per step
    heldout: tuple  # (chartjax batch, HF kwargs, valid target mask)
    # T5 only: the model as transformers 5 builds it, its head tied to `shared` (NOTES tied_t5).
    tied: tuple | None = None  # (torch model, checkpoint directory)


def hf_config(family: str, size: dict, dropout: float):
    import transformers

    s = size
    if family == "pix2struct":
        return transformers.Pix2StructConfig(
            text_config=dict(
                vocab_size=s["vocab"],
                hidden_size=s["hidden"],
                d_kv=s["d_kv"],
                d_ff=s["d_ff"],
                num_layers=s["layers"],
                num_heads=s["heads"],
                dropout_rate=dropout,
            ),
            vision_config=dict(
                hidden_size=s["hidden"],
                patch_embed_hidden_size=s["patch"] ** 2 * 3,
                d_ff=s["d_ff"],
                d_kv=s["d_kv"],
                num_hidden_layers=s["layers"],
                num_attention_heads=s["heads"],
                seq_len=64,
                dropout_rate=dropout,
                # chartjax (as T5X's Pix2Struct) drops attention probabilities at dropout_rate.
                attention_dropout=dropout,
            ),
        )
    return transformers.T5Config(
        vocab_size=s["vocab"],
        d_model=s["hidden"],
        d_kv=s["d_kv"],
        d_ff=s["d_ff"],
        num_layers=s["layers"],
        num_heads=s["heads"],
        feed_forward_proj="gated-gelu",
        tie_word_embeddings=False,
        dropout_rate=dropout,
        decoder_start_token_id=0,
    )


def hf_model(family: str, size: dict, dropout: float = 0.0, *, tied_head: bool = False):
    """A new HF model (random weights). transformers 5 ties every T5's LM head to `shared`
    (NOTES tied_t5); unless `tied_head`, the T5 gets its own head, as T5 v1.1 / Flan-T5
    checkpoints have (HF loads those untied)."""
    import torch

    if family in PREFIX_LM:
        from chartjax.testing import tiny_paligemma

        text = "gemma2" if family == "paligemma2" else "gemma"
        return tiny_paligemma.hf_model(text, seed=int(torch.initial_seed()) % 2**31)
    model = _hf_class(family)(hf_config(family, size, dropout))
    if family == "t5" and not tied_head:
        model.lm_head.weight = torch.nn.Parameter(model.shared.weight.detach().clone())
    return model


def _hf_class(family: str):
    import transformers

    if family == "pix2struct":
        return transformers.Pix2StructForConditionalGeneration
    return transformers.T5ForConditionalGeneration


def _prefix_lm_batch(size: dict, rng: np.random.Generator) -> tuple[dict, dict, np.ndarray]:
    """A PaliGemma batch (NOTES paligemma): (the prefix-LM tasks' text batch with the image,
    HF kwargs with labels, the real positions of HF's sequences)."""
    import torch

    from chartjax.testing import tiny_paligemma as tiny

    b, n, t = size["batch"], tiny.NUM_IMAGE_TOKENS, size["enc_len"] + size["tgt_len"]
    text = {
        k: np.zeros((b, t), np.int32) for k in ("input_ids", "token_type_ids", "attention_mask")
    }
    for i in range(b):
        p = size["enc_len"] if i == 0 else int(rng.integers(3, size["enc_len"] + 1))
        q = size["tgt_len"] if i == 0 else int(rng.integers(2, size["tgt_len"] + 1))
        prefix = [tiny.BOS, *rng.integers(3, tiny.IMAGE_TOKEN, p - 2), tiny.NEWLINE]
        text["input_ids"][i, : p + q] = prefix + [*rng.integers(3, tiny.IMAGE_TOKEN, q - 1), EOS]
        text["token_type_ids"][i, p : p + q] = 1
        text["attention_mask"][i, : p + q] = 1
    pixels = rng.uniform(-1, 1, (b, 3, tiny.IMAGE_SIZE, tiny.IMAGE_SIZE)).astype(np.float32)
    ours = {"image": np.transpose(pixels, (0, 2, 3, 1)), **text}
    ids = np.concatenate([np.full((b, n), tiny.IMAGE_TOKEN, np.int32), text["input_ids"]], 1)
    types = np.concatenate([np.zeros((b, n), np.int32), text["token_type_ids"]], 1)
    valid = np.concatenate([np.ones((b, n), np.int32), text["attention_mask"]], 1)
    hf_in = {
        "pixel_values": torch.tensor(pixels),
        "input_ids": torch.tensor(ids, dtype=torch.long),
        "token_type_ids": torch.tensor(types, dtype=torch.long),
        "attention_mask": torch.tensor(valid, dtype=torch.long),
        "labels": torch.tensor(np.where((types == 1) & (valid == 1), ids, -100), dtype=torch.long),
    }
    return ours, hf_in, valid.astype(bool)


def _batch(family: str, size: dict, rng: np.random.Generator) -> tuple[dict, dict, np.ndarray]:
    """(chartjax batch, HF kwargs, valid targets): every example's encoder input and target
    padded at a random length."""
    import torch

    if family in PREFIX_LM:
        return _prefix_lm_batch(size, rng)
    b, n, t, vocab = size["batch"], size["enc_len"], size["tgt_len"], size["vocab"]
    tgt = rng.integers(2, vocab, (b, t))
    lengths = rng.integers(t // 2, t + 1, b)
    lengths[0] = t  # one full row
    for i, k in enumerate(lengths):
        tgt[i, k - 1] = EOS
        tgt[i, k:] = PAD
    dec_in = np.concatenate([np.zeros((b, 1), np.int64), tgt[:, :-1]], 1)
    valid_enc = np.arange(n)[None] < rng.integers(n // 2, n + 1, b)[:, None]
    valid_enc[0] = True
    if family == "pix2struct":
        pdim = size["patch"] ** 2 * 3
        enc = rng.normal(size=(b, n, 2 + pdim)).astype(np.float32)
        grid = int(np.ceil(np.sqrt(n)))
        enc[:, :, 0] = np.arange(n) // grid + 1
        enc[:, :, 1] = np.arange(n) % grid + 1
        enc[~valid_enc] = 0.0
        hf_in = {"flattened_patches": torch.tensor(enc)}
    else:
        enc = np.where(valid_enc, rng.integers(2, vocab, (b, n)), PAD)
        hf_in = {"input_ids": torch.tensor(enc)}
    hf_in["attention_mask"] = torch.tensor(valid_enc.astype(np.int64))
    ours = {
        "encoder_input_tokens": enc,
        "decoder_input_tokens": dec_in.astype(np.int32),
        "decoder_target_tokens": tgt.astype(np.int32),
    }
    valid = tgt != PAD
    hf_in |= {
        "decoder_input_ids": torch.tensor(dec_in),
        # HF's own default (decoder_input_ids != pad, first position on); chartjax masks by the
        # targets: they differ only at padded positions, which the loss ignores.
        "decoder_attention_mask": torch.tensor((valid | (np.arange(t) == 0)).astype(np.int64)),
        "labels": torch.tensor(np.where(valid, tgt, -100)),
    }
    return ours, hf_in, valid


def make_case(family: str, size: str | dict, steps: int, workdir: str, seed: int = 0) -> Case:
    """`size`: a SIZES name, or such a dict with its learning rates under "lr" (LR)."""
    import torch

    if isinstance(size, str):
        size = SIZES[size] | {"lr": LR[size]}

    torch.manual_seed(seed)
    model = hf_model(family, size, tied_head=True)
    tied = None
    if family == "t5":
        tied = (model, os.path.join(workdir, "t5_tied"))
        model.save_pretrained(tied[1])
        model = hf_model(family, size)
        model.load_state_dict(tied[0].state_dict())
        # A head of its own, drawn as T5X's logits_dense (fan-in normal), so a mix-up shows.
        with torch.no_grad():
            model.lm_head.weight.normal_(0.0, size["hidden"] ** -0.5)
    ckpt = os.path.join(workdir, family)
    model.save_pretrained(ckpt)
    rng = np.random.default_rng(seed)
    train = [_batch(family, size, rng)[:2] for _ in range(steps)]
    return Case(family, size, model, ckpt, train, _batch(family, size, rng), tied)


# ------------------------------------------------------------------ chartjax side -------------


def record_gradients():
    """An optax transformation whose state is the gradient it was last given (no update): the
    real step then hands back its own gradients in `state["opt_state"]`."""
    import jax
    import jax.numpy as jnp
    import optax

    def init(params):
        return jax.tree.map(jnp.zeros_like, params)

    def update(grads, state, params=None):
        return jax.tree.map(jnp.zeros_like, grads), grads

    return optax.GradientTransformation(init, update)


def chartjax_optimizer(name: str, steps: int, lr: dict):
    """(tx, schedule) from chartjax's make_optimizer for an OPTIMIZERS row; `lr` by optimizer."""
    from chartjax import optim

    if name == "record":
        import optax

        return record_gradients(), optax.constant_schedule(0.0)
    if name == "sgd":
        return optim.make_optimizer("sgd", lr=lr["sgd"])
    if name == "adamw":  # runs/adamw_hf_trainer.gin
        sched = optim.schedule(
            peak=lr["adamw"], kind="linear", warmup_steps=ADAMW["warmup"], total_steps=steps
        )
        return optim.make_optimizer(
            "adamw",
            lr=sched,
            b1=0.9,
            b2=0.999,
            eps=1e-8,
            weight_decay=ADAMW["weight_decay"],
            decay_exclude=DECAY_EXCLUDE,
            grad_clip_norm=ADAMW["clip"],
        )
    if name == "adafactor_hf":
        return optim.make_optimizer(
            "adafactor_hf", lr=lr["adafactor_hf"], weight_decay=ADAFACTOR_HF_DECAY
        )
    if name in ("adafactor", "adafactor_t5x_rule"):
        return optim.make_optimizer("adafactor", lr=lr["adafactor"], weight_decay=0.0)
    raise ValueError(f"unknown optimizer row {name!r}")


class ChartjaxRun:
    """chartjax's jitted train step for one (config, optimizer), started from the case's HF
    checkpoint as `chartjax-train` with init/hf.gin starts."""

    def __init__(
        self, case: Case, opt: str, *, dtype="float32", z_loss=0.0, dropout=0.0, ckpt_dir=None
    ):
        import jax
        from flax import nnx

        from chartjax import mesh as mesh_lib
        from chartjax import state as state_lib
        from chartjax import train as train_lib
        from chartjax.interop import hf
        from chartjax.models import paligemma, t5
        from chartjax.models.t5 import pix2struct
        from chartjax.tasks.core import prefix_lm
        from chartjax.tasks.smoke import seq2seq_synthetic

        self.case = case
        ckpt_dir = ckpt_dir or case.ckpt_dir
        cfg = hf.read_config(ckpt_dir)
        self.cfg = dataclasses.replace(cfg, dtype=dtype, z_loss=z_loss, dropout_rate=dropout)
        build = {"pix2struct": pix2struct.build, "t5": t5.build}.get(case.family, paligemma.build)

        def model_fn(rngs: nnx.Rngs):
            return build(self.cfg, rngs)

        self.tx, sched = chartjax_optimizer(opt, len(case.train), case.size["lr"])
        # The loss the seq2seq tasks train with (losses.seq2seq_loss), from a task of the
        # catalog; its data is not used. PaliGemma: the prefix-LM tasks' loss.
        if case.family in PREFIX_LM:
            task = types.SimpleNamespace(loss=prefix_lm.loss)
            self.keys = prefix_lm.MODEL_INPUTS
        else:
            task = seq2seq_synthetic.make_task("patches" if case.family == "pix2struct" else "text")
            self.keys = ("encoder_input_tokens", "decoder_input_tokens", "decoder_target_tokens")
        self.mesh = mesh_lib.make_mesh((1, 1), devices=jax.devices()[:1])
        self.rules = mesh_lib.axis_rules("data_parallel")
        spec, _ = state_lib.create(model_fn, self.tx, self.mesh, self.rules, seed=0)
        self.spec = spec
        self.model_fn = model_fn
        self.initial = self.load(ckpt_dir)
        self.step = jax.jit(
            train_lib.make_train_step(spec.model_def, task, self.tx, sched),
            in_shardings=(spec.shardings, None),
            out_shardings=(spec.shardings, None),
        )

    def load(self, ckpt_dir: str) -> dict:
        """The train state at an HF checkpoint's weights: init_checkpoint.pretrained_state
        without its random init, which the checkpoint replaces (its compile would double a tiny
        run's time): checked parameters placed with the state's shardings, a fresh optimizer."""
        import jax

        from chartjax import init_checkpoint

        spec = self.spec
        params = init_checkpoint.load_params("hf", ckpt_dir, self.model_fn)
        init_checkpoint.check_shapes(params, spec.abstract["params"], ckpt_dir)
        blank = jax.device_put(
            jax.tree.map(lambda a: np.zeros(a.shape, a.dtype), spec.abstract), spec.shardings
        )
        return init_checkpoint.apply(blank, params, self.tx, spec.shardings)

    def run(self, steps: int | None = None, seed: int = 0, initial: dict | None = None) -> dict:
        """losses (and aux) per step, held-out logits, and the state after `steps` updates
        from `initial` (the case's checkpoint); `seed` keys the dropout masks as `train.seed`
        does."""
        import jax

        from chartjax import mesh as mesh_lib
        from chartjax.data import pipeline

        state = dict(initial or self.initial)
        rng = jax.random.key_data(jax.random.key(seed))
        state["rng"] = jax.device_put(rng, self.spec.shardings["rng"])
        keys = self.keys
        out = {"loss": [], "z_loss": []}
        with mesh_lib.activate(self.mesh, self.rules):
            for ours, _ in self.case.train[:steps]:
                batch = pipeline.to_global(ours, self.mesh, self.rules, keys)
                state, metrics = self.step(state, batch)
                out["loss"].append(float(metrics["loss"]))
                out["z_loss"].append(float(metrics["z_loss"]))
            held = pipeline.to_global(self.case.heldout[0], self.mesh, self.rules, keys)
            md = self.spec.model_def
            logits = _forward_jit()(
                md.graphdef, md.rng_state, state["params"], state["model_state"], held
            )
        out["logits"] = np.asarray(logits, np.float32)
        out["state"] = state
        return out

    def hf_named(self, tree) -> dict[str, np.ndarray]:
        """A params-shaped tree (e.g. gradients) under HF's tensor names, in HF's layout."""
        from chartjax.interop import hf, hf_paligemma

        model = self.spec.model_def.merge(tree, self.initial["model_state"])
        if self.case.family in PREFIX_LM:
            return hf_paligemma.to_hf_state_dict(model)
        return hf.to_hf_tensors(model)


def decayed_names(run: ChartjaxRun) -> set[str]:
    """HF names of the parameters chartjax's AdamW decays (the mask make_optimizer builds)."""
    import jax

    from chartjax import optim

    params = run.initial["params"]
    mask = optim._decay_mask(DECAY_EXCLUDE)(params)
    full = jax.tree.map(lambda m, p: np.full(p.shape, m, np.float32), mask, params)
    return {name for name, a in run.hf_named(full).items() if a.all()}


def _forward_fn(graphdef, rng_state, params, model_state, batch):
    from chartjax import state as state_lib

    model = state_lib.ModelDef(graphdef, rng_state).merge(params, model_state)
    if "image" in batch:  # a prefix-LM text batch: the image placeholders go in front
        from chartjax.models import paligemma

        batch = paligemma.with_image_tokens(model.cfg, batch)
    return model(batch, deterministic=True)


@functools.cache
def _forward_jit():
    """Held-out logits, jitted once: one compile per model config (the graph definition)."""
    import jax

    return jax.jit(_forward_fn, static_argnums=0)


# ------------------------------------------------------------------ HF side -------------------


def hf_names(family: str, tensors: dict) -> dict:
    """HF's in-memory parameter names as chartjax's converter writes them (PaliGemma:
    transformers 5's saved names, hf_paligemma.canonical_names)."""
    if family not in PREFIX_LM:
        return tensors
    from chartjax.interop import hf_paligemma

    return hf_paligemma.canonical_names(tensors, "the HF model")


def decay_parameter_names(model) -> set[str]:
    """The parameters HF Trainer decays (it takes no state from the Trainer instance)."""
    import transformers

    return set(transformers.Trainer.get_decay_parameter_names(None, model))


def _t5x_factoring_adafactor():
    """HF's Adafactor with T5X's factoring rule (two largest dimensions both >= 128), the one
    place where it and optax.adafactor differ with weight decay 0 (NOTES)."""
    from transformers.optimization import Adafactor

    class T5XFactoring(Adafactor):
        @staticmethod
        def _get_options(param_group, param_shape):
            factored = len(param_shape) >= 2 and sorted(param_shape)[-2] >= 128
            return factored, param_group["beta1"] is not None

    return T5XFactoring


def torch_optimizer(name: str, model, steps: int, lr: dict):
    """(optimizer, scheduler or None, clip norm or None): HF's counterpart of an OPTIMIZERS row."""
    import torch
    import transformers
    from transformers.optimization import Adafactor

    params = list(model.parameters())
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr["sgd"]), None, None
    if name == "adamw":
        decay = decay_parameter_names(model)
        named = list(model.named_parameters())
        groups = [
            {"params": [p for n, p in named if n in decay], "weight_decay": ADAMW["weight_decay"]},
            {"params": [p for n, p in named if n not in decay], "weight_decay": 0.0},
        ]
        opt = torch.optim.AdamW(groups, lr=lr["adamw"], betas=(0.9, 0.999), eps=1e-8)
        sched = transformers.get_linear_schedule_with_warmup(opt, ADAMW["warmup"], steps)
        return opt, sched, ADAMW["clip"]
    kw = dict(relative_step=False, warmup_init=False)
    if name == "adafactor_hf":
        opt = Adafactor(
            params,
            lr=lr["adafactor_hf"],
            scale_parameter=False,
            weight_decay=ADAFACTOR_HF_DECAY,
            **kw,
        )
        return opt, None, None
    if name == "adafactor":
        return Adafactor(params, lr=lr["adafactor"], scale_parameter=True, **kw), None, None
    if name == "adafactor_t5x_rule":
        cls = _t5x_factoring_adafactor()
        return cls(params, lr=lr["adafactor"], scale_parameter=True, **kw), None, None
    raise ValueError(f"unknown optimizer row {name!r}")


def hf_run(
    case: Case,
    opt: str,
    *,
    steps=None,
    dropout=0.0,
    seed=0,
    autocast=False,
    grads=False,
    tied_head=False,
) -> dict:
    """HF's training loop on the case's batches: losses per step, held-out logits, and the
    first step's gradients (`grads`); `tied_head`: the T5 as transformers builds it."""
    import torch

    model = hf_model(case.family, case.size, dropout, tied_head=tied_head)
    model.load_state_dict((case.tied[0] if tied_head else case.hf).state_dict())
    batches = case.train[:steps]
    optimizer, sched, clip = torch_optimizer(opt, model, len(case.train), case.size["lr"])
    torch.manual_seed(seed)
    model.train()
    out = {"loss": []}
    for k, (_, hf_in) in enumerate(batches):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(**hf_in).loss
        loss.backward()
        if grads and k == 0:
            out["grads"] = hf_names(
                case.family,
                {n: p.grad.detach().numpy().copy() for n, p in model.named_parameters()},
            )
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        if sched is not None:
            sched.step()
        optimizer.zero_grad()
        out["loss"].append(loss.item())
    model.eval()
    with torch.no_grad():
        out["logits"] = model(**case.heldout[1]).logits.float().numpy()
    return out


# ------------------------------------------------------------------ comparisons ---------------

GROUPS = (
    # SigLIP's key bias: zero gradient in exact arithmetic (a softmax does not see a shift that
    # is the same for every key), so only its max_abs says anything (NOTES key_bias).
    ("key_bias", r"k_proj\.bias"),
    ("relpos_bias", r"relative_attention_bias"),
    ("norms", r"norm"),
    ("lm_head", r"lm_head"),
    ("embeddings", r"embed|shared|embedder|patch_projection"),
    ("attention", r"attention|self_attn|\.(q|k|v|o)\.weight"),
    ("projector", r"multi_modal_projector"),
    ("mlp", r"mlp|DenseReluDense|\.wi|\.wo"),
)


def group_of(name: str) -> str:
    for group, pattern in GROUPS:
        if re.search(pattern, name):
            return group
    return "other"


def errors(ours: np.ndarray, ref: np.ndarray) -> dict:
    """max |ours - ref| and that over max |ref|."""
    diff = float(np.max(np.abs(np.asarray(ours, np.float64) - ref))) if np.size(ref) else 0.0
    scale = float(np.max(np.abs(ref))) if np.size(ref) else 0.0
    return {"max_abs": diff, "max_rel": diff / scale if scale else diff}


def compare_gradients(ours: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> dict:
    """Per group: the worst parameter's errors, and how many parameters; every HF parameter
    must have a chartjax gradient."""
    missing = sorted(set(ref) - set(ours))
    if missing:
        raise KeyError(f"no chartjax gradient for HF parameters {missing}")
    out: dict[str, dict] = {}
    for name, g in ref.items():
        e = errors(ours[name], g)
        row = out.setdefault(group_of(name), {"max_abs": 0.0, "max_rel": 0.0, "n": 0})
        row["n"] += 1
        if e["max_rel"] >= row["max_rel"]:
            row["worst"] = name
        row["max_abs"] = max(row["max_abs"], e["max_abs"])
        row["max_rel"] = max(row["max_rel"], e["max_rel"])
    return out


def compare_runs(ours: dict, ref: dict, valid: np.ndarray) -> dict:
    """Loss per step (max over steps) and held-out logits at the valid target positions."""
    loss = errors(np.asarray(ours["loss"]), np.asarray(ref["loss"]))
    logits = errors(ours["logits"][valid], ref["logits"][valid])
    return {
        "loss": loss,
        "logits": logits,
        "first_loss": ref["loss"][0],
        "last_loss": [ours["loss"][-1], ref["loss"][-1]],
    }


def two_sample(a, b) -> dict:
    """Welch's t (means), Mann-Whitney U (distributions) and Brown-Forsythe (spread) p-values."""
    from scipy import stats

    return {
        "mean": [float(np.mean(a)), float(np.mean(b))],
        "std": [float(np.std(a, ddof=1)), float(np.std(b, ddof=1))],
        "welch_p": float(stats.ttest_ind(a, b, equal_var=False).pvalue),
        "mann_whitney_p": float(stats.mannwhitneyu(a, b).pvalue),
        "brown_forsythe_p": float(stats.levene(a, b, center="median").pvalue),
    }


# ------------------------------------------------------------------ rows ----------------------


def first_gradients(run: ChartjaxRun, initial: dict | None = None) -> tuple[dict, list]:
    """(chartjax's gradients of the first step under HF names, its loss)."""
    ours = run.run(steps=1, initial=initial)
    return run.hf_named(ours["state"]["opt_state"]), ours


def gradient_row(case: Case, z_loss: float = 0.0) -> dict:
    run = ChartjaxRun(case, "record", z_loss=z_loss)
    grads, ours = first_gradients(run)
    ref = hf_run(case, "sgd", steps=1, grads=True)
    row = {"groups": compare_gradients(grads, ref["grads"])}
    row["loss"] = errors(np.asarray(ours["loss"]), np.asarray(ref["loss"]))
    if case.tied is not None and not z_loss:
        row["tied_head"] = tied_head_row(case)
    if z_loss:
        # The loss exceeds HF's cross-entropy by exactly the z-loss term the step logs.
        row["loss_minus_z_term"] = errors(
            np.asarray(ours["loss"]) - np.asarray(ours["z_loss"]), np.asarray(ref["loss"])
        )
        row["z_term"] = ours["z_loss"][0]
    return row


def tied_head_row(case: Case) -> dict:
    """The T5 as transformers 5 builds it (NOTES tied_t5): its head tied to `shared`, not
    rescaled. chartjax reads that checkpoint tied the same way (hf.head_from_weights), so the
    first step's gradients equal HF's, the one tied tensor's included (read as an untied copy,
    as before, chartjax's `shared` got only the embeddings' share of HF's gradient)."""
    run = ChartjaxRun(case, "record", ckpt_dir=case.tied[1])
    grads, _ = first_gradients(run)
    ref = hf_run(case, "sgd", steps=1, grads=True, tied_head=True)["grads"]
    return {
        "config": {
            "logits_via_embedding": run.cfg.logits_via_embedding,
            "scale_decoder_outputs": run.cfg.scale_decoder_outputs,
        },
        "hf_names": sorted(n for n in ref if "shared" in n or "lm_head" in n),
        "chartjax_names": sorted(n for n in grads if "shared" in n or "lm_head" in n),
        "groups": compare_gradients(grads, ref),
        "shared_vs_hf": errors(grads["shared.weight"], ref["shared.weight"]),
    }


def chartjax_opt(opt: str) -> str:
    """The chartjax optimizer of a row: both T5X rows run chartjax's `adafactor`."""
    return "adafactor" if opt == "adafactor_t5x_rule" else opt


def optimizer_row(case: Case, opt: str, *, z_loss=0.0, ours=None, ref=None) -> dict:
    ours = ours or ChartjaxRun(case, chartjax_opt(opt), z_loss=z_loss).run()
    ref = ref or hf_run(case, opt)
    row = compare_runs(ours, ref, case.heldout[2])
    if z_loss:
        z = np.asarray(ours["z_loss"])
        # HF's loss is the cross-entropy alone: chartjax's exceeds it by the logged z-loss term
        # at the first step (same weights); after that the z-loss has moved the weights.
        row["first_loss_minus_z_term"] = errors(ours["loss"][0] - z[0], ref["loss"][0])
        row["z_term"] = [float(z[0]), float(z[-1])]
    return row


def decay_row(run: ChartjaxRun, model) -> dict:
    """Which parameters AdamW decays: chartjax's mask against HF Trainer's names."""
    # Trainer's list also names tied aliases (T5's encoder/decoder.embed_tokens = shared).
    ref = decay_parameter_names(model) & {name for name, _ in model.named_parameters()}
    ref = set(hf_names(run.case.family, dict.fromkeys(ref)))
    ours = decayed_names(run)
    return {"n": len(ref), "chartjax_only": sorted(ours - ref), "hf_only": sorted(ref - ours)}


def dropout_row(
    case: Case, seeds: int, opt: str = "adamw", rate: float = DROPOUT, steps: int | None = None
) -> dict:
    """`seeds` runs a side of the first `steps` updates with dropout at `rate`."""
    run = ChartjaxRun(case, opt, dropout=rate)
    ours = np.array([run.run(steps, seed=s)["loss"] for s in range(seeds)])
    ref = [hf_run(case, opt, steps=steps, dropout=rate, seed=s)["loss"] for s in range(seeds)]
    ref = np.array(ref)
    off = np.asarray(hf_run(case, opt, steps=steps)["loss"])
    from scipy import stats

    per_step = [
        float(stats.ttest_ind(ours[:, k], ref[:, k], equal_var=False).pvalue)
        for k in range(ours.shape[1])
    ]
    return {
        "rate": rate,
        "seeds": seeds,
        # True when train.seed / the step do not reach the dropout masks (state.reseeded).
        "chartjax_same_loss_every_seed": bool(np.ptp(ours, axis=0).max() == 0),
        "run_mean_loss": two_sample(ours.mean(1), ref.mean(1)),
        "per_step_welch_min_p_bonferroni": min(1.0, min(per_step) * len(per_step)),
        # The size of what dropout does, against which the two sides' difference is small.
        "dropout_effect_on_mean_loss": float(ref.mean() - off.mean()),
        "mean_loss_difference": float(ours.mean() - ref.mean()),
    }


def bf16_row(case: Case, opt: str = "adamw", hf_fp32=None) -> dict:
    ours = ChartjaxRun(case, opt, dtype="bfloat16").run()
    ref = hf_fp32 or hf_run(case, opt)
    auto = hf_run(case, opt, autocast=True)
    valid = case.heldout[2]
    return {
        "vs_hf_fp32": compare_runs(ours, ref, valid),
        "hf_autocast_bf16_vs_hf_fp32": compare_runs(auto, ref, valid),
        "vs_hf_autocast_bf16": compare_runs(ours, auto, valid),
    }


def family_report(case: Case, seeds: int, optimizers=OPTIMIZERS, progress=None) -> dict:
    tick = progress or (lambda row: None)
    out: dict = {}
    t0 = time.perf_counter()
    out["gradients"] = gradient_row(case)
    tick({"family": case.family, "row": "gradients", "s": round(time.perf_counter() - t0, 1)})
    refs, ours = {}, {}
    out["optimizers"] = {}
    for opt in optimizers:
        key = chartjax_opt(opt)
        if key not in ours:
            run = ChartjaxRun(case, key)
            ours[key] = run.run()
        refs[opt] = hf_run(case, opt)
        out["optimizers"][opt] = optimizer_row(case, opt, ours=ours[key], ref=refs[opt])
        if opt == "adamw":
            out["optimizers"][opt]["decayed"] = decay_row(run, case.hf)
        tick({"family": case.family, "row": opt, "s": round(time.perf_counter() - t0, 1)})
    out["z_loss"] = {
        "first_step": gradient_row(case, z_loss=Z_LOSS),
        "adamw": optimizer_row(case, "adamw", z_loss=Z_LOSS, ref=refs.get("adamw")),
    }
    tick({"family": case.family, "row": "z_loss", "s": round(time.perf_counter() - t0, 1)})
    if seeds and case.family not in PREFIX_LM:  # NOTES paligemma
        out["dropout"] = dropout_row(case, seeds)
        tick({"family": case.family, "row": "dropout", "s": round(time.perf_counter() - t0, 1)})
    out["bf16"] = bf16_row(case, hf_fp32=refs.get("adamw"))
    tick({"family": case.family, "row": "bf16", "s": round(time.perf_counter() - t0, 1)})
    return out


def table(results: dict) -> list[dict]:
    """The parity table: one row per (family, quantity, optimizer, dtype)."""
    rows = []
    for fam, r in results.items():
        for group, e in r["gradients"]["groups"].items():
            rows.append(_row(fam, f"grad {group}", "-", "float32", e))
        for opt, e in r["optimizers"].items():
            rows.append(_row(fam, "loss (every step)", opt, "float32", e["loss"]))
            rows.append(_row(fam, "held-out logits", opt, "float32", e["logits"]))
        tied = r["gradients"].get("tied_head")
        if tied:
            e = tied["shared_vs_hf"]
            rows.append(_row(fam, "grad shared, head tied unscaled (HF 5)", "-", "float32", e))
        z = r["z_loss"]
        rows.append(_row(fam, "loss, z_loss 1e-4", "adamw", "float32", z["adamw"]["loss"]))
        b = r["bf16"]["vs_hf_fp32"]
        rows.append(_row(fam, "loss (every step)", "adamw", "bf16 vs HF fp32", b["loss"]))
        rows.append(_row(fam, "held-out logits", "adamw", "bf16 vs HF fp32", b["logits"]))
    return rows


def _row(family, quantity, opt, dtype, e) -> dict:
    return {
        "family": family,
        "quantity": quantity,
        "optimizer": opt,
        "dtype": dtype,
        "max_abs": float(f"{e['max_abs']:.3g}"),
        "max_rel": float(f"{e['max_rel']:.3g}"),
    }


# ------------------------------------------------------------------ main ----------------------


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", choices=sorted(SIZES), default="base")
    p.add_argument("--families", nargs="+", choices=ALL_FAMILIES, default=list(ALL_FAMILIES))
    p.add_argument("--steps", type=int, default=20, help="optimizer steps per run")
    p.add_argument("--seeds", type=int, default=8, help="dropout runs a side (0: none)")
    p.add_argument("--vocab", type=int, help="vocabulary size (default: the size's)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: its default)")
    harness.add_out_flag(p)
    return p.parse_args(argv)


def main(argv=None) -> dict:
    a = parse_args(argv)
    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    size = SIZES[a.size] | {"lr": LR[a.size]} | ({"vocab": a.vocab} if a.vocab else {})
    run = harness.Run("training_parity", vars(a) | {"shape": size}, LIBS)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for fam in a.families:
            case = make_case(fam, size, a.steps, tmp)
            results[fam] = family_report(case, a.seeds, progress=harness.progress)
    dropout = {f: r["dropout"] for f, r in results.items() if "dropout" in r}
    report = {
        "table": table(results),
        "dropout": dropout,
        "notes": NOTES,
        "families": results,
    }
    return harness.emit(run.report(report), a.out)


if __name__ == "__main__":
    main()
