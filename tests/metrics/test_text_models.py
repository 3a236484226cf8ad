"""BERTScore, BLEURT and corpus perplexity on tiny local models built here (no downloads).

torch/transformers/bert-score come from the `hf` extra, which `make test` installs: these tests
import them directly (no importorskip), so a missing extra fails loudly.
"""

import json
import math

import pytest
import torch
import transformers

from chartjax.metrics import text_models as M

WORDS = "the share of adults rose to 45 percent in 2020 sales fell a cat is on mat".split()


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
    """A 2-layer random BERT with a word-level WordPiece vocabulary."""
    path = tmp_path_factory.mktemp("tiny_bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "."]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = transformers.BertTokenizer(str(path / "vocab.txt"), model_max_length=512)
    tok.save_pretrained(path)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=1,
    )
    transformers.BertModel(config).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_bleurt_dir(tiny_bert_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny_bleurt")
    transformers.BertTokenizer.from_pretrained(tiny_bert_dir).save_pretrained(path)
    torch.manual_seed(1)
    config = transformers.BertConfig.from_pretrained(tiny_bert_dir, num_labels=1)
    transformers.BertForSequenceClassification(config).save_pretrained(path)
    return path


def _byte_level_gpt2_dir(path, zero_embeddings: bool, seed: int = 0):
    """GPT-2 with a byte-level BPE vocabulary of the 256 byte symbols and no merges."""
    # GPT-2's byte -> printable-symbol table: printable Latin-1 bytes map to themselves, the
    # others to code points from 256 upwards.
    keep = [*range(33, 127), *range(161, 173), *range(174, 256)]
    extra = iter(range(256, 512))
    symbols = [chr(b) if b in keep else chr(next(extra)) for b in range(256)]
    vocab = {s: i for i, s in enumerate(symbols)}
    vocab["<|endoftext|>"] = len(vocab)
    (path / "vocab.json").write_text(json.dumps(vocab))
    (path / "merges.txt").write_text("#version: 0.2\n")
    transformers.GPT2Tokenizer(str(path / "vocab.json"), str(path / "merges.txt")).save_pretrained(
        path
    )
    torch.manual_seed(seed)
    config = transformers.GPT2Config(
        vocab_size=len(vocab), n_positions=64, n_embd=32, n_layer=2, n_head=2
    )
    model = transformers.GPT2LMHeadModel(config)
    if zero_embeddings:
        with torch.no_grad():
            model.transformer.wte.weight.zero_()  # tied LM head: every logit is 0
    model.save_pretrained(path)
    return path, len(vocab)


@pytest.fixture(scope="session")
def uniform_gpt2(tmp_path_factory):
    return _byte_level_gpt2_dir(tmp_path_factory.mktemp("gpt2_uniform"), zero_embeddings=True)


@pytest.fixture(scope="session")
def random_gpt2(tmp_path_factory):
    return _byte_level_gpt2_dir(tmp_path_factory.mktemp("gpt2_random"), zero_embeddings=False)[0]


def test_no_model_means_unavailable_with_reason():
    out = M.bertscore(["a"], ["a"], model_dir=None)
    assert out.metrics == {}
    assert set(out.unavailable) == {"bertscore_precision", "bertscore_recall", "bertscore_f1"}
    assert "--bertscore_model" in out.unavailable["bertscore_f1"]
    assert "--bleurt_checkpoint" in M.bleurt(["a"], ["a"], scorer=None).unavailable["bleurt"]
    assert "--ppl_model" in M.corpus_perplexity(["a"], model_dir=None).unavailable["perplexity"]
    with pytest.raises(FileNotFoundError, match="--ppl_model"):
        M.corpus_perplexity(["a"], model_dir="/nonexistent")


def _greedy_bertscore(model_dir, cand, ref):
    """Independent BERTScore: cosine greedy matching of last-layer token embeddings.

    As bert-score does it, [CLS] and [SEP] get weight 0 in the averages but stay available as
    matches for the other side's tokens.
    """
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModel.from_pretrained(model_dir).eval()

    def emb(text):
        ids = tok(text, return_tensors="pt")
        with torch.no_grad():
            h = model(**ids).last_hidden_state[0]
        return torch.nn.functional.normalize(h, dim=-1)

    sim = emb(cand) @ emb(ref).T
    p = sim[1:-1].max(dim=1).values.mean().item()
    r = sim[:, 1:-1].max(dim=0).values.mean().item()
    return p, r, 2 * p * r / (p + r)


def test_bertscore_matches_definition_and_identity(tiny_bert_dir):
    cands = ["the share rose to 45 percent", "sales fell in 2020"]
    refs = ["the share of adults rose to 45 percent in 2020", "a cat is on the mat"]
    out = M.bertscore(cands, refs, model_dir=tiny_bert_dir, batch_size=4)
    expected = [_greedy_bertscore(tiny_bert_dir, c, r) for c, r in zip(cands, refs)]
    for k, name in enumerate(M.BERTSCORE_NAMES):
        assert out.metrics[name] == pytest.approx(sum(e[k] for e in expected) / 2, abs=1e-5)
    assert (
        "layer=2" in out.libraries["bert_score"] and "rescale=False" in out.libraries["bert_score"]
    )
    same = M.bertscore(refs, refs, model_dir=tiny_bert_dir).metrics
    assert same["bertscore_f1"] == pytest.approx(1.0, abs=1e-5)


def test_bleurt_scorer_batching_truncation_and_mean(tiny_bleurt_dir):
    scorer = M.transformers_bleurt_scorer(tiny_bleurt_dir, max_length=16, batch_size=2)
    refs = ["the share rose", "sales fell in 2020", "a cat is on the mat"]
    cands = ["the share fell", "sales rose", "a cat"]
    tok = transformers.AutoTokenizer.from_pretrained(tiny_bleurt_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(tiny_bleurt_dir).eval()
    with torch.no_grad():
        direct = [
            model(**tok(r, c, return_tensors="pt")).logits[0, 0].item() for r, c in zip(refs, cands)
        ]
    assert scorer(refs, cands) == pytest.approx(direct, abs=1e-5)  # padding does not leak
    out = M.bleurt(cands, refs, scorer=scorer)
    assert out.metrics["bleurt"] == pytest.approx(sum(direct) / 3, abs=1e-5)
    # Truncation to max_length word pieces: words past the limit do not change the score.
    long = "the share fell " + "sales " * 30
    longer = long + "cat " * 10
    assert scorer(["the share rose"], [long]) == pytest.approx(scorer(["the share rose"], [longer]))
    # Best of several references.
    multi = M.bleurt(["the share fell"], [["the share rose", "sales fell in 2020"]], scorer=scorer)
    both = scorer(["the share rose", "sales fell in 2020"], ["the share fell"] * 2)
    assert multi.metrics["bleurt"] == pytest.approx(max(both))


def test_perplexity_blocks_grouping():
    lines = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10]]
    # Group of 2 lines: [1..5] -> blocks of 2, remainder dropped; [6..10] likewise.
    assert M.perplexity_blocks(lines, block_size=2, group_lines=2) == [
        [1, 2],
        [3, 4],
        [6, 7],
        [8, 9],
    ]
    # A group shorter than one block is kept whole.
    assert M.perplexity_blocks(lines, block_size=8, group_lines=2) == [
        [1, 2, 3, 4, 5],
        [6, 7, 8, 9, 10],
    ]
    assert M.perplexity_blocks(lines, block_size=4, group_lines=1000) == [
        [1, 2, 3, 4],
        [5, 6, 7, 8],
    ]
    assert M.perplexity_blocks([[], []], block_size=4) == []


