"""The first-fit packer (chartjax/data/packing.py) and its place in the training pipeline."""

import dataclasses

import numpy as np
import pytest

from chartjax.data import packing, pipeline
from chartjax.tasks.core import seq2seq
from chartjax.tasks.core.task import Task

ENC, DEC = 32, 16


def _example(i, rng, pad_id=0):
    e, d = int(rng.integers(1, ENC + 1)), int(rng.integers(1, DEC + 1))
    enc = np.full(ENC, pad_id, np.int32)
    enc[:e] = 1000 * (i + 1) + np.arange(e)  # tokens name their example and place
    tgt = np.full(DEC, pad_id, np.int32)
    tgt[:d] = 1000 * (i + 1) + 500 + np.arange(d)
    inp = np.full(DEC, pad_id, np.int32)
    inp[0] = 7  # the decoder start id
    inp[1:d] = tgt[: d - 1]
    return {"encoder_input_tokens": enc, "decoder_target_tokens": tgt, "decoder_input_tokens": inp}


def _examples(n, seed=0, pad_id=0):
    rng = np.random.default_rng(seed)
    return [_example(i, rng, pad_id) for i in range(n)]


def _segments(row, side, key):
    """{segment id: the tokens of `key` in that segment} of one packed row."""
    seg = row[f"{side}_segment_ids"]
    return {s: row[key][seg == s] for s in range(1, seg.max() + 1)}


@pytest.mark.parametrize("pad_id", [0, 1])
def test_no_example_lost_or_split_and_segments_well_formed(pad_id):
    examples = _examples(200, pad_id=pad_id)
    spec = packing.PackSpec(ENC, DEC, pad_id=pad_id, max_open_rows=4)
    rows = list(packing.pack(examples, spec))
    assert len(rows) < len(examples)
    got = []
    for row in rows:
        for side, n in (("encoder", ENC), ("decoder", DEC)):
            seg, pos = row[f"{side}_segment_ids"], row[f"{side}_positions"]
            assert seg.shape == pos.shape == (n,)
            used = np.flatnonzero(seg)
            # Contiguous segments 1, 2, ... from the start, then padding (0) only.
            assert (used == np.arange(len(used))).all()
            assert (np.diff(seg[: len(used)]) >= 0).all() and seg[0] == 1
            for s in range(1, seg.max() + 1):
                assert (pos[seg == s] == np.arange((seg == s).sum())).all()  # restart at 0
            assert (pos[len(used) :] == 0).all()
        assert (row["encoder_input_tokens"][row["encoder_segment_ids"] == 0] == pad_id).all()
        assert (row["decoder_target_tokens"][row["decoder_segment_ids"] == 0] == pad_id).all()
        enc = _segments(row, "encoder", "encoder_input_tokens")
        tgt = _segments(row, "decoder", "decoder_target_tokens")
        inp = _segments(row, "decoder", "decoder_input_tokens")
        assert enc.keys() == tgt.keys()
        for s in enc:
            i = enc[s][0] // 1000 - 1  # the example this segment came from
            ex = examples[i]
            e, d = (
                (ex["encoder_input_tokens"] != pad_id).sum(),
                (ex["decoder_target_tokens"] != pad_id).sum(),
            )
            np.testing.assert_array_equal(enc[s], ex["encoder_input_tokens"][:e])
            np.testing.assert_array_equal(tgt[s], ex["decoder_target_tokens"][:d])
            # Shifted per segment: each segment's decoder input starts with the start id.
            np.testing.assert_array_equal(inp[s], ex["decoder_input_tokens"][:d])
            assert inp[s][0] == 7
            got.append(i)
    assert sorted(got) == list(range(len(examples)))  # each example exactly once


def test_deterministic_and_first_fit_order():
    examples = _examples(100, seed=3)
    spec = packing.PackSpec(ENC, DEC, max_open_rows=3)
    a = list(packing.pack(examples, spec))
    b = list(packing.pack((dict(e) for e in examples), spec))
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])
    # First fit: with one open row the packer fills rows in stream order.
    bins = list(packing.first_fit([(10, 4), (10, 4), (20, 4), (5, 1)], (32, 16), 1))
    assert bins == [[0, 1], [2, 3]]
    bins = list(packing.first_fit([(10, 4), (25, 4), (20, 4), (5, 1)], (32, 16), 2))
    assert bins == [[0, 2], [1, 3]]
    with pytest.raises(ValueError, match="exceeds"):
        list(packing.first_fit([(33, 1)], (32, 16), 2))


