"""Packed batches (chartjax/data/packing.py) against their examples run one by one: T5, BART and
Pix2Struct give the same logits per real token (fp32, ~1e-5), the same loss sum and token
count, and no attention crosses a segment."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from chartjax.data import packing, patches
from chartjax.models import losses, t5, tiny
from chartjax.models.post_ln import bart
from chartjax.models.t5 import pix2struct

ENC, DEC = 24, 12  # the task's fixed lengths (rows have the same)
RTOL = ATOL = 2e-5
# One layer a stack: the segment masks and positions enter every layer alike.
ONE = {"num_encoder_layers": 1, "num_decoder_layers": 1}


def _text_examples(seed, n, pad_id, start_id, eos_id, lo=2):
    """Featurized-like text examples: tokens then EOS, padded at the end as seq2seq makes them."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        e, d = int(rng.integers(2, 10)), int(rng.integers(2, 6))
        enc = np.full(ENC, pad_id, np.int32)
        enc[:e] = rng.integers(lo, 100, e)
        enc[e - 1] = eos_id
        tgt = np.full(DEC, pad_id, np.int32)
        tgt[:d] = rng.integers(lo, 100, d)
        tgt[d - 1] = eos_id
        inp = np.full(DEC, pad_id, np.int32)
        inp[0] = start_id
        inp[1:d] = tgt[: d - 1]
        ex = {"encoder_input_tokens": enc, "decoder_target_tokens": tgt}
        out.append({**ex, "decoder_input_tokens": inp})
    return out


def _image_examples(seed, n, max_patches, patch):
    """Charts of mixed aspect ratios through the real patchifier, with short targets."""
    rng = np.random.default_rng(seed)
    shapes = [(12, 40), (40, 12), (20, 20), (8, 60), (30, 16)]
    texts = _text_examples(seed, n, 0, 0, 1)
    out = []
    for i in range(n):
        h, w = shapes[i % len(shapes)]
        img = rng.integers(0, 256, (h, w, 3)).astype(np.uint8)
        enc = patches.preprocess_image(img, max_patches, (patch, patch), max_position_id=64)
        out.append({**texts[i], "encoder_input_tokens": enc})
    return out


def _stack(rows):
    return {k: jnp.asarray(np.stack([r[k] for r in rows])) for k in rows[0]}


@functools.partial(jax.jit, static_argnums=0)
def _logits(graphdef, state, batch):
    return nnx.merge(graphdef, state)(batch, deterministic=True)


@functools.partial(jax.jit, static_argnums=0)
def _loss(graphdef, state, batch):
    loss, aux = losses.seq2seq_loss(nnx.merge(graphdef, state), batch, deterministic=True)
    return loss, aux["num_tokens"]


def _check_packed_equals_single(model, examples, spec):
    rows = list(packing.pack(examples, spec))
    assert len(rows) < len(examples)  # several examples share a row
    graphdef, state = nnx.split(model)
    packed = _stack(rows)
    packed_logits = np.asarray(_logits(graphdef, state, packed))
    single = _stack(examples)
    single_logits = np.asarray(_logits(graphdef, state, single))
    seen = 0
    order = [
        i
        for idx in packing.first_fit(
            [packing.example_lengths(e, spec) for e in examples],
            (spec.encoder_len, spec.decoder_len),
            spec.max_open_rows,
        )
        for i in idx
    ]
    for r, row in enumerate(rows):
        for seg in range(1, row["decoder_segment_ids"].max() + 1):
            ex = order[seen]
            seen += 1
            at = np.flatnonzero(row["decoder_segment_ids"] == seg)
            np.testing.assert_allclose(
                packed_logits[r, at], single_logits[ex, : len(at)], rtol=RTOL, atol=ATOL
            )
    assert seen == len(examples)
    loss_p, n_p = _loss(graphdef, state, packed)
    loss_s, n_s = _loss(graphdef, state, single)
    assert float(n_p) == float(n_s)
    np.testing.assert_allclose(float(loss_p) * float(n_p), float(loss_s) * float(n_s), rtol=1e-5)
    return graphdef, state, rows, packed_logits


