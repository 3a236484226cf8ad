"""chartjax's PaliGemma processor (chartjax/data/paligemma_inputs.py) against transformers'
`PaliGemmaProcessor` on the tiny PaliGemma and PaliGemma 2 folders that transformers saves with
its processor (chartjax/testing/tiny_paligemma.py): prompt tokens identical (input_ids,
token_type_ids, attention_mask, labels; one by one and left-padded as a batch) through
tokenizer.json and, in a copy without it, through tokenizer.model (the processor pickled, as
chartjax-infer's loader workers get it); decoded text identical; pixels
of every image mode within 1e-6 of the PIL backend (they are bit-equal); a bare Gemma tokenizer
gets `<image>` and the loc/seg tokens at the ids the processor gives them."""

import os
import pickle
import shutil

import numpy as np
import pytest

pytest.importorskip("transformers")

from PIL import Image  # noqa: E402

from chartjax.data import paligemma_inputs as pi  # noqa: E402
from chartjax.testing import tiny_paligemma as tp  # noqa: E402
from tests.data import tokenizer_texts  # noqa: E402

TEXTS = ("gemma", "gemma2")
PREFIXES = [
    *tokenizer_texts.CLAIMS,
    "What is the value of the blue bar in 2019?",
    "answer en How many categories are above 50%?\n",
    "<image>caption en",  # HF's explicit form: the same input as "caption en"
    "<loc0012><loc1023> detect bar ; <seg007>",
    "a<eos>b <bos> c <pad>",  # special tokens written in the text are matched, as HF does
    "émoji 🙂 and tabs\t\t",
]
SUFFIXES = [None, "3.5 million", "", "Größe café 日本 −3.2 ½", "<loc0001> yes"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """text family -> (folder with tokenizer.json, a copy with tokenizer.model only, HF's
    processor of the folder)."""
    from transformers import PaliGemmaProcessor

    root = tmp_path_factory.mktemp("pg_inputs")
    out = {}
    for i, text in enumerate(TEXTS):
        path = tp.write(str(root / text), text, seed=i, processor=True)
        spm = root / f"{text}_spm"
        spm.mkdir()
        for name in ("tokenizer.model", "tokenizer_config.json", "processor_config.json"):
            shutil.copy(os.path.join(path, name), spm / name)
        out[text] = (path, str(spm), PaliGemmaProcessor.from_pretrained(path))
    return out


def _mine(path):
    return pi.Processor.from_dir(path, image_size=tp.IMAGE_SIZE, num_image_tokens=16)


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("files", ["tokenizer.json", "tokenizer.model"])
def test_prompt_tokens_equal_the_processors(text, files, folders):
    path, spm, hf = folders[text]
    # As chartjax-infer's spawned loader workers receive it.
    mine = pickle.loads(pickle.dumps(_mine(path if files == "tokenizer.json" else spm)))
    reads = type(mine.tokenizer).__name__
    assert reads == ("JsonTokenizer" if files == "tokenizer.json" else "SentencePieceTokenizer")
    assert mine.image_token_id == tp.PROCESSOR_IMAGE_TOKEN and len(mine.tokenizer) == len(
        hf.tokenizer
    )
    image = Image.new("RGB", (20, 12), (30, 60, 90))
    n = 0
    for prefix in PREFIXES:
        for suffix in SUFFIXES:
            ref = hf(images=image, text=prefix, suffix=suffix, return_tensors="np")
            got = mine.prompt(prefix, suffix)
            assert sorted(got) == sorted(k for k in ref if k != "pixel_values")
            for key, value in got.items():
                assert value.tolist() == ref[key][0].tolist(), (key, prefix, suffix)
            n += 1
    # A batch, padded on the left as HF's GemmaTokenizer pads.
    prefixes, suffixes = PREFIXES[:4], SUFFIXES[1:5]
    ref = hf(
        images=[image] * 4, text=prefixes, suffix=suffixes, padding="longest", return_tensors="np"
    )
    got = mine.pad([mine.prompt(p, s) for p, s in zip(prefixes, suffixes)])
    for key, value in got.items():
        np.testing.assert_array_equal(value, ref[key])
    print(f"{text} via {files}: {n} prompts, token ids identical")


@pytest.mark.parametrize("files", ["tokenizer.json", "tokenizer.model"])
def test_decoded_text_equals_hfs(files, folders):
    path, spm, hf = folders["gemma"]
    mine = _mine(path if files == "tokenizer.json" else spm)
    rng = np.random.default_rng(0)
    for _ in range(20):  # random ids: pieces, bytes, specials, <image>, loc / seg tokens
        ids = rng.integers(0, len(hf.tokenizer), 12).tolist()
        ids = [i for i in ids if i != mine.eos_id]  # decode() stops at the first EOS
        assert mine.decode(ids) == hf.tokenizer.decode(ids, skip_special_tokens=True)
    ids = hf.tokenizer.encode("Größe\n 12", add_special_tokens=False)
    assert mine.decode([*ids, mine.eos_id, 300]) == "Größe\n 12"  # cut at EOS


def _images():
    rng = np.random.default_rng(1)
    rgba = rng.integers(0, 256, (37, 53, 4), dtype=np.uint8)
    rgba[:10, :, 3], rgba[10:20, :, 3] = 0, 128  # transparent and half-transparent rows
    return {
        "RGB": Image.fromarray(rgba[..., :3]),
        "RGBA": Image.fromarray(rgba, "RGBA"),
        "L": Image.fromarray(rgba[..., 0]),
        "P": Image.fromarray(rgba[..., :3]).convert("P"),
        "LA": Image.fromarray(rgba[..., :2], "LA"),
        "large": Image.fromarray(rng.integers(0, 256, (300, 451, 3), dtype=np.uint8)),
        "uint8 array": rgba[..., :3],
    }


@pytest.mark.parametrize("size", [tp.IMAGE_SIZE, 224])
def test_pixels_within_1e6_of_the_pil_backend(size, folders):
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    if size == tp.IMAGE_SIZE:  # the folder's own processor_config.json
        hf = folders["gemma2"][2].image_processor
        settings = _mine(folders["gemma2"][0]).images
    else:
        kw = {"resample": 3, "image_mean": [0.5] * 3, "image_std": [0.5] * 3}
        hf = SiglipImageProcessorPil(size={"height": size, "width": size}, **kw)
        settings = pi.ImageSettings(size=(size, size))
    assert type(hf).__name__ == "SiglipImageProcessorPil"
    worst = 0.0
    for name, image in _images().items():
        ref = hf(image, return_tensors="np")["pixel_values"][0].transpose(1, 2, 0)
        got = pi.pixels(image, settings)
        assert got.shape == ref.shape == (size, size, 3) and got.dtype == np.float32, name
        worst = max(worst, float(np.abs(got - ref).max()))
    print(f"{size}x{size}: max |pixels - HF PIL backend| = {worst:.1e}")
    assert worst <= 1e-6


def test_a_bare_gemma_tokenizer_gets_the_processors_tokens(folders, tmp_path):
    """A tokenizer.json saved without the processor (no `<image>`, no loc/seg tokens): they
    are added where PaliGemmaProcessor adds them."""
    from transformers import GemmaTokenizer, PaliGemmaProcessor

    path, _, hf = folders["gemma"]
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(os.path.join(path, "tokenizer.model"), bare / "tokenizer.model")
    GemmaTokenizer.from_pretrained(str(bare)).save_pretrained(str(bare))
    tok = pi.open_tokenizer(str(bare))
    assert type(tok).__name__ == "JsonTokenizer" and tok.id_of(pi.IMAGE) is not None
    ref = PaliGemmaProcessor(hf.image_processor, GemmaTokenizer.from_pretrained(str(bare)))
    assert tok.id_of(pi.IMAGE) == ref.image_token_id == tp.PROCESSOR_IMAGE_TOKEN
    image = Image.new("RGB", (8, 8))
    prefix = "find <loc0005><seg127> here"
    mine = pi.Processor.from_dir(str(bare), image_size=16, num_image_tokens=16, processor_dir=path)
    got = mine.prompt(prefix)["input_ids"].tolist()
    assert got == ref(images=image, text=prefix, return_tensors="np")["input_ids"][0].tolist()


def test_refusals_name_the_cause(folders, tmp_path):
    path, _, _ = folders["gemma"]
    mine = _mine(path)
    with pytest.raises(ValueError, match="one image per example"):
        mine.prompt("two <image> images")
    with pytest.raises(ValueError, match=r"resized to \(16, 16\), the model's are 224x224"):
        pi.Processor.from_dir(path, image_size=224, num_image_tokens=256)
    with pytest.raises(FileNotFoundError, match="no tokenizer.json or tokenizer.model"):
        pi.open_tokenizer(str(tmp_path))
