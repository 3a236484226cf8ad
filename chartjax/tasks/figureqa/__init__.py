"""FigureQA (Kahou et al. 2017): yes/no questions about synthetic figures.

Preprocessing follows the paper (§5: "We resize the longer side of each image to 256 pixels,
preserving the aspect ratio; images are then padded with zeros to size 256 x 256. For data
augmentation, we use the common scheme of padding images (to size 264 x 264) and then randomly
cropping them back") and the baselines' public implementation (docs/models.md §4): the image
is resized keeping its aspect ratio so that its longer side is image_size (bilinear), then
zero-padded to a square, centred as the co-author's `resize_image_with_crop_or_pad` does
(`pad_position="center"`; the paper does not say where, `"top_left"` pads right and below).
With `train_pad` (the paper: 8), training examples are padded by that many pixels (centred) and
randomly cropped back to image_size: a shift of the image by at most train_pad / 2 pixels each
way, zeros where it moves away from the edge. The crop is stateless, seeded by `augment_seed`
and the example's id, so it is the same in any loader worker and on resume; a question
keeps its crop from epoch to epoch (the map sees no epoch counter), the questions of one figure
(about 13) each have their own. Evaluation never crops.

Each figure is decoded and preprocessed once per split (`image_fn`, into the image cache of
chartjax/data/figure_images.py); the questions are read without their PNG, and each batch
gathers its figures from the cache and crops them there (`_batch_fn`, in the training process;
the questions are tokenized in the loader's workers).

Questions are lower-cased, split on spaces with `,` and `;` kept as tokens and `.`/`?` dropped,
wrapped in <START>/<END>. The answer is a 2-way label (no, yes).
"""

from __future__ import annotations

import functools
import hashlib
import os

import gin
import numpy as np

from chartjax.data import figure_images, resize
from chartjax.data.images import decode_image_bytes
from chartjax.metrics import classification as cls_metrics
from chartjax.metrics import figureqa as figureqa_metrics
from chartjax.metrics.prediction_files import check_fields, field_of
from chartjax.tasks.core import classification, report_views
from chartjax.tasks.core.task import (
    Evaluation,
    FileScorer,
    InferenceSpec,
    ScoreInputs,
    Task,
    describe,
)

TEMPLATES = (
    "Is {c1} the minimum?",
    "Is {c1} the maximum?",
    "Is {c1} less than {c2}?",
    "Is {c1} greater than {c2}?",
    "Is {c1} the low median?",
    "Is {c1} the high median?",
    "Does {c1} have the minimum area under the curve?",
    "Does {c1} have the maximum area under the curve?",
    "Is {c1} the smoothest?",
    "Is {c1} the roughest?",
    "Does {c1} have the lowest value?",
    "Does {c1} have the highest value?",
    "Is {c1} less than {c2}?",
    "Is {c1} greater than {c2}?",
    "Does {c1} intersect {c2}?",
)
SPECIALS = ("<NULL>", "<START>", "<END>", "<UNK>")
ANSWERS = ("no", "yes")
COLORS_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "synth", "figureqa_colors.txt")


def _words(text: str) -> list[str]:
    text = text.lower().replace("?", "").replace(".", "")
    return text.replace(",", " , ").replace(";", " ; ").split()


@functools.cache
def vocabulary(colors_file: str = COLORS_FILE) -> tuple[str, ...]:
    """Specials + every word of the 15 templates and the 100 colour names (sorted, stable)."""
    words = set()
    for t in TEMPLATES:
        words.update(_words(t.format(c1="", c2="")))
    with open(colors_file) as f:
        for line in f:
            if line.strip():
                words.update(_words(line.rsplit(",", 1)[0]))
    return SPECIALS + tuple(sorted(words))


@functools.cache
def _word_ids() -> dict[str, int]:
    return {w: i for i, w in enumerate(vocabulary())}


def tokenize_np(question: str, max_len: int) -> tuple[np.ndarray, int]:
    """A question -> (tokens [max_len] int32, length): <START> words <END>, unknown words <UNK>."""
    index = _word_ids()
    ids = [1] + [index.get(w, 3) for w in _words(question)] + [2]
    ids = ids[:max_len]
    out = np.zeros(max_len, np.int32)
    out[: len(ids)] = ids
    return out, len(ids)