def _check_segments_isolated(graphdef, state, rows, packed_logits, key, spec):
    """Perturb segment 1's encoder inputs and decoder tokens: the other segments' logits stay."""
    row = {k: np.array(v) for k, v in rows[0].items()}
    assert row["decoder_segment_ids"].max() >= 2
    enc_seg, dec_seg = row["encoder_segment_ids"] == 1, row["decoder_segment_ids"] == 1
    if spec.image:
        row[key][enc_seg, 2:] += 3.0
    else:
        row[key][enc_seg & (row[key] > 2)] += 5
    row["decoder_input_tokens"][dec_seg & (row["decoder_input_tokens"] > 2)] += 7
    batch = _stack([row] + [{k: np.asarray(v) for k, v in r.items()} for r in rows[1:]])
    out = np.asarray(_logits(graphdef, state, batch))[0]
    others = row["decoder_segment_ids"] > 1
    np.testing.assert_allclose(out[others], packed_logits[0][others], rtol=RTOL, atol=ATOL)
    assert not np.allclose(out[dec_seg], packed_logits[0][dec_seg], atol=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("impl", ["dot_product", "einsum"])
def test_t5_packed_equals_one_by_one(impl):
    model = t5.build(tiny.tiny_t5(attention_impl=impl, **ONE), 0)
    spec = packing.PackSpec(ENC, DEC, pad_id=0, max_open_rows=2)
    examples = _text_examples(0, 7, pad_id=0, start_id=0, eos_id=1)
    out = _check_packed_equals_single(model, examples, spec)
    _check_segments_isolated(*out, "encoder_input_tokens", spec)


def _tiny_bart(impl="dot_product"):
    cfg = bart.BartConfig(
        vocab_size=128,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        dropout=0.0,
        dtype="float32",
        attention_impl=impl,
    )
    return bart.build(cfg, 0)


@pytest.mark.slow
def test_bart_packed_equals_one_by_one():
    model = _tiny_bart()  # T5 checks both attention paths; the masks are built alike
    # BART pads with 1 and starts the decoder with 2; its targets may hold 0 (<s>).
    spec = packing.PackSpec(ENC, DEC, pad_id=1, max_open_rows=2)
    examples = _text_examples(1, 7, pad_id=1, start_id=2, eos_id=2, lo=3)
    for ex in examples:
        ex["decoder_target_tokens"][0] = 0  # <s> is a real target token
        ex["decoder_input_tokens"][1] = 0
    out = _check_packed_equals_single(model, examples, spec)
    _check_segments_isolated(*out, "encoder_input_tokens", spec)


@pytest.mark.slow
def test_pix2struct_packed_equals_one_by_one():
    cfg = tiny.tiny_pix2struct(**ONE)
    model = pix2struct.build(cfg, 0)
    # Charts of 16 patches at most, packed into rows of 48 (several charts per row).
    examples = _image_examples(2, 6, max_patches=16, patch=cfg.patch_size)
    spec = packing.PackSpec(48, 3 * DEC, image=True, max_open_rows=2)
    rows = list(packing.pack(examples, spec))
    # Row/col ids stay each chart's own; padding patches are stripped.
    for row in rows:
        real = row["encoder_segment_ids"] > 0
        assert (row["encoder_input_tokens"][real, 0] > 0).all()
        assert (row["encoder_input_tokens"][~real] == 0).all()
    padded = [
        {
            **ex,
            "encoder_input_tokens": np.pad(ex["encoder_input_tokens"], ((0, 32), (0, 0))),
            **{k: np.pad(ex[k], (0, 2 * DEC)) for k in packing.DECODER_KEYS},
        }
        for ex in examples
    ]
    out = _check_packed_equals_single(model, padded, spec)
    _check_segments_isolated(*out, "encoder_input_tokens", spec)


@pytest.mark.slow
def test_unpacked_batch_unchanged_by_segment_ids_of_one_example():
    """A row holding one example with segment ids 1 computes what the plain batch computes."""
    model = t5.build(tiny.tiny_t5(**ONE), 0)
    spec = packing.PackSpec(ENC, DEC, max_open_rows=1)
    examples = _text_examples(3, 2, pad_id=0, start_id=0, eos_id=1)
    rows = [packing.pack_row([ex], spec) for ex in examples]
    graphdef, state = nnx.split(model)
    a = np.asarray(_logits(graphdef, state, _stack(rows)))
    b = np.asarray(_logits(graphdef, state, _stack(examples)))
    valid = np.stack([r["decoder_segment_ids"] > 0 for r in rows])
    np.testing.assert_allclose(a[valid], b[valid], rtol=RTOL, atol=ATOL)


@pytest.mark.slow
@pytest.mark.multi_device
def test_packed_train_steps_sharded_equal_single_device():
    """Packed rows through the real train step and pipeline: segment features are sharded with
    the batch, and 8 data-parallel devices give the single-device losses and parameters."""
    import dataclasses

    from chartjax.tasks.smoke import seq2seq_synthetic
    from tests.step_equivalence import assert_same, run_steps

    task = seq2seq_synthetic.make_task(modality="text", input_len=8, target_len=3)
    spec = packing.PackSpec(24, 12, max_open_rows=4)  # 3 examples of 8 + 4 tokens per row

    def pack(examples):
        return packing.pack(({k: v for k, v in e.items() if k != "id"} for e in examples), spec)

    task = dataclasses.replace(
        task, pack=pack, model_inputs=task.model_inputs + packing.PACKED_KEYS
    )

    def fn(rngs):
        return t5.build(tiny.tiny_t5(**ONE), rngs)

    kw = {"batch_size": 8, "optimizer": ("adafactor", 1e-2)}
    one = run_steps(fn, task, jax.devices()[:1], (1, 1), "data_parallel", **kw)
    eight = run_steps(fn, task, jax.devices(), (8, 1), "data_parallel", **kw)
    assert_same(eight, one)
    assert all(np.isfinite(one[0]))
