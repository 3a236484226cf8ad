"""`chartjax-convert` reads and writes the HF layouts of DeBERTa-v2/v3, TAPAS and BART
(chartjax/interop/hf.py dispatching to hf_{deberta,tapas,bart}.py): HF (safetensors) -> chartjax
-> HF (safetensors) -> HF (pytorch_model.bin) gives back every tensor bit for bit and the same
config.json (label names included); the tokenizer files travel along; HF transformers loads the
outputs; a T5X output is refused for these families; unsupported config fields are refused
naming the field."""

import json
import os

import numpy as np
import pytest

from chartjax.interop import formats, hf
from chartjax.testing import tiny_hf
from chartjax.tools import convert_checkpoint

# Its fixtures build and compile models (or train a run) for every test: the whole file is slow.
pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

FAMILIES = ("deberta", "tapas", "bart")
TOKENIZER = {"deberta": ["spm.model"], "tapas": ["vocab.txt"], "bart": ["merges.txt", "vocab.json"]}
HF_CLASS = {
    "deberta": "DebertaV2ForSequenceClassification",
    "tapas": "TapasForSequenceClassification",
    "bart": "BartForConditionalGeneration",
}


@pytest.fixture(scope="module")
def ckpts(tiny_hf_checkpoints, tmp_path_factory):
    import shutil

    out = {f: tiny_hf_checkpoints[f] for f in FAMILIES}
    out["bart"] = str(shutil.copytree(out["bart"], tmp_path_factory.mktemp("bart") / "bart"))
    # BART's final_logits_bias is a buffer, not a parameter: make it non-zero to see it kept.
    from safetensors.numpy import load_file, save_file

    st = os.path.join(out["bart"], "model.safetensors")
    tensors = load_file(st)
    tensors["final_logits_bias"] = (
        np.random.default_rng(0).normal(size=tensors["final_logits_bias"].shape).astype(np.float32)
    )
    save_file(tensors, st, metadata={"format": "pt"})
    return out


def _tensors(path):
    from chartjax.interop import hf_name_map

    return hf_name_map.read_tensors(path)


def _convert(capsys, *argv):
    convert_checkpoint.main([str(a) for a in argv])
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.parametrize("family", FAMILIES)
def test_hf_chartjax_hf_bin_round_trip_is_exact(family, ckpts, tmp_path, capsys):
    src = ckpts[family]
    cj, back, binary = tmp_path / "cj", tmp_path / "hf", tmp_path / "bin"
    out = _convert(capsys, "--from", "hf", "--to", "chartjax", src, cj)
    assert out["params"] > 0
    _convert(capsys, "--from", "chartjax", "--to", "hf", cj, back)
    _convert(capsys, "--from", "hf", "--to", "hf", "--pytorch_bin", back, binary)
    assert (binary / "pytorch_model.bin").is_file() and not (binary / "model.safetensors").exists()
    ref = _tensors(src)
    for d in (back, binary):
        got = _tensors(str(d))
        assert sorted(got) == sorted(ref)
        for k in ref:
            assert got[k].dtype == ref[k].dtype and np.array_equal(got[k], ref[k]), k
        with open(os.path.join(src, "config.json")) as f, open(d / "config.json") as g:
            assert json.load(g) == json.load(f)
        for name in TOKENIZER[family]:
            assert (d / name).read_bytes() == open(os.path.join(src, name), "rb").read()
    labels = formats.read_labels(formats.locate(str(cj)))
    assert labels == (tiny_hf.LABELS.get(family) if family != "bart" else None)
    # HF loads the .bin output strictly, into the same tensors.
    model = getattr(transformers, HF_CLASS[family]).from_pretrained(str(binary))
    sd = {k: v.numpy() for k, v in model.state_dict().items() if k in ref}
    assert all(np.array_equal(sd[k], ref[k]) for k in sd) and len(sd) >= len(ref) - 1
    if family == "bart":
        assert np.abs(ref["final_logits_bias"]).sum() > 0


def test_t5x_output_is_refused_for_encoder_families(ckpts, tmp_path, capsys):
    with pytest.raises(SystemExit):
        convert_checkpoint.main(
            ["--from", "hf", "--to", "t5x", ckpts["tapas"], str(tmp_path / "o")]
        )
    assert "T5X checkpoints hold T5 / Pix2Struct" in capsys.readouterr().err


@pytest.mark.parametrize(
    "family,field,value",
    [
        ("deberta", "pos_att_type", ["c2p", "p2p"]),
        ("deberta", "norm_rel_ebd", "batch_norm"),
        ("deberta", "attention_head_size", 5),
        ("tapas", "is_decoder", True),
        ("tapas", "hidden_act", "gelu_fast"),
        ("bart", "normalize_before", True),
        ("bart", "activation_function", "mish"),
        ("bart", "decoder_layerdrop", 0.1),
    ],
)
def test_unsupported_fields_are_refused_naming_them(family, field, value, ckpts, tmp_path):
    import shutil

    d = shutil.copytree(ckpts[family], tmp_path / family)
    cfg = json.loads((d / "config.json").read_text())
    cfg[field] = value
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=f"{field}="):
        formats.read_config(formats.locate(str(d)))
    with pytest.raises(ValueError, match=f"{field}="):
        hf.load(str(d))