PAD_POSITIONS = ("center", "top_left")
QUESTION_KEYS = ("id", "question", "answer", "figure_type", "question_id")  # what is read


def image_fn(height: int, width: int, antialias: bool, pad_position: str = "center"):
    """A figure's encoded PNG -> its uint8 height x width input, as the baselines' TF code made
    it (decoded once per figure by the image cache, chartjax/data/figure_images.py)."""
    return functools.partial(_image, height, width, antialias, pad_position)


def _image(height: int, width: int, antialias: bool, pad_position: str, encoded: bytes):
    img = decode_image_bytes(encoded)
    img = resize.resize(img, resize.aspect_size(*img.shape[:2], height, width), antialias)
    img = resize.crop_or_pad(img, height, width, centre=pad_position == "center")
    return resize.to_uint8(img)


def crop_offset(example_id, train_pad: int, augment_seed: int) -> np.ndarray:
    """The (dy, dx) in [0, train_pad] of a question's training crop: drawn from
    (augment_seed, a stable hash of its id), so the same in any worker and on resume."""
    key = example_id.encode() if isinstance(example_id, str) else bytes(example_id)
    digest = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")
    rng = np.random.default_rng([augment_seed, digest])
    return rng.integers(0, train_pad + 1, 2).astype(np.int32)


def question_fn(keep_meta: bool, *, train_pad: int = 0, augment_seed: int = 0, max_len: int = 24):
    """The map of one question: tokens, label and `crop_offset`, the (dy, dx) of its training
    crop (zeros when `keep_meta`, evaluation, or without train_pad); `image_row` passes
    through. A top-level partial: it goes to the loader's worker processes."""
    return functools.partial(_question, keep_meta, train_pad, augment_seed, max_len)


def _question(keep_meta: bool, train_pad: int, augment_seed: int, max_len: int, ex: dict):
    crops = bool(train_pad) and not keep_meta
    question = _str(ex["question"])
    tokens, length = tokenize_np(question, max_len)
    out = {
        "question_tokens": tokens,
        "question_length": np.int32(length),
        "label": np.int32(max(int(ex["answer"]), 0)),
        "crop_offset": (
            crop_offset(ex["id"], train_pad, augment_seed) if crops else np.zeros(2, np.int32)
        ),
    }
    if "image_row" in ex:
        out["image_row"] = np.int64(ex["image_row"])
    if keep_meta:
        out.update({k: ex[k] for k in QUESTION_KEYS})
    return out


def _preprocess_fn(
    image_size: int,
    max_len: int,
    antialias: bool,
    keep_meta: bool,
    *,
    pad_position: str = "center",
    train_pad: int = 0,
    augment_seed: int = 0,
    image_height: int | None = None,
):
    """One example (with its PNG) to its features without the cache, as the task's pipeline
    computes them (`image_fn`, `question_fn`, then the crop the image cache's `images` does on
    the batch): the reference the tests and the GPU scripts' parity check read. The image is
    `image_height` x `image_size` (square when `image_height` is None)."""
    height, width = image_height or image_size, image_size
    image = image_fn(height, width, antialias, pad_position)
    question = question_fn(
        keep_meta, train_pad=train_pad, augment_seed=augment_seed, max_len=max_len
    )

    def fn(ex):
        out = question(ex)
        img = image(ex["image"])
        if train_pad and not keep_meta:
            padded = resize.crop_or_pad(img, height + train_pad, width + train_pad)
            dy, dx = (int(v) for v in out["crop_offset"])
            img = padded[dy : dy + height, dx : dx + width]
        del out["crop_offset"]
        return {"image": img, **out}

    return fn


def _batch_fn(source, keep_host: bool, train_pad: int):
    """The map of a stacked batch, in the training process: its figures' images gathered from
    the cache and cropped."""
    pad = 0 if keep_host else train_pad

    def fn(batch):
        batch = dict(batch)
        rows, offsets = batch.pop("image_row"), batch.pop("crop_offset")
        return {"image": source.images(rows, offsets, pad), **batch}

    return fn


