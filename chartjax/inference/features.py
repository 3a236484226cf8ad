"""Examples -> model features, and model outputs -> predictions: one `Featurizer` per kind of
model (decoders: chartjax/tasks/core/seq2seq.py's header rendering, Pix2Struct patches and
SentencePiece / BART BPE, so a model sees what it was trained on; encoder classifiers: the
DeBERTa / TAPAS tokenizers of chartjax/tasks/core/text_classification.py; yes/no models of a task's
own features: the task's eval preprocessing, `InferenceSpec.features`; PaliGemma:
chartjax/inference/paligemma_features.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from chartjax.inference import inputs as inputs_lib
from chartjax.inference.inputs import Example, InputError
from chartjax.inference.settings import Resolved
from chartjax.tasks.core.task import InferenceSpec


class BadExample(InputError):
    """One input cannot be used (skippable with --skip_bad)."""


class BadImage(BadExample):
    """One input image cannot be used (skippable with --skip_bad)."""


@dataclasses.dataclass
class Featurizer:
    """What one kind of model needs: featurize an example, run a batch, read predictions.

    featurize(ex) -> (features {name: array}, truncated?); may raise BadExample.
    forward: what the device step runs on a batch, a hashable key of `_forward` (so a model
      structure and batch shape compile once per process, however many runs).
    outputs(exs, host array) -> per example (prediction, extra row fields).
    run: where the step is not a jitted function of the batch but a host call that places and
      gathers its own arrays (PaliGemma's `paligemma_decoding.generate`): `run(model, global
      host batch) -> host array`, called by the engine inside the mesh's context in place of
      the jitted `_forward`.
    """

    featurize: Callable[[Example], tuple[dict, bool]]
    forward: tuple
    outputs: Callable[[list[Example], np.ndarray], list[tuple[object, dict]]]
    run: Callable[[object, dict], np.ndarray] | None = None


def refuse_sampling(s: Resolved, family: str) -> None:
    """Sampling settings given to a model whose decoding does not sample."""
    given = [n for n in ("temperature", "top_k", "top_p") if s.origin[n] != "default"]
    if given and (s.temperature > 0 or s.top_k > 0 or s.top_p < 1):
        raise InputError(
            f"sampling ({', '.join(given)}) is implemented for PaliGemma only, not {family}: "
            "decoding here is greedy or beam search (beam_size)"
        )


# ------------------------------------------------------------------------ features ----------


def featurize(ex: Example, features, vocab) -> tuple[np.ndarray, bool]:
    """Model input of one example (+ whether a text input was truncated)."""
    from chartjax.tasks.core import seq2seq

    if features.modality == "text":
        n = len(vocab.encode(ex.prompt, add_eos=True))
        ids = vocab.encode_batch([ex.prompt], max_len=features.max_input_len, add_eos=True)[0]
        return ids, n > features.max_input_len
    from PIL import Image

    from chartjax.data.images import decode_image_bytes

    try:
        image = decode_image_bytes(inputs_lib.read_image_bytes(ex))
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise BadImage(f"{ex.source}: cannot read image ({type(e).__name__}: {e})") from None
    rendered = seq2seq.image_with_header(image, ex.prompt, features)
    try:
        out = seq2seq.image_features(rendered, features)
    except ValueError as e:  # extreme aspect ratio: row/col ids too large
        raise BadImage(f"{ex.source}: {e}") from None
    return out, False


def featurized_slots(featurize, exs: list) -> dict:
    """The features of one batch's slots, stacked (a loader worker runs this): slots without
    features (past the end, or a bad input) repeat the first good one, `_mask` False; `bad`
    lists (slot, why) for the caller to skip or raise. Only `bad` when no slot is good."""
    feats, bad = [], []
    for i, ex in enumerate(exs):
        f, cut = None, False
        if ex is not None:
            try:
                f, cut = featurize(ex)
            except BadExample as e:
                bad.append((i, str(e)))
        feats.append((f, cut))
    first = next((f for f, _ in feats if f is not None), None)
    if first is None:
        return {"bad": bad}
    batch = {key: np.stack([(f or first)[key] for f, _ in feats]) for key in first}
    batch["_mask"] = np.array([f is not None for f, _ in feats])
    batch["_cut"] = np.array([f is not None and cut for f, cut in feats])
    return {**batch, "bad": bad}


def decoder_featurizer(
    cfg, spec: InferenceSpec, vocab_path: str, s: Resolved, *, allow_unused_ids: bool = False
) -> Featurizer:
    """`allow_unused_ids`: the run that wrote the checkpoint bound
    `vocabulary_check.allow_unused_ids = True` (its config.gin)."""
    from chartjax import config
    from chartjax.data import vocab as vocab_lib
    from chartjax.tasks.core import seq2seq

    refuse_sampling(s, type(cfg).__name__)
    vocab = vocab_lib.open_vocabulary(vocab_path)
    try:  # the check chartjax-train and chartjax-eval make (config.py)
        config.check_vocabulary(
            vocab.vocab_size,
            cfg.vocab_size,
            vocab=vocab_path,
            model=f"the checkpoint's {type(cfg).__name__}.vocab_size = {cfg.vocab_size}",
            allow_unused_ids=allow_unused_ids,
            remedy="not this checkpoint's vocabulary: give its own with --vocab",
        )
    except config.ConfigError as e:
        raise InputError(str(e)) from None
    features = seq2seq.Features(
        modality=spec.modality,
        vocab_file=vocab_path,
        max_patches=s.max_patches,
        patch_size=getattr(cfg, "patch_size", 16),
        max_position_id=getattr(cfg, "max_position_embeddings", 4096),
        header_font_size=s.header_font_size,
        font_path=s.font_path,
        max_input_len=s.max_input_len,
    )

    def feats(ex):
        f, cut = featurize(ex, features, vocab)
        return {"encoder_input_tokens": f}, cut

    def outputs(exs, tokens):
        return [(t, {}) for t in vocab.decode_batch(tokens[: len(exs)])]

    return Featurizer(feats, ("decode", s.max_decode_len, s.beam_size, s.alpha), outputs)


def classifier_featurizer(cfg, tokenizer_path: str, labels, max_input_len: int) -> Featurizer:
    from chartjax.data import classifier_inputs
    from chartjax.tasks.core import text_classification

    family = text_classification.family_of(cfg)
    try:
        tok = classifier_inputs.ClassifierTokenizer(tokenizer_path, family, max_input_len)
    except FileNotFoundError as e:
        raise InputError(str(e)) from None
    if tok.vocab_size > cfg.vocab_size:
        raise InputError(
            f"{tokenizer_path}: the tokenizer has {tok.vocab_size} ids but the model's "
            f"vocabulary has {cfg.vocab_size}: not this checkpoint's tokenizer"
        )
    names = text_classification.label_names(labels, cfg.num_labels)

    def feats(ex):
        try:
            out = tok(ex.prompt, ex.pair, ex.table)
        except classifier_inputs.BadInput as e:
            raise BadExample(f"{ex.source}: {e}") from None
        # Counted as truncated: an input that fills max_input_len (HF cuts silently).
        return out, bool(out["attention_mask"].sum() >= max_input_len)

    def outputs(exs, logits):
        logits = np.asarray(logits, np.float32)[: len(exs)]
        return [(names[int(np.argmax(row))], {"scores": [float(x) for x in row]}) for row in logits]

    return Featurizer(feats, ("classify",), outputs)


def yes_no_featurizer(spec: InferenceSpec, run: dict, where: str) -> Featurizer:
    """A yes/no model (logits over no, yes) that reads its task's own features, made by the
    task's eval preprocessing (`spec.features`) with the bindings of the run's task factory
    (`run`: saved_gin.input_settings, its `task` and `task_args`). Rows: "yes" / "no", the two
    logits as `scores` and `yes_probability`. Runs of another task are refused: their inputs
    were made otherwise."""
    from PIL import Image

    if spec.features is None or run.get("task") != spec.name:
        raise InputError(
            f"{where}: a yes/no model trained on task {run.get('task')!r}; --task {spec.name} "
            f"reads models trained with train.task = {spec.name!r}"
        )
    features = spec.features(run.get("task_args", {}))

    def feats(ex: Example):
        if not ex.prompt.strip():
            raise BadExample(f"{ex.source}: an empty prompt")
        try:
            return features(inputs_lib.read_image_bytes(ex), ex.prompt)
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
            raise BadImage(f"{ex.source}: cannot read image ({type(e).__name__}: {e})") from None

    def outputs(exs, logits):
        logits = np.asarray(logits, np.float64)[: len(exs)]
        yes = 1.0 / (1.0 + np.exp(logits[:, 0] - logits[:, 1]))  # softmax over (no, yes)
        return [
            (
                ("no", "yes")[int(np.argmax(row))],
                {"scores": [float(x) for x in row], "yes_probability": float(p)},
            )
            for row, p in zip(logits, yes)
        ]

    return Featurizer(feats, ("logits",), outputs)
