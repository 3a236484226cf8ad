"""The T5 head as transformers 5 builds it (hf._t5_head, hf.head_from_weights).

HF 5 ties every T5's `lm_head` to `shared` unless the weights hold a different head, and keeps
the d_model**-0.5 rescale apart (`scale_decoder_outputs`). A T5 it trains from scratch is
therefore tied and not rescaled, which chartjax once read as an untied copy: equal logits, but
training moved two tensors where HF moves one (tests/interop/test_training_parity.py checks the
gradients). Here: the config rules, loading what HF 5 saves, writing it back, and T5X's
untied equivalent.
"""

import numpy as np
import pytest
from flax import nnx

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from chartjax.interop import hf, t5x  # noqa: E402
from chartjax.models import t5  # noqa: E402
from chartjax.models.model_configs import T5Config  # noqa: E402

# Its fixtures build and compile models (or train a run) for every test: the whole file is slow.
pytestmark = pytest.mark.slow

SIZES = dict(
    vocab_size=40,
    d_model=16,
    d_kv=4,
    d_ff=24,
    num_layers=1,
    num_heads=2,
    feed_forward_proj="gated-gelu",
    dropout_rate=0.0,
    decoder_start_token_id=0,
)


@pytest.mark.parametrize(
    "fields, tied, scale",
    [
        ({}, True, None),  # T5 1.0 (HF 4's default): tied and rescaled
        ({"tie_word_embeddings": True}, True, None),
        ({"tie_word_embeddings": False}, False, None),  # T5 v1.1, Flan-T5
        ({"tie_word_embeddings": True, "scale_decoder_outputs": False}, True, False),  # HF 5
        ({"tie_word_embeddings": False, "scale_decoder_outputs": True}, False, True),
        ({"tie_word_embeddings": False, "scale_decoder_outputs": False}, False, None),
    ],
)
def test_config_alone(fields, tied, scale):
    raw = {"model_type": "t5", "num_layers": 1, **SIZES, **fields}
    cfg = hf.config_from_hf(raw)
    assert (cfg.logits_via_embedding, cfg.scale_decoder_outputs) == (tied, scale)
    # chartjax's own config.json says the same to chartjax and to HF 5.
    back = hf.config_to_hf(cfg)
    assert hf.config_from_hf(back) == cfg
    hf5 = transformers.T5Config.from_dict(back)
    assert hf5.scale_decoder_outputs == (tied if scale is None else scale)


def _hf_t5(kind: str):
    """A T5 as transformers 5 builds it: `tied` from scratch; `untied` with a head of its own
    (as HF loads Flan-T5); `untied_scaled` that head and the rescale."""
    torch.manual_seed(0)
    extra = {"scale_decoder_outputs": True} if kind == "untied_scaled" else {}
    model = transformers.T5ForConditionalGeneration(
        transformers.T5Config(tie_word_embeddings=False, **SIZES, **extra)
    ).eval()
    # What this file is about: HF 5 ties a head whatever tie_word_embeddings says.
    assert model.lm_head.weight is model.shared.weight
    if kind != "tied":
        model.lm_head.weight = torch.nn.Parameter(torch.randn(40, 16) * 0.3)
    return model


def _logits_hf(model, enc, dec):
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(enc),
            attention_mask=torch.ones(enc.shape, dtype=torch.bool),
            decoder_input_ids=torch.tensor(dec),
        )
    return out.logits.numpy()


def _logits_ours(model, enc, dec):
    batch = {
        "encoder_input_tokens": enc,
        "decoder_input_tokens": dec,
        "decoder_target_tokens": np.full_like(dec, 2),  # no padding: every position counts
    }
    return np.asarray(model(batch, deterministic=True))


@pytest.mark.parametrize(
    "kind, head",
    [("tied", (True, False)), ("untied", (False, None)), ("untied_scaled", (False, True))],
)
def test_hf5_save_loads_as_hf5_built_it(tmp_path, kind, head):
    ref = _hf_t5(kind)
    ref.save_pretrained(tmp_path / "hf")
    model, cfg = hf.load(str(tmp_path / "hf"))
    assert (cfg.logits_via_embedding, cfg.scale_decoder_outputs) == head
    assert hf.read_config(str(tmp_path / "hf")) == cfg  # without reading every weight
    assert (model.decoder.logits_dense is None) == (kind == "tied")
    rng = np.random.default_rng(0)
    enc, dec = rng.integers(2, 40, (2, 7)), rng.integers(2, 40, (2, 5))
    dec[:, 0] = 0
    want = _logits_hf(ref, enc, dec)
    np.testing.assert_allclose(_logits_ours(model, enc, dec), want, atol=1e-5)

    # Back to HF: the same model, tied exactly when it was.
    hf.save(model, str(tmp_path / "back"))
    again = transformers.T5ForConditionalGeneration.from_pretrained(str(tmp_path / "back"))
    assert (again.lm_head.weight is again.shared.weight) == (kind == "tied")
    np.testing.assert_allclose(_logits_hf(again.eval(), enc, dec), want, atol=1e-5)


def test_untied_head_equal_to_shared_is_tied(tmp_path):
    """HF 5 ties a stored head equal to `shared` (it warns only when they differ)."""
    ref = _hf_t5("untied")
    ref.lm_head.weight = torch.nn.Parameter(ref.shared.weight.detach().clone())
    ref.save_pretrained(tmp_path)
    cfg = hf.read_config(str(tmp_path))
    assert (cfg.logits_via_embedding, cfg.scale_decoder_outputs) == (True, False)
    again = transformers.T5ForConditionalGeneration.from_pretrained(str(tmp_path))
    assert again.lm_head.weight is again.shared.weight


@pytest.mark.parametrize("tied, scale", [(True, False), (False, True)])
def test_t5x_gets_an_untied_head_with_the_same_logits(tmp_path, tied, scale):
    """T5X rescales exactly when tied: either other head is written as the untied head that
    gives the same logits, and the writer says the tie is lost."""
    cfg = T5Config(
        vocab_size=40,
        emb_dim=16,
        num_heads=2,
        head_dim=4,
        mlp_dim=24,
        num_encoder_layers=1,
        num_decoder_layers=1,
        logits_via_embedding=tied,
        scale_decoder_outputs=scale,
        dtype="float32",
    )
    model = t5.build(cfg, nnx.Rngs(0))
    with pytest.warns(UserWarning, match="T5X has no head"):
        t5x.save(model, str(tmp_path / "ckpt"))
    back, back_cfg, _ = t5x.load(str(tmp_path / "ckpt"))
    assert (back_cfg.logits_via_embedding, back_cfg.scale_decoder_outputs) == (False, None)
    rng = np.random.default_rng(0)
    enc, dec = rng.integers(2, 40, (2, 7)), rng.integers(2, 40, (2, 5))
    np.testing.assert_allclose(
        _logits_ours(back, enc, dec), _logits_ours(model, enc, dec), rtol=1e-5, atol=1e-6
    )
