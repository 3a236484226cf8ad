"""Model-based text metrics: BERTScore, BLEURT and Chart-to-Text's corpus perplexity.

Each needs weights that cannot be downloaded here (roberta-large, BLEURT-base-128, gpt2-medium;
docs/metrics.md §6.4), so each takes a *local* model directory and, given none, reports the
metric under ``unavailable`` with the reason: never a made-up value. torch, transformers and
bert-score come from the ``hf`` extra and are imported only when a model is given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Protocol

from chartjax.metrics.scores import Scores, as_reference_lists

__all__ = [
    "BleurtScorer",
    "bertscore",
    "bleurt",
    "corpus_perplexity",
    "perplexity_blocks",
    "transformers_bleurt_scorer",
]

BERTSCORE_NAMES = ("bertscore_precision", "bertscore_recall", "bertscore_f1")


def _lengths(predictions: Sequence, references: Sequence) -> list[list[str]]:
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    if not predictions:
        raise ValueError("no examples to score")
    return as_reference_lists(references)


def _model_dir(path: str | Path, flag: str) -> Path:
    path = Path(path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{flag}: {path} is not a model directory (no config.json)")
    return path


def _pkg(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


# --------------------------------------------------------------------------------------------
# BERTScore
# --------------------------------------------------------------------------------------------


def bertscore(
    predictions: Sequence[str],
    references: Sequence[str | Sequence[str]],
    *,
    model_dir: str | Path | None,
    num_layers: int | None = None,
    batch_size: int = 64,
    idf: bool = False,
) -> Scores:
    """Mean BERTScore P/R/F1 with bert-score on a local model (no baseline rescaling).

    ChartCheck used ``lang="en"`` = roberta-large layer 17; give that model's directory and
    ``num_layers=17`` to match it. ``num_layers`` defaults to all layers of the model.
    With several references bert-score keeps the best-F1 reference.
    """
    if model_dir is None:
        return Scores.missing(BERTSCORE_NAMES, "no model directory given (--bertscore_model)")
    refs = _lengths(predictions, references)
    model_dir = _model_dir(model_dir, "--bertscore_model")
    import bert_score
    from transformers import AutoConfig

    if num_layers is None:
        num_layers = AutoConfig.from_pretrained(model_dir).num_hidden_layers
    p, r, f = bert_score.score(
        list(predictions),
        refs,
        model_type=str(model_dir),
        num_layers=num_layers,
        batch_size=batch_size,
        idf=idf,
        rescale_with_baseline=False,
        device="cpu",
    )
    return Scores(
        metrics=dict(zip(BERTSCORE_NAMES, (float(x.mean()) for x in (p, r, f)))),
        libraries={
            "bert_score": f"{_pkg('bert-score')} model={model_dir.name} layer={num_layers} "
            f"idf={idf} rescale=False"
        },
    )


# --------------------------------------------------------------------------------------------
# BLEURT
# --------------------------------------------------------------------------------------------


class BleurtScorer(Protocol):
    """Anything that scores (reference, candidate) pairs, one float per pair."""

    name: str

    def __call__(self, references: Sequence[str], candidates: Sequence[str]) -> list[float]: ...


def transformers_bleurt_scorer(
    checkpoint_dir: str | Path, *, max_length: int = 128, batch_size: int = 16
) -> BleurtScorer:
    """A BLEURT scorer over a PyTorch port in a local directory.

    Works with BERT-style sequence-regression ports (``AutoModelForSequenceClassification`` with
    one label, e.g. ports of BLEURT-base-128) and, when the ``bleurt-pytorch`` package is
    installed, its ``bleurt`` model type. Each pair is encoded as ``[CLS] ref [SEP] cand [SEP]``
    and truncated to ``max_length`` word pieces (128 for BLEURT-base-128).
    """
    checkpoint_dir = _model_dir(checkpoint_dir, "--bleurt_checkpoint")
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    if AutoConfig.from_pretrained(checkpoint_dir).model_type == "bleurt":
        import bleurt_pytorch  # noqa: F401  registers the "bleurt" model type
    tokenizer = AutoTokenizer.from_pretrained(checkpoint_dir)
    model = AutoModelForSequenceClassification.from_pretrained(checkpoint_dir).eval()
    if model.config.num_labels != 1:
        raise ValueError(
            f"--bleurt_checkpoint: {checkpoint_dir} has {model.config.num_labels} "
            "labels; a BLEURT regression head has 1"
        )

    class _Scorer:
        name = f"{checkpoint_dir.name} max_length={max_length}"

        def __call__(self, references, candidates):
            out: list[float] = []
            with torch.no_grad():
                for i in range(0, len(references), batch_size):
                    batch = tokenizer(
                        list(references[i : i + batch_size]),
                        list(candidates[i : i + batch_size]),
                        truncation=True,
                        max_length=max_length,
                        padding=True,
                        return_tensors="pt",
                    )
                    out.extend(model(**batch).logits[:, 0].tolist())
            return out

    return _Scorer()


def bleurt(
    predictions: Sequence[str],
    references: Sequence[str | Sequence[str]],
    *,
    scorer: BleurtScorer | None,
) -> Scores:
    """Mean BLEURT score (native units, may be negative); best reference when several."""
    if scorer is None:
        return Scores.missing(["bleurt"], "no checkpoint given (--bleurt_checkpoint)")
    refs = _lengths(predictions, references)
    flat_refs = [r for rs in refs for r in rs]
    flat_cands = [p for p, rs in zip(predictions, refs) for _ in rs]
    flat = scorer(flat_refs, flat_cands)
    if len(flat) != len(flat_refs):
        raise ValueError(f"BLEURT scorer returned {len(flat)} scores for {len(flat_refs)} pairs")
    best, k = [], 0
    for rs in refs:
        best.append(max(flat[k : k + len(rs)]))
        k += len(rs)
    return Scores(metrics={"bleurt": sum(best) / len(best)}, libraries={"bleurt": scorer.name})


# --------------------------------------------------------------------------------------------
# Perplexity (Chart-to-Text: HF run_clm.py --do_eval, docs/metrics.md §2.4)
# --------------------------------------------------------------------------------------------


def perplexity_blocks(
    token_lines: Sequence[Sequence[int]], *, block_size: int = 1024, group_lines: int = 1000
) -> list[list[int]]:
    """run_clm's ``group_texts``: per group of ``group_lines`` lines, concatenate the token ids
    (no separator), cut into ``block_size`` blocks and drop the remainder, except that a group
    shorter than one block is kept whole as one short block (an empty group gives none)."""
    blocks: list[list[int]] = []
    for start in range(0, len(token_lines), group_lines):
        ids = [t for line in token_lines[start : start + group_lines] for t in line]
        total = len(ids) if len(ids) < block_size else (len(ids) // block_size) * block_size
        blocks.extend(ids[i : i + block_size] for i in range(0, total, block_size))
    return blocks


def _batch_loss(model, blocks: list[list[int]]) -> float:
    """Mean next-token NLL over every predicted token of a batch (HF's shifted LM loss)."""
    import torch

    nll, count = 0.0, 0
    by_length: dict[int, list[list[int]]] = {}
    for b in blocks:  # equal lengths batch together; a short block runs on its own
        by_length.setdefault(len(b), []).append(b)
    for length, group in by_length.items():
        if length < 2:
            continue
        ids = torch.tensor(group)
        logits = model(input_ids=ids).logits[:, :-1].float()
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="sum"
        )
        nll += float(loss)
        count += ids[:, 1:].numel()
    return nll / count if count else float("nan")