def test_perplexity_of_uniform_model_is_vocab_size(uniform_gpt2):
    path, vocab_size = uniform_gpt2
    out = M.corpus_perplexity(
        ["Sales rose to 45 percent.", "They fell."], model_dir=path, block_size=8
    )
    assert out.metrics["perplexity"] == pytest.approx(vocab_size, rel=1e-5)
    assert "block_size=8" in out.libraries["perplexity"]


def test_perplexity_matches_hf_loss(random_gpt2):
    texts = ["Sales rose to 45 percent in 2020.", "They fell.\nThen rose again.", "ok"]
    out = M.corpus_perplexity(
        texts, model_dir=random_gpt2, block_size=8, group_lines=2, batch_size=3
    )
    tok = transformers.AutoTokenizer.from_pretrained(random_gpt2)
    model = transformers.AutoModelForCausalLM.from_pretrained(random_gpt2).eval()
    lines = [ln for t in texts for ln in t.split("\n")]
    blocks = M.perplexity_blocks(
        [tok(ln)["input_ids"] for ln in lines], block_size=8, group_lines=2
    )
    assert all(len(b) == 8 for b in blocks)  # equal lengths: HF's batched loss applies as is
    losses = []
    with torch.no_grad():
        for i in range(0, len(blocks), 3):
            ids = torch.tensor(blocks[i : i + 3])
            losses.append((model(input_ids=ids, labels=ids).loss.item(), len(ids)))
    expected = math.exp(sum(loss * n for loss, n in losses) / len(blocks))
    assert out.metrics["perplexity"] == pytest.approx(expected, rel=1e-5)