def test_packing_reduces_padding_and_counts_examples():
    examples = _examples(64, seed=1)
    rows = list(packing.pack(examples, packing.PackSpec(ENC, DEC)))
    batch = next(packing.rebatch(iter(rows), len(rows)))
    assert packing.num_examples(batch) == 64
    unpacked = np.mean([(e["encoder_input_tokens"] != 0).mean() for e in examples])
    assert batch["encoder_segment_ids"].astype(bool).mean() > 1.3 * unpacked


def test_image_patches_strip_padding_and_keep_ids():
    rng = np.random.default_rng(0)
    examples = []
    for i, n in enumerate([5, 9, 3, 12, 7]):
        p = np.zeros((16, 2 + 6), np.float32)
        p[:n, 0], p[:n, 1] = 1 + np.arange(n) // 3, 1 + np.arange(n) % 3
        p[:n, 2:] = rng.normal(size=(n, 6))
        examples.append({**_example(i, rng), "encoder_input_tokens": p})
    spec = packing.PackSpec(24, 48, image=True, max_open_rows=2)
    rows = list(packing.pack(examples, spec))
    total = sum((r["encoder_segment_ids"] > 0).sum() for r in rows)
    assert total == 5 + 9 + 3 + 12 + 7
    for row in rows:
        real = row["encoder_segment_ids"] > 0
        assert (row["encoder_input_tokens"][real, 0] > 0).all()  # 1-based row ids kept
        assert (row["encoder_input_tokens"][~real] == 0).all()


class _Source:
    def __init__(self, examples):
        self.examples = examples

    def train_examples(self, *, seed, start_step, local_batch_size, process_index, process_count):
        return iter(self.examples[start_step * local_batch_size :])


def _task(examples, pack):
    spec = packing.PackSpec(ENC, DEC, max_open_rows=4)
    return Task(
        name="t",
        source=_Source(examples),
        features=lambda keep_host: dict,
        loss=None,
        predict=None,
        evaluate=None,
        model_inputs=(),
        pack=(lambda ex: packing.pack(ex, spec)) if pack else None,
    )


def test_train_batches_count_rows_when_packed(monkeypatch):
    monkeypatch.setenv("CHARTJAX_LOADER_WORKERS", "0")
    examples = _examples(96, seed=2)
    plain = list(pipeline.train_batches(_task(examples, False), 8, 0, 0, 0, 1))
    assert len(plain) == 12 and "encoder_segment_ids" not in plain[0]
    packed = list(pipeline.train_batches(_task(examples, True), 8, 0, 0, 0, 1))
    assert 0 < len(packed) < len(plain)
    assert all(b["decoder_segment_ids"].shape == (8, DEC) for b in packed)
    assert sum(packing.num_examples(b) for b in packed) <= 96


def test_features_pack_is_off_by_default():
    assert seq2seq.Features(vocab_file="x").pack_spec(0) is None
    spec = dataclasses.replace(
        seq2seq.Features(vocab_file="x", modality="text", pack=True), max_input_len=64
    ).pack_spec(1)
    assert (spec.encoder_len, spec.decoder_len, spec.pad_id, spec.image) == (64, 128, 1, False)
    spec = seq2seq.Features(vocab_file="x", pack=True, pack_encoder_len=4096).pack_spec(0)
    assert (spec.encoder_len, spec.image) == (4096, True)


def test_a_task_that_does_not_pack_refuses_features_pack(tmp_path):
    """`Features.pack = True` with a task whose examples do not go through seq2seq.Features
    (here the RN's synthetic task; chart_to_text_records alike) is refused before anything is
    written, rather than training unpacked."""
    import gin

    from chartjax import config as config_lib
    from chartjax import train as train_lib
    from chartjax.config_checks import ConfigError

    gin.clear_config()
    config_lib.parse_gin(["tasks/synthetic_rn.gin"], ["Features.pack = True"])
    try:
        with pytest.raises(ConfigError, match="Features.pack = True: synthetic does not pack"):
            train_lib.train(str(tmp_path / "run"))
    finally:
        gin.clear_config()
    assert not (tmp_path / "run").exists()