def evaluate(predictions, host, split) -> Evaluation:
    """Accuracy, macro-F1 (+95% CI) overall, per figure type and per template; confusion.

    A split without answers (no_annot_test1/2 store -1) is predicted only: its rows have no
    target and every metric is `unavailable`, saying so (the rows are what chartjax-score
    scores against a key, or what is submitted)."""
    answers = np.asarray(host["answer"])
    predicted = [int(p) for p in np.asarray(predictions)]
    figure_types = [_str(x) for x in np.asarray(host["figure_type"])]
    question_ids = [int(x) for x in np.asarray(host["question_id"])]
    rows = [
        {
            "id": _str(i),
            "input": _str(q),
            "prediction": p,
            "prediction_text": ANSWERS[p],
            "figure_type": f,
            "question_id": t,
            **({"target": int(a)} if a >= 0 else {}),
        }
        for i, q, p, a, f, t in zip(
            host["id"], host["question"], predicted, answers, figure_types, question_ids
        )
    ]
    keep = answers >= 0  # no_annot splits have no answers
    if not keep.any():
        scores = figureqa_metrics.figureqa_scores(predicted, [None] * len(predicted))
        why = (
            f"split {split!r} has no answers (stored as -1): predictions only; score "
            "predictions.jsonl against a key with chartjax-score --task figureqa"
        )
        scores.unavailable = dict.fromkeys(scores.unavailable, why)
        return Evaluation(scores, rows)
    preds = [p for p, k in zip(predicted, keep) if k]
    targets = [int(t) for t in answers[keep]]
    scores = figureqa_metrics.figureqa_scores(
        preds,
        targets,
        figure_types=[f for f, k in zip(figure_types, keep) if k],
        question_ids=[str(t) for t, k in zip(question_ids, keep) if k],
    )
    scores.breakdowns["confusion_matrix"] = cls_metrics.confusion_breakdown(
        [ANSWERS[p] for p in preds], [ANSWERS[t] for t in targets], list(ANSWERS)
    )
    return Evaluation(scores, rows)


