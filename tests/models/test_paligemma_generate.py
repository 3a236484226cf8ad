"""PaliGemma decoding (models/paligemma/decoding.py) against HF transformers' `generate` on tiny
random PaliGemma 1 (Gemma, multi-query) and PaliGemma 2 (Gemma 2: grouped-query, a sliding
window of 4 tokens, far shorter than the 19-28 token prompts plus 12 new tokens, and small
soft-caps) models that transformers builds and saves itself (chartjax/testing/tiny_paligemma.py),
loaded through `hf_paligemma.load`.

Ten prompts of different lengths (image tokens, `<bos>`, 1-10 text tokens, `\\n`); HF decodes
them left-padded (its GemmaTokenizer's side, the only one its decoder-only `generate` supports)
with `token_type_ids` 0 over the prompt, as PaliGemmaProcessor returns them; chartjax decodes the
same batch right- and left-padded. The weights' scales and seeds are chosen so that the greedy
outputs vary along each row, several rows end with EOS, and no step's top-2 logits lie within
3e-4 of each other (far above the ~5e-6 logit error). Checked: greedy equal token for token
(10/10 per family), beam search (3 beams, HF's default length penalty and early stopping) equal
in tokens and in HF's `sequences_scores`, the cached decoding equal to an uncached decoding
by full forwards, sampling with top_k=1 or a temperature near 0 equal to greedy, and the
decoding over an 8-device data-parallel mesh equal to the single-device one.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402

from chartjax import sharding  # noqa: E402
from chartjax.interop import hf_paligemma  # noqa: E402
from chartjax.mesh import axis_rules, make_mesh  # noqa: E402
from chartjax.models.paligemma import decoding as pgd  # noqa: E402
from chartjax.testing import tiny_paligemma as tp  # noqa: E402

# Its fixtures build and compile models (or train a run) for every test: the whole file is slow.
pytestmark = pytest.mark.slow

TEXTS = ("gemma", "gemma2")
# (seed, weight std) per family: varied greedy outputs with EOS in some rows (see the docstring).
MODELS = {"gemma": (3, 0.4), "gemma2": (2, 0.12)}
N_NEW = 12
EOS, PAD = 1, 0


def prompts(n: int = 10, seed: int = 0):
    """`n` prompts of 1-10 text tokens, left- and right-padded to one length."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        text = rng.integers(3, tp.IMAGE_TOKEN, int(rng.integers(1, 11)))
        rows.append([tp.IMAGE_TOKEN] * tp.NUM_IMAGE_TOKENS + [tp.BOS, *text, tp.NEWLINE])
    t = max(map(len, rows))
    left, right = np.zeros((2, n, t), np.int32), np.zeros((2, n, t), np.int32)
    for i, r in enumerate(rows):
        left[0, i, t - len(r) :], left[1, i, t - len(r) :] = r, 1
        right[0, i, : len(r)], right[1, i, : len(r)] = r, 1
    pixels = rng.uniform(-1, 1, (n, 3, tp.IMAGE_SIZE, tp.IMAGE_SIZE)).astype(np.float32)
    return pixels, tuple(left), tuple(right), rows


def _hf_generate(hf, pixels, ids, mask, **kw):
    """HF's new tokens, padded with PAD to N_NEW (HF crops at the longest)."""
    ids = torch.from_numpy(ids).long()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: more threads only wait on each other
    try:
        with torch.no_grad():
            out = hf.generate(
                pixel_values=torch.from_numpy(pixels),
                input_ids=ids,
                attention_mask=torch.from_numpy(mask).long(),
                token_type_ids=torch.zeros_like(ids),
                max_new_tokens=N_NEW,
                eos_token_id=EOS,
                pad_token_id=PAD,
                return_dict_in_generate=True,
                output_scores=True,
                **kw,
            )
    finally:
        torch.set_num_threads(threads)
    new = out.sequences[:, ids.shape[1] :].numpy()
    tokens = np.pad(new, ((0, 0), (0, N_NEW - new.shape[1])), constant_values=PAD)
    # HF's beam search fills with EOS, not with a pad id of 0 (`pad_token_id or eos_token_id`).
    tokens[np.cumsum(tokens == EOS, axis=1) - (tokens == EOS) > 0] = PAD
    return tokens, out


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    """text family -> (chartjax model, HF model), the HF one saved and loaded back."""
    root = tmp_path_factory.mktemp("paligemma_generate")
    out = {}
    for text in TEXTS:
        seed, std = MODELS[text]
        hf = tp.hf_model(text, seed=seed, std=std)
        hf.save_pretrained(str(root / text))
        model, _ = hf_paligemma.load(str(root / text))
        out[text] = (model, hf)
    return out


@pytest.fixture(scope="module")
def greedy(family):
    """text family -> (HF greedy tokens, HF step scores, chartjax right-padded greedy tokens)."""
    pixels, left, right, _ = prompts()
    out = {}
    for text in TEXTS:
        model, hf = family[text]
        ref, res = _hf_generate(hf, pixels, *left, do_sample=False)
        got = pgd.generate(model, pixels, *right, max_new_tokens=N_NEW)
        out[text] = (ref, res.scores, got)
    return out


