"""PaliGemma / PaliGemma 2 written back as HF folders (chartjax/interop/hf_paligemma.py `save`,
through `hf.save` and `chartjax-convert`): transformers' `PaliGemmaForConditionalGeneration`
loads the export with no missing or unexpected tensor and gives logits identical (bit for bit) to
the original folder's; `chartjax-convert --from hf --to hf` (and through chartjax's own format)
carries the tokenizer and processor files, so HF's `PaliGemmaProcessor` reads the output alone;
`init/hf.gin`'s loader (init_checkpoint.load_weights "hf") takes every parameter of a folder into
a model built from `hf_model_config`."""

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from chartjax import init_checkpoint  # noqa: E402
from chartjax.interop import hf, saved_gin  # noqa: E402
from chartjax.models import configurables  # noqa: E402
from chartjax.testing import tiny_paligemma as tp  # noqa: E402
from chartjax.tools import convert_checkpoint  # noqa: E402

TEXTS = ("gemma", "gemma2")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("pg_export")
    return {t: tp.write(str(root / t), t, seed=i, processor=True) for i, t in enumerate(TEXTS)}


def _hf_logits(path: str):
    """HF's model of `path` (and what it reported loading) -> its logits on the processor's
    inputs of two prompts with suffixes, and those inputs."""
    from PIL import Image
    from transformers import PaliGemmaForConditionalGeneration, PaliGemmaProcessor

    model, info = PaliGemmaForConditionalGeneration.from_pretrained(
        path, attn_implementation="eager", output_loading_info=True
    )
    proc = PaliGemmaProcessor.from_pretrained(path)
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (21, 17, 3), dtype=np.uint8)) for _ in "ab"]
    inputs = proc(
        images=images,
        text=["What is the value of the blue bar in 2019?", "caption en"],
        suffix=["3.5 million", "A bar chart of sales."],
        padding="longest",
        return_tensors="pt",
    )
    with torch.no_grad():
        logits = model.eval()(**{k: v for k, v in inputs.items() if k != "labels"}).logits
    return logits.numpy(), info, {k: v.numpy() for k, v in inputs.items()}


@pytest.mark.parametrize("text", TEXTS)
def test_hf_reads_the_export_with_identical_logits(text, folders, tmp_path):
    src = folders[text]
    ref, _, ref_inputs = _hf_logits(src)
    model, cfg = hf.load(src)
    out = str(tmp_path / "export")
    hf.save(model, out)
    assert sorted(os.listdir(out)) == ["config.json", "generation_config.json", "model.safetensors"]
    assert len(list(hf.hf_names(model))) == len(set(hf.hf_names(model)))
    got, info, _ = _hf_logits_with(out, src)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    print(f"{text}: export max |logits - original| = {float(np.abs(got - ref).max()):.1e}")
    np.testing.assert_array_equal(got, ref)
    assert hf.read_config(out) == cfg  # and chartjax reads it back as the same model


def _hf_logits_with(path: str, processor_from: str):
    """`_hf_logits` of a weights-only export, the processor files taken from the source."""
    import shutil

    for name in ("tokenizer.json", "tokenizer_config.json", "processor_config.json"):
        shutil.copy(os.path.join(processor_from, name), os.path.join(path, name))
    return _hf_logits(path)


def test_convert_carries_the_processor_files(folders, tmp_path, capsys):
    src = folders["gemma2"]
    ref, _, ref_inputs = _hf_logits(src)
    mid, out = str(tmp_path / "cj"), str(tmp_path / "hf")
    convert_checkpoint.main(["--from", "hf", "--to", "chartjax", src, mid])
    convert_checkpoint.main(["--from", "chartjax", "--to", "hf", mid, out])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["family"] == "PaliGemma"
    for name in ("tokenizer.json", "tokenizer.model", "tokenizer_config.json"):
        assert name in report["files"]
    assert "processor_config.json" in report["files"]
    got, info, inputs = _hf_logits(out)  # HF's processor and model read the output alone
    assert not info["missing_keys"] and not info["unexpected_keys"]
    for key, value in ref_inputs.items():
        np.testing.assert_array_equal(inputs[key], value)
    np.testing.assert_array_equal(got, ref)


def test_init_hf_gin_takes_every_parameter(folders):
    """What `train.init_format = "hf"` does (init_checkpoint.pretrained_state): the folder's
    parameters, shaped as the model `hf_model_config` describes."""
    import jax
    from flax import nnx
    from safetensors.numpy import load_file

    src = folders["gemma"]
    cfg = saved_gin.hf_model_config(src, dtype="float32")
    model_fn = lambda rngs: configurables.build_model(cfg, rngs)  # noqa: E731
    params, buffers = init_checkpoint.load_weights("hf", src, model_fn)
    abstract = nnx.to_pure_dict(nnx.state(nnx.eval_shape(lambda: model_fn(nnx.Rngs(0))), nnx.Param))
    init_checkpoint.check_shapes(params, abstract, src)
    assert not jax.tree.leaves(buffers)
    tensors = load_file(os.path.join(src, "model.safetensors"))
    np.testing.assert_array_equal(
        params["decoder"]["embedder"]["embedding"],
        tensors["language_model.model.embed_tokens.weight"],
    )
    n = sum(x.size for x in jax.tree.leaves(params))
    assert n == sum(v.size for v in tensors.values())  # every tensor, no more