def _str(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


@gin.configurable("figureqa_task")
def make_task(
    data_dir: str = "~/tensorflow_datasets",
    image_size: int = 256,
    max_question_len: int = 24,
    antialias: bool = False,
    pad_position: str = "center",
    train_pad: int = 0,
    augment_seed: int = 0,
    image_height: int | None = None,
    train_split: str = "train1",
    eval_splits: tuple[str, ...] = ("validation1", "validation2"),
    shuffle_buffer: int = 10_000,
    image_cache_dir: str | None = None,
) -> Task:
    """The FigureQA task. image_size, antialias, pad_position, train_pad, augment_seed: the
    image preprocessing (module docstring; the paper: image_size 256, train_pad 8; centred as
    the co-author's code). image_height: a non-square image_height x image_size input (the
    VGG-16 baseline's 320 x 480), the figure fitted inside it with its aspect kept.
    image_cache_dir: where each split's decoded figures are cached as .npy files (reused by
    later runs; None holds them in memory: chartjax/data/figure_images.py)."""
    if image_height is not None and image_height <= 0:
        raise ValueError(f"figureqa_task.image_height must be > 0, got {image_height}")
    if pad_position not in PAD_POSITIONS:
        raise ValueError(
            f"figureqa_task.pad_position must be one of {PAD_POSITIONS}, got {pad_position!r}"
        )
    if train_pad < 0:
        raise ValueError(f"figureqa_task.train_pad must be >= 0, got {train_pad}")
    height, width = image_height or image_size, image_size
    source = figure_images.FigureImageSource(
        "figureqa",
        data_dir,
        train_split=train_split,
        shuffle_buffer=shuffle_buffer,
        image_fn=image_fn(height, width, antialias, pad_position),
        image_shape=(height, width, 3),
        cache_key=f"{height}x{width}_{pad_position}_antialias{int(antialias)}",
        read_keys=QUESTION_KEYS,
        cache_dir=image_cache_dir,
    )
    return Task(
        name="figureqa",
        source=source,
        features=lambda keep_host: question_fn(
            keep_host, train_pad=train_pad, augment_seed=augment_seed, max_len=max_question_len
        ),
        batch_features=lambda keep_host: _batch_fn(source, keep_host, train_pad),
        loss=classification.softmax_xent_loss,
        predict=classification.argmax_predict,
        evaluate=evaluate,
        model_inputs=("image", "question_tokens", "question_length", "label"),
        eval_splits=tuple(eval_splits),
        report_view=report_views.FIGUREQA,
    )


# ------------------------------------------------------------------ chartjax-infer -----------

# The bindings of `figureqa_task` that shape an evaluation example (the rest are data and
# training settings).
PREPROCESS_ARGS = ("image_size", "image_height", "max_question_len", "antialias", "pad_position")


def inference_features(task_args: dict):
    """`(encoded image, question) -> (features, truncated?)`: one question as the task's eval
    pipeline makes it (`_preprocess_fn`, evaluation: no crop), with the preprocessing of a run's
    `figureqa_task` bindings `task_args` (its config.gin) over `make_task`'s defaults."""
    import inspect

    params = inspect.signature(make_task).parameters
    a = {k: task_args.get(k, params[k].default) for k in PREPROCESS_ARGS}
    fn = _preprocess_fn(
        a["image_size"],
        a["max_question_len"],
        a["antialias"],
        keep_meta=False,
        pad_position=a["pad_position"],
        image_height=a["image_height"],
    )

    def features(encoded: bytes, question: str) -> tuple[dict, bool]:
        out = fn({"id": "", "question": question, "answer": -1, "image": encoded})
        del out["label"]
        return out, len(_words(question)) + 2 > a["max_question_len"]

    return features


def _answer_text(value, label_names) -> str:
    return ANSWERS[int(value)] if int(value) in (0, 1) else ""  # -1: the split has no answers


# `chartjax-infer --task figureqa`: a FigureQA baseline's yes/no answer to `question` (FigureQA's
# own files call it `question_string`) about the chart `image`.
INFERENCE = InferenceSpec(
    name="figureqa",
    modality="image",
    default_template="figureqa",
    templates={"figureqa": "{question}"},
    target_field="answer",
    target_text=_answer_text,
    field_aliases={"question": ("question_string",)},
    output="yes_no",
    features=inference_features,
)


# ------------------------------------------------------------------ chartjax-score -----------


def _is_answer(value) -> bool:
    """A reference answer: 0/1, true/false, yes/no, or -1 where the split has none."""
    no_answer = type(value) is int and value == -1
    return no_answer or (
        isinstance(value, int | str) and figureqa_metrics.parse_answer(value) is not None
    )


ANSWER_FIELD = ("0/1, true/false, yes/no, or -1 where the split has no answers", _is_answer)


def _score_files(inputs: ScoreInputs):
    # A target that is not an answer (null, "maybe", NaN, [1]) would make the metrics
    # "unavailable" as if the split had no released answers: refused, naming file and line.
    check_fields(inputs.references, {"target": ANSWER_FIELD})
    ids = list(inputs.references)
    rows = [inputs.references[i] for i in ids]
    raw = [None if i in inputs.missing else inputs.predictions[i].get("prediction") for i in ids]
    scores = figureqa_metrics.figureqa_scores(
        raw,
        [r["target"] for r in rows],
        figure_types=field_of(rows, "figure_type"),
        question_ids=field_of(rows, "question_id"),
    )
    if "num_unparseable" in scores.metrics:  # of the predictions given (missing: num_missing)
        scores.metrics["num_unparseable"] -= sum(i in inputs.missing for i in ids)
    return scores


def _check_answer(value) -> str | None:
    """A yes/no answer: 0/1, true/false, or a text ("yes", "No.", "1"; unparseable text is
    scored wrong and counted in num_unparseable). A float such as 1.0 is refused: it is a
    score or a probability, not an answer."""
    if isinstance(value, bool | str) or (type(value) is int and value in (0, 1)):
        return None
    return f"prediction is {describe(value)}; expected 0/1, true/false or a yes/no text"


def _reference_row(ex: dict, split: str) -> dict:
    return {
        "target": int(ex["answer"]),
        "figure_type": _str(ex["figure_type"]),
        "question_id": int(ex["question_id"]),
    }


SCORER = FileScorer(
    "figureqa", "jsonl", _score_files, _reference_row, check_prediction=_check_answer
)
