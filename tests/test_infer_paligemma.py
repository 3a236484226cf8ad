"""PaliGemma and PaliGemma 2 through `chartjax.load(...).predict` and `chartjax-infer`, against
HF transformers' `generate` on the tiny folders transformers saves with its processor
(chartjax/testing/tiny_paligemma.py): the same greedy texts (both families, four prompts each,
the rows of a batch padded on the left); a chartjax-written export predicts the same; the
settings map to the decoding chartjax/models/paligemma/decoding.py runs (whose beam search and
sampling tests/models/test_paligemma_generate.py holds to HF's), and what does not apply is
refused."""

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from PIL import Image  # noqa: E402

import chartjax  # noqa: E402
from chartjax.inference import paligemma_features  # noqa: E402
from chartjax.inference.inputs import InputError  # noqa: E402
from chartjax.inference.settings import Settings, resolve  # noqa: E402
from chartjax.testing import tiny_paligemma as tp  # noqa: E402
from chartjax.tools import infer as infer_cli  # noqa: E402

# Its fixtures build and compile models (or train a run) for every test: the whole file is slow.
pytestmark = pytest.mark.slow

TEXTS = ("gemma", "gemma2")
QUESTIONS = [
    "What is the value of the blue bar in 2019?",
    "How many categories are above 50%?",
    "caption en",
    "Which year had the highest revenue?",
]
NEW = 10  # new tokens
SETTINGS = {"max_decode_len": NEW, "max_input_len": 40}  # the longest prompt: 33 tokens


@pytest.fixture(scope="module")
def charts(tmp_path_factory):
    """Four chart images (PNG files) of different sizes."""
    root = tmp_path_factory.mktemp("pg_charts")
    rng = np.random.default_rng(3)
    paths = []
    for i, (h, w) in enumerate([(24, 20), (16, 16), (40, 64), (30, 18)]):
        paths.append(str(root / f"c{i}.png"))
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(paths[-1])
    return paths


@pytest.fixture(scope="module")
def folders(tmp_path_factory, charts):
    """text family -> (folder, HF's greedy texts of QUESTIONS on the charts)."""
    from transformers import PaliGemmaForConditionalGeneration, PaliGemmaProcessor

    root = tmp_path_factory.mktemp("pg_infer")
    out = {}
    for i, text in enumerate(TEXTS):
        path = tp.write(str(root / text), text, seed=i, processor=True)
        model = PaliGemmaForConditionalGeneration.from_pretrained(
            path, attn_implementation="eager"
        ).eval()
        proc = PaliGemmaProcessor.from_pretrained(path)
        out[text] = (path, [_hf_generate(model, proc, c, q) for c, q in zip(charts, QUESTIONS)])
    return out


def _hf_generate(model, proc, chart, question, **kw):
    x = proc(images=Image.open(chart), text=question, return_tensors="pt")
    with torch.no_grad():
        ids = model.generate(**x, max_new_tokens=NEW, do_sample=False, **kw)
    return proc.decode(ids[0, x["input_ids"].shape[1] :], skip_special_tokens=True)


@pytest.mark.parametrize("text", TEXTS)
def test_predict_equals_hf_generate_greedy(text, folders, charts):
    path, ref = folders[text]
    model = chartjax.load(path, dtype="float32")
    assert model.task == "chartqa" and type(model.config).__name__ == "PaliGemmaConfig"
    got = model.predict(
        [{"image": c, "question": q} for c, q in zip(charts, QUESTIONS)], **SETTINGS
    )
    print(f"{text}: {got}")
    assert got == ref
    assert all(len(set(t)) > 3 for t in got) and len(set(got)) == len(got)  # varied outputs


def test_chartjax_infer_and_an_export_equal_hf(folders, charts, tmp_path, capsys):
    from chartjax.tools import convert_checkpoint

    path, ref = folders["gemma"]
    export = str(tmp_path / "export")
    convert_checkpoint.main(["--from", "hf", "--to", "hf", path, export])
    rows = tmp_path / "inputs.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "image": c, "question": q}) + "\n"
            for i, (c, q) in enumerate(zip(charts, QUESTIONS))
        )
    )
    for ckpt in (path, export):
        out = str(tmp_path / f"out_{os.path.basename(ckpt)}")
        args = ["--task", "chartqa", "--checkpoint", ckpt, "--inputs", rows, "--out", out]
        args += ["--dtype", "float32", "--batch_size", "3"]
        args += [f"--{k}={v}" for k, v in SETTINGS.items()]
        infer_cli.main([str(a) for a in args])
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert summary["examples"] == 4 and summary["truncated_inputs"] == 0
        with open(os.path.join(out, "predictions.jsonl"), encoding="utf-8") as f:
            got = [json.loads(line) for line in f]
        assert [r["id"] for r in got] == ["q0", "q1", "q2", "q3"]
        assert [r["prediction"] for r in got] == ref


def _resolved(**given):
    return resolve(Settings(**given), {}, "")


def test_settings_map_to_generate_and_the_rest_is_refused():
    assert paligemma_features.decoding(_resolved(max_decode_len=7)) == {
        "max_new_tokens": 7,
        "method": "greedy",
        "num_beams": 1,
        "temperature": 1.0,
        "top_k": 0,
        "top_p": 1.0,
        "rng": 0,
    }
    assert paligemma_features.decoding(_resolved(beam_size=4))["num_beams"] == 4
    sample = paligemma_features.decoding(_resolved(temperature=0.7, top_k=5, top_p=0.9, seed=3))
    assert (sample["method"], sample["temperature"], sample["top_k"]) == ("sample", 0.7, 5)
    assert (sample["top_p"], sample["rng"]) == (0.9, 3)
    for given, why in (
        ({"alpha": 0.6}, "alpha"),
        ({"beam_size": 2, "temperature": 1.0}, "exclude each other"),
        ({"top_k": 3}, "give temperature > 0"),
    ):
        with pytest.raises(InputError, match=why):
            paligemma_features.decoding(_resolved(**given))
    with pytest.raises(InputError, match="top_p must be a number in"):
        Settings(top_p=0.0)


def test_a_prompt_the_model_cannot_take_is_refused(folders, charts):
    model = chartjax.load(folders["gemma"][0], dtype="float32")
    with pytest.raises(InputError, match="one image per example"):
        model.predict({"image": charts[0], "question": "a <image> in the middle"})
    with pytest.raises(InputError, match="PaliGemma only"):
        from chartjax.inference.features import refuse_sampling

        refuse_sampling(_resolved(temperature=0.5), "Pix2StructConfig")
