"""PaliGemma 1 (Gemma) and PaliGemma 2 (Gemma 2) against HF transformers on tiny random models
that transformers builds and saves itself (chartjax/testing/tiny_paligemma.py): chartjax loads
the saved folder and its fp32 logits match HF's eager forward within 1e-5 on image + prefix +
suffix inputs (a Gemma 2 sliding window of 4 tokens, shorter than the 29-token sequences, so the
local layers differ from the global ones; one row right-padded); the suffix-only loss equals
HF's loss with the prefix labels ignored; the load goes through the HF dispatch
(`hf.read_config` / `hf.load`, as `hf_model_config` and `chartjax-infer` use it), accepts the
Hub's older tensor names and refuses a tensor it does not use, naming it."""

import os
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402

from chartjax.interop import hf, hf_files, hf_paligemma  # noqa: E402
from chartjax.models import paligemma  # noqa: E402
from chartjax.testing import tiny_paligemma as tp  # noqa: E402

TEXTS = ("gemma", "gemma2")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """text family -> (saved HF folder, HF logits, HF suffix-only loss) on `tp.inputs()`."""
    root = tmp_path_factory.mktemp("paligemma")
    inputs = tp.inputs()
    pt = {k: torch.from_numpy(v).long() for k, v in inputs.items() if k != "pixel_values"}
    pt["pixel_values"] = torch.from_numpy(inputs["pixel_values"])
    labels = pt["input_ids"].masked_fill(
        (pt["token_type_ids"] == 0) | (pt["attention_mask"] == 0), -100
    )
    out = {}
    for i, text in enumerate(TEXTS):
        model = tp.hf_model(text, seed=i)
        path = str(root / text)
        model.save_pretrained(path)
        with torch.no_grad():
            res = model(**pt, labels=labels)
        out[text] = (path, res.logits.numpy(), float(res.loss))
    return out


@nnx.jit
def _logits_and_loss(model, batch):
    loss, _ = paligemma.prefix_lm_loss(model, batch, deterministic=True)
    return model(batch, deterministic=True), loss


def _forward(model, inputs):
    logits, loss = _logits_and_loss(model, jax.tree.map(jnp.asarray, tp.chartjax_batch(inputs)))
    return np.asarray(logits), float(loss)


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.slow
def test_logits_and_loss_match_hf(text, folders):
    path, ref, ref_loss = folders[text]
    cfg = hf.read_config(path)  # the dispatch `hf_model_config` and `chartjax-infer` use
    assert isinstance(cfg, paligemma.PaliGemmaConfig) and cfg.version == TEXTS.index(text) + 1
    if text == "gemma2":
        assert cfg.sliding_window == 4 and cfg.layer_types[:2] == (
            "sliding_attention",
            "full_attention",
        )
    model, _ = hf.load(path)
    inputs = tp.inputs()
    got, loss = _forward(model, inputs)
    valid = inputs["attention_mask"].astype(bool)
    diff = float(np.abs(got - ref)[valid].max())
    print(f"{text}: max |logits - HF| = {diff:.2e} (max |logit| {np.abs(ref).max():.2f})")
    assert diff <= 1e-5
    assert abs(loss - ref_loss) <= 1e-5 * max(1.0, abs(ref_loss))


def test_hub_names_load_and_unused_tensors_are_refused(folders, tmp_path):
    from safetensors.numpy import load_file, save_file

    src, ref, _ = folders["gemma"]
    tensors = load_file(os.path.join(src, "model.safetensors"))
    # transformers 4's Hub layout: `vision_tower.vision_model.*` and a stored (tied) lm_head.
    old = {
        k.replace("vision_tower.", "vision_tower.vision_model.", 1): v for k, v in tensors.items()
    }
    old["language_model.lm_head.weight"] = tensors["language_model.model.embed_tokens.weight"]
    hub = shutil.copytree(src, tmp_path / "hub")
    save_file(old, str(hub / "model.safetensors"), metadata={"format": "pt"})
    model, _ = hf_paligemma.load(str(hub))
    got, _ = _forward(model, tp.inputs())
    valid = tp.inputs()["attention_mask"].astype(bool)
    assert np.abs(got - ref)[valid].max() <= 1e-5

    extra = dict(tensors, **{"language_model.model.layers.2.mlp.up_proj.weight": np.zeros((2, 2))})
    save_file(extra, str(hub / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(hf_files.WeightsMismatch, match="unused: language_model.model.layers.2"):
        hf_paligemma.load(str(hub))