def corpus_perplexity(
    texts: Sequence[str],
    *,
    model_dir: str | Path | None,
    block_size: int = 1024,
    group_lines: int = 1000,
    batch_size: int = 8,
) -> Scores:
    """Chart-to-Text's perplexity: exp(eval_loss) of a causal LM over the concatenated file.

    Each text is a line of the file (a text with newlines counts as several lines). Lines are
    tokenized without BOS/EOS, grouped and cut as ``perplexity_blocks`` describes, and batched
    by ``batch_size`` in order; eval_loss is the mean over blocks of their batch's mean token
    loss (HF ``Trainer.evaluate``). A batch whose blocks differ in length (possible only in
    the last, short group) would crash the original; here its loss is the token-mean over it.
    """
    if model_dir is None:
        return Scores.missing(["perplexity"], "no model directory given (--ppl_model)")
    if not texts:
        raise ValueError("corpus_perplexity: no texts")
    model_dir = _model_dir(model_dir, "--ppl_model")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    lines = [line for text in texts for line in text.split("\n")]
    token_lines = [tokenizer(line, add_special_tokens=False)["input_ids"] for line in lines]
    blocks = perplexity_blocks(token_lines, block_size=block_size, group_lines=group_lines)
    if not blocks:
        raise ValueError("corpus_perplexity: the texts hold no tokens")
    weighted = 0.0
    with torch.no_grad():
        for i in range(0, len(blocks), batch_size):
            batch = blocks[i : i + batch_size]
            weighted += _batch_loss(model, batch) * len(batch)
    eval_loss = weighted / len(blocks)
    try:
        ppl = math.exp(eval_loss)
    except OverflowError:
        ppl = float("inf")
    if not math.isfinite(ppl):
        return Scores.missing(["perplexity"], f"perplexity overflowed (eval_loss={eval_loss})")
    return Scores(
        metrics={"perplexity": ppl},
        libraries={
            "perplexity": f"{model_dir.name} block_size={block_size} group_lines={group_lines} "
            f"batch_size={batch_size} transformers {_pkg('transformers')}"
        },
    )