@pytest.mark.parametrize("text", TEXTS)
def test_greedy_matches_hf_left_and_right_padded(text, family, greedy):
    model, _ = family[text]
    ref, scores, got = greedy[text]
    pixels, left, _, _ = prompts()
    # The case is a real one: outputs vary, some rows stop at EOS, no near-tie at any step.
    assert len({tuple(r) for r in ref}) >= 9 and np.mean([len(set(r)) for r in ref]) >= 4
    assert 0 < int((ref == EOS).any(axis=1).sum()) < len(ref)
    top2 = [torch.topk(s, 2).values for s in scores]
    assert min(float((v[:, 0] - v[:, 1]).min()) for v in top2) > 3e-4
    same = (got == ref).all(axis=1)
    print(f"{text}: greedy equal to HF generate on {int(same.sum())}/{len(same)} prompts")
    assert same.all()
    # Pads after EOS; the left-padded batch (same shapes: no new compile) decodes the same.
    after_eos = np.cumsum(got == EOS, axis=1) - (got == EOS) > 0
    assert (got[after_eos] == PAD).all() and after_eos.any()
    compiled = pgd._prefill_jit._cache_size(), pgd._loop_jit._cache_size()
    np.testing.assert_array_equal(pgd.generate(model, pixels, *left, max_new_tokens=N_NEW), ref)
    assert (pgd._prefill_jit._cache_size(), pgd._loop_jit._cache_size()) == compiled


@nnx.jit
def _full_logits(model, batch):
    return model(batch, deterministic=True)


@pytest.mark.parametrize("text", TEXTS)
def test_cached_equals_uncached_full_forward(text, family, greedy):
    """Greedy by full forwards (no cache): each step reruns image + prompt + the tokens so far
    through `PaliGemma.__call__` (prefix-LM masks from `token_type_ids`), rows right-padded to
    one fixed length, and takes the argmax at each row's last token."""
    model, _ = family[text]
    pixels, _, _, rows = prompts()
    length = max(map(len, rows)) + N_NEW
    seqs = [list(r) for r in rows]
    done = np.zeros(len(rows), bool)
    out = np.full((len(rows), N_NEW), PAD, np.int32)
    image = jnp.asarray(np.transpose(pixels, (0, 2, 3, 1)))
    for n in range(N_NEW):
        ids = np.zeros((len(rows), length), np.int32)
        types, mask = np.zeros_like(ids), np.zeros_like(ids)
        for i, s in enumerate(seqs):
            ids[i, : len(s)], mask[i, : len(s)] = s, 1
            types[i, len(rows[i]) : len(s)] = 1
        batch = {"image": image, "input_ids": ids, "token_type_ids": types, "attention_mask": mask}
        logits = np.asarray(_full_logits(model, jax.tree.map(jnp.asarray, batch)))
        for i, s in enumerate(seqs):
            if not done[i]:
                out[i, n] = int(np.argmax(logits[i, len(s) - 1]))
                s.append(out[i, n])
                done[i] = out[i, n] == EOS
    np.testing.assert_array_equal(greedy[text][2], out)


@pytest.mark.parametrize("text", TEXTS)
def test_beam_search_matches_hf(text, family, greedy):
    model, hf = family[text]
    pixels, left, right, _ = prompts()
    ref, res = _hf_generate(hf, pixels, *left, do_sample=False, num_beams=3)
    kw = {"max_new_tokens": N_NEW, "method": "beam", "num_beams": 3}
    tokens, scores = pgd.decode(model, pixels, *right, **kw)
    same = (tokens == ref).all(axis=1)
    print(f"{text}: beam (3) equal to HF generate on {int(same.sum())}/{len(same)} prompts")
    np.testing.assert_array_equal(tokens, ref)
    np.testing.assert_allclose(scores, res.sequences_scores.numpy(), rtol=1e-5, atol=1e-5)
    differ = int((tokens != greedy[text][2]).any(axis=1).sum())
    assert differ >= 2, f"beam search differs from greedy on only {differ} prompts"


def test_sampling_limits_equal_greedy(family, greedy):
    model, _ = family["gemma2"]
    pixels, _, right, _ = prompts()
    want = greedy["gemma2"][2]
    kw = {"max_new_tokens": N_NEW, "method": "sample", "rng": jax.random.key(3)}
    np.testing.assert_array_equal(pgd.generate(model, pixels, *right, top_k=1, **kw), want)
    cold = pgd.generate(model, pixels, *right, temperature=1e-4, top_p=0.9, **kw)
    np.testing.assert_array_equal(cold, want)
    np.testing.assert_array_equal(pgd.generate(model, pixels, *right, temperature=0.0, **kw), want)
    hot = pgd.generate(model, pixels, *right, temperature=2.0, top_p=0.9, **kw)
    assert hot.shape == want.shape and (hot != want).any()


def test_decoding_over_a_data_parallel_mesh(family, greedy):
    model, _ = family["gemma"]
    pixels, _, right, _ = prompts()
    idx = np.arange(16) % 10  # 16 rows: two per device
    mesh = make_mesh((-1, 1))
    assert mesh.devices.size == 8
    with sharding.activate(mesh, axis_rules("data_parallel")):
        (ids,), _ = pgd._place((right[0][idx],), {})
        assert len(ids.sharding.device_set) == 8 and ids.sharding.spec[0] == "data"
        got = pgd.generate(model, pixels[idx], right[0][idx], right[1][idx], max_new_tokens=N_NEW)
    np.testing.assert_array_equal(got, greedy["gemma"][2][idx])
