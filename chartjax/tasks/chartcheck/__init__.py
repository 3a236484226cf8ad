"""ChartCheck (Akhtar et al., arXiv 2311.07453): verify a claim against a real-world chart and
explain why. One `mode` per kind of row of the paper's Tables 3-4. Prompts and targets are those
of the authors' code (`mubasharaak/ChartCheck`: `matcha_finetuning_ChartFC.py`,
`matcha_0_shot_baseline.py`, `classification_explanation_flanT5.py`; docs/corpora.md §1.8).

MatCha (`Features.modality = "image"`; the prompt is rendered as a header above the chart):
  matcha_class  "The chart below has the following caption: {caption}. Given the caption and the
                chart below, is the following claim true: {claim}?" -> "Yes" / "No".
  matcha_multi  the same + " Explain why?" -> "Yes. Explanation: {explanation}".
  matcha_5050   training: a claim is in the classification half when sha256(id) is even, else in
                the explanation half (stable across runs, processes and epochs); evaluation uses
                the multi prompt. The authors' script instead drew the prompt kind per batch with
                probability 0.5 (`explanation_pct`): the same mix in expectation, redrawn each
                epoch.
  `matcha_prompt="zero_shot_script"` swaps the classification prompt for the one of
  `matcha_0_shot_baseline.py`: "is the following claim supported by the chart: {claim} (Yes/No)"
  (the paper's appendix gives the caption prompt; which one made the zero-shot rows is
  [unverified]).
  PaliGemma (`Features.modality = "prefix_lm"`) reads the same MatCha prompts as its text
  prefix, the chart as image tokens (chartjax/tasks/core/prefix_lm.py).

Flan-T5 (`Features.modality = "text"`; {table} is DePlot's table of the chart, read from
`tables_file`, a predictions.jsonl of `chartjax-infer --task deplot --tfds chartcheck:<split>`):
  flan_class         "Classify if claim '{claim}' is true or false given this caption: {caption}
                     and this table: {table}.\\n Answer:" -> "true." / "false." (the authors'
                     "true. "; SentencePiece drops the trailing space).
  flan_multi         "Classify and explain if claim ... \\n Answer:" -> "{true|false}.
                     {explanation}". `prompt_setting` "zero" / "few" put the authors' instruction
                     (and, for "few", examples) before the prompt: `few_shot_source="official"` is
                     their fixed pair of Romania examples, "train" takes `few_shot_k` training
                     claims per class, the first by sha256(id), refuting then supporting.
  flan_explain_gold  "Explain why '{claim}' is {true|false} given this caption: {caption} and
                     table: {table}." -> "{explanation}".
  flan_explain_pred  the same, with the label predicted for the claim in `label_predictions` (a
                     predictions.jsonl of a classification run, e.g. flan_class) on the splits in
                     `pred_label_splits`; training and validation keep the gold label, as in the
                     authors' script. The paper used DeBERTa's labels: the predictions of
                     a chartcheck_classifier run (tasks/chartcheck/classifier.py). A predicted
                     label is written "True" / "False", as the authors' script wrote it at test
                     time (`explanation_generation_flanT5.py` at a904b10, lines 309-326), while
                     training shows the gold label in lower case (its label_dict_reverse).
  `table_format="official"` gives {table} as the authors did, `str(f.readlines())` of the table
  file (a Python list of lines, e.g. "['TITLE | \\n', ' a | 1']"); "text" gives the table text.

Scoring: accuracy / macro-F1 over TRUE/FALSE with the parser of the row (MatCha: first word
yes/no; Flan-T5: "true" anywhere, then "false"), `num_unparseable` (scored as wrong unless
`drop_unparseable`: then left out of both sides, as the Flan-T5 script's `compute_metrics` did,
and counted in `num_skipped`), breakdowns by chart type and reasoning type. Explanation metrics
(`explanation_*`, chartjax.metrics.chartcheck.explanation_scores) in the variant
`explanation_metrics` names (default: "matcha_test" for MatCha modes, "flan_t5_script" for
Flan-T5): MatCha on the text after "Explanation: " against the gold explanation, as
`matcha_test.py`; flan_multi on the whole output against the whole target, as the authors'
`compute_metrics` did; explanation modes on the output.

Test set 2 has two versions (tfds_builders/chartcheck/test_sets.py): the build records which one
it holds, and every metrics.json of test_two carries it in `provenance.libraries`
("chartcheck_test_two": "paper_2023 ..." or "reannotated_2024 ...";
chartjax/tasks/chartcheck/test_sets.py).

The ChartCheck room (tasks/chartcheck/): these seq2seq rows; classifier.py (the DeBERTa and
TAPAS rows); test_sets.py (which test set 2 a score is on).
"""

from __future__ import annotations

import hashlib
import io
import logging

import gin

from chartjax.data import sources, tables
from chartjax.metrics import chartcheck as cc_metrics
from chartjax.metrics import prediction_files
from chartjax.metrics.prediction_files import TEXT, TEXT_LIST, check_fields, field_of
from chartjax.metrics.scores import Scores
from chartjax.tasks.chartcheck.test_sets import test_set_provenance
from chartjax.tasks.core import seq2seq
from chartjax.tasks.core.task import FileScorer, InferenceSpec, ScoreInputs, Task, text_prediction

MODES = (
    "matcha_class",
    "matcha_multi",
    "matcha_5050",
    "flan_class",
    "flan_multi",
    "flan_explain_gold",
    "flan_explain_pred",
)
# The builder's example ids start with the CSV stem (docs/design.md §8).
SPLIT_OF_STEM = {"train": "train", "val": "validation", "test": "test_one", "test_two": "test_two"}
FIELD_KEYS = ("id", "caption", "claim", "label", "explanation", "chart_type", "reasoning_types")
SUPPORTS = 1  # ClassLabel index of "supports" in the builder (refutes = 0)

MATCHA_CLASS = (
    "The chart below has the following caption: {caption}. Given the caption and the "
    "chart below, is the following claim true: {claim}?"
)
MATCHA_ZERO_SHOT_SCRIPT = "is the following claim supported by the chart: {claim} (Yes/No)"
EXPLAIN_WHY = " Explain why?"
FLAN_CLASS = (
    "Classify if claim '{claim}' is true or false given this caption: {caption} and "
    "this table: {table}.\n Answer:"
)
FLAN_MULTI = (
    "Classify and explain if claim '{claim}' is true or false given this caption: "
    "{caption} and this table: {table}.\n Answer:"
)
FLAN_EXPLAIN = "Explain why '{claim}' is {label} given this caption: {caption} and table: {table}."
# The authors' instruction prefixes (classification_explanation_flanT5.py, as written there,
# trailing spaces included); the prompt follows after one space.
FLAN_ZERO_PREFIX = (
    "\nGiven a claim, a table and it's caption, decide if the claim is true or "
    "false. \n\nComplete the following:\n\n"
)
_FEW_HEAD = (
    "\nGiven a claim, a table and it's caption, decide if the claim is true or false. "
    "\n\nExamples: \n"
)
_FEW_TAIL = "\nComplete the following:\n"
_FEW_EXAMPLE = (
    "Classify and explain if claim '{claim}' is true or false given this caption: "
    "'{caption}' and this table: '{table}'.\nAnswer: {label}. {explanation}"
)
_ROMANIA = dict(
    caption="Electricity production in Romania by source of energy.",
    table="TITLE | \n Other | 2 \n Hydro | 36% \n Coal | 33% \n Nuclear | 19% \n Gas | 10%",
)
OFFICIAL_FEW_SHOT = [
    dict(
        _ROMANIA,
        claim="Coal is the second-lowest source of energy for electricity production in Romania.",
        label="false",
        explanation="The chart shows that Coal contributes to 33% of the electricity production "
        "in Romania, which is the second-highest percentage among all the sources "
        "of energy listed in the chart.",
    ),
    dict(
        _ROMANIA,
        claim="Hydro is the primary source of energy for electricity production in Romania.",
        label="true",
        explanation="The chart shows that Hydro contributes to 36% of the electricity production "
        "in Romania, which is the highest percentage among all the sources of energy "
        "listed in the chart. ",
    ),
]


# The label word a predicted label is shown with (the authors' test-time pred_label).
PRED_LABEL_WORDS = {"true": "True", "false": "False"}


def id_hash(example_id: str) -> int:
    return int(hashlib.sha256(example_id.encode("utf-8")).hexdigest(), 16)


def in_explanation_half(example_id: str) -> bool:
    """matcha_5050: the second half (explanation prompts) holds the ids with an odd sha256."""
    return id_hash(example_id) % 2 == 1


def split_of(example_id: str) -> str:
    stem = example_id.split(":", 1)[0]  # the index part may hold anything
    if stem not in SPLIT_OF_STEM:
        raise ValueError(f"chartcheck id {example_id!r}: unknown CSV stem {stem!r}")
    return SPLIT_OF_STEM[stem]


def read_id_rows(path: str, what: str) -> dict[str, dict]:
    """`{id: row}` of another run's predictions.jsonl (every row needs an id and a prediction)."""
    rows = prediction_files.read_id_rows(path, what, required=("id", "prediction"))
    if not rows:
        raise ValueError(f"{what} {path}: no rows")
    return rows


def format_table(prediction: str, table_format: str) -> str:
    """DePlot's output as the Flan-T5 prompt shows it (newlines restored from `<0x0A>`)."""
    text = prediction.replace(tables.BYTE_NEWLINE, "\n")
    if table_format == "official":
        return str(io.StringIO(text, newline=None).readlines())  # = str(f.readlines())
    return text


def predicted_label(row: dict) -> str:
    """ "true"/"false" from a classification run's row: its parsed `label` if it has one, else
    the authors' rule for reading predicted labels ("false" in the text -> false, else true;
    explanation_generation_flanT5.py at a904b10, lines 309-312)."""
    label = row.get("label")
    if label in cc_metrics.LABELS:
        return label.lower()
    return "false" if "false" in str(row["prediction"]).lower() else "true"


def explanation_text(mode: str, text: str) -> str:
    """The explanation scored for an output: MatCha's text after "Explanation: " (pieces after
    a repeated one joined by a space, none: ""), as matcha_test.py line 153 cut it."""
    if mode.startswith("matcha"):
        return " ".join(text.split("Explanation: ")[1:])
    return text


def few_shot_prefix(examples: list[dict]) -> str:
    """The authors' few-shot instruction around `examples` (their layout, any number)."""
    body = "\n\n".join(_FEW_EXAMPLE.format(**e) for e in examples)
    return _FEW_HEAD + body + "\n" + _FEW_TAIL


def pick_few_shot(train_examples: list[dict], k: int) -> list[dict]:
    """k refuting and k supporting claims, the first of each by sha256(id), interleaved."""
    ranked = sorted(train_examples, key=lambda e: id_hash(e["id"]))
    by = {lab: [e for e in ranked if e["label"] == lab][:k] for lab in ("FALSE", "TRUE")}
    for lab, got in by.items():
        if len(got) < k:
            raise ValueError(f"few_shot_k={k}: the training split has only {len(got)} {lab} claims")
    return [e for pair in zip(by["FALSE"], by["TRUE"]) for e in pair]


def make_expand(
    mode: str,
    *,
    train_split: str,
    matcha_prompt: str = "paper",
    prompt_setting: str = "finetune",
    few_shot: str = "",
    table_for=None,
    label_for=None,
):
    """expand(example) -> [record]; `table_for(id)` / `label_for(id)` give DePlot tables and
    predicted labels (None where the mode needs none)."""

    def expand(ex: dict) -> list[dict]:
        eid = ex["id"]
        label = "TRUE" if int(ex["label"]) == SUPPORTS else "FALSE"
        yes_no = "Yes" if label == "TRUE" else "No"
        true_false = label.lower()
        caption, claim, expl = ex["caption"], ex["claim"], ex["explanation"]
        meta = {
            "label": label,
            "chart_type": ex["chart_type"],
            "reasoning_types": list(ex["reasoning_types"]),
            "explanation": expl,
        }
        if mode.startswith("matcha"):
            multi = mode == "matcha_multi" or (
                mode == "matcha_5050" and (split_of(eid) != train_split or in_explanation_half(eid))
            )
            template = (
                MATCHA_ZERO_SHOT_SCRIPT if matcha_prompt == "zero_shot_script" else MATCHA_CLASS
            )
            prompt = template.format(caption=caption, claim=claim)
            if multi:
                prompt, target = prompt + EXPLAIN_WHY, f"{yes_no}. Explanation: {expl}"
            else:
                target = yes_no
            meta["prompt_kind"] = "multi" if multi else "class"
            return [{"id": eid, "prompt": prompt, "target": target, "meta": meta}]
        table = table_for(eid)
        if mode in ("flan_class", "flan_multi"):
            template = FLAN_CLASS if mode == "flan_class" else FLAN_MULTI
            prompt = template.format(claim=claim, caption=caption, table=table)
            if prompt_setting == "zero":
                prompt = f"{FLAN_ZERO_PREFIX} {prompt}"
            elif prompt_setting == "few":
                prompt = f"{few_shot} {prompt}"
            target = f"{true_false}." if mode == "flan_class" else f"{true_false}. {expl}"
        else:
            predicted = label_for(eid) if label_for else None
            shown = PRED_LABEL_WORDS[predicted] if predicted else true_false
            meta["input_label"] = shown
            prompt = FLAN_EXPLAIN.format(claim=claim, label=shown, caption=caption, table=table)
            target = expl
        return [{"id": eid, "prompt": prompt, "target": target, "meta": meta}]

    return expand


def default_explanation_metrics(mode: str) -> str:
    """The authors' scoring script of a mode: matcha_test.py for MatCha, else the Flan-T5's."""
    return "matcha_test" if mode.startswith("matcha") else "flan_t5_script"


def make_score_fn(
    mode: str,
    *,
    drop_unparseable: bool = False,
    explanation_metrics: str | None = None,
    bertscore_model=None,
    bleurt_checkpoint=None,
    provenance=None,
):
    """score_fn(texts, records, split) -> (Scores, extra rows); `provenance(split)` adds to the
    scores' libraries (the test set a split holds)."""
    classify = not mode.startswith("flan_explain")
    explain = mode not in ("matcha_class", "flan_class")
    parser = "matcha" if mode.startswith("matcha") else "flan_t5"
    variant = explanation_metrics or default_explanation_metrics(mode)

    def score_fn(texts, records, split):
        out = Scores()
        if provenance is not None:
            out.libraries.update(provenance(split))
        extra = [{"gold_label": r["meta"]["label"]} for r in records]
        if classify:
            out.update(
                cc_metrics.chartcheck_scores(
                    texts,
                    [r["meta"]["label"] for r in records],
                    parser=parser,
                    chart_types=[r["meta"]["chart_type"] for r in records],
                    reasoning_types=[r["meta"]["reasoning_types"] for r in records],
                    drop_unparseable=drop_unparseable,
                )
            )
            for row, text in zip(extra, texts):
                row["label"] = cc_metrics.PARSERS[parser](text)
        if explain:
            refs = [
                r["meta"]["explanation"] if mode.startswith("matcha") else r["target"]
                for r in records
            ]
            out.update(
                cc_metrics.explanation_scores(
                    [explanation_text(mode, t) for t in texts],
                    refs,
                    variant=variant,
                    bertscore_model=bertscore_model,
                    bleurt_checkpoint=bleurt_checkpoint,
                )
            )
        return out, extra

    return score_fn


def check_ids(source: sources.TfdsSource, splits, rows: dict, path: str, what: str) -> None:
    """Fail before training when `rows` lacks an id of `splits` (naming the file and the id)."""
    for split in splits:
        prediction_files.require_ids(rows, source.ids(split), path, what, split)


def _train_examples(source: sources.TfdsSource, split: str) -> list[dict]:
    out = []
    for ex in source.examples(split, 0, 1):
        ex = {k: sources.as_python(ex[k]) for k in FIELD_KEYS}
        ex["label"] = "TRUE" if int(ex["label"]) == SUPPORTS else "FALSE"
        out.append(ex)
    return out


@gin.configurable("chartcheck_task")
def make_task(
    data_dir: str = "~/tensorflow_datasets",
    mode: str = "matcha_class",
    *,
    train_split: str = "train",
    eval_splits: tuple[str, ...] = ("validation", "test_one", "test_two"),
    matcha_prompt: str = "paper",
    tables_file: str | None = None,
    table_format: str = "official",
    prompt_setting: str = "finetune",
    few_shot_source: str = "official",
    few_shot_k: int = 1,
    label_predictions: str | None = None,
    pred_label_splits: tuple[str, ...] = ("test_one", "test_two"),
    drop_unparseable: bool = False,
    explanation_metrics: str | None = None,
    bertscore_model: str | None = None,
    bleurt_checkpoint: str | None = None,
    shuffle_buffer: int = 10_000,
    check_files: bool = True,
    features=None,
    decoding=None,
) -> Task:
    """The ChartCheck task in `mode` (see the module docstring).

    `drop_unparseable`: verdicts with neither label word are left out of both sides (counted in
    `num_skipped`), as the Flan-T5 script's compute_metrics did; else they count as wrong.
    `explanation_metrics`: a variant of chartjax.metrics.chartcheck.EXPLANATION_VARIANTS (None:
    the mode's authors' script); `bertscore_model` / `bleurt_checkpoint`: local copies of its
    models (else those metrics are `unavailable`).

    `check_files`: before anything runs, `tables_file` must hold every id of the eval splits (and
    of the training split when `prompt_setting` is "finetune"; zero-/few-shot prompts are for
    evaluation), `label_predictions` every id of `pred_label_splits` among them; a missing id is
    a KeyError naming the file and the id.
    """
    features = features or seq2seq.Features()
    decoding = decoding or seq2seq.Decoding()
    _check_args(
        mode,
        matcha_prompt,
        table_format,
        prompt_setting,
        few_shot_source,
        few_shot_k,
        features,
        tables_file,
        label_predictions,
    )
    source = sources.TfdsSource("chartcheck", data_dir)
    table_for = label_for = None
    few_shot = ""
    if mode.startswith("flan"):
        table_rows = read_id_rows(tables_file, "tables_file")
        # Zero-/few-shot prompts are for evaluation only: their tables need no training ids.
        needed = {*eval_splits, *([train_split] if prompt_setting == "finetune" else [])}

        def table_for(eid):
            return format_table(
                str(
                    prediction_files.lookup(table_rows, eid, tables_file, "tables_file")[
                        "prediction"
                    ]
                ),
                table_format,
            )

        if prompt_setting == "few":
            if few_shot_source == "official":
                few_shot = few_shot_prefix(OFFICIAL_FEW_SHOT)
            else:
                chosen = pick_few_shot(_train_examples(source, train_split), few_shot_k)
                few_shot = few_shot_prefix(
                    [dict(e, label=e["label"].lower(), table=table_for(e["id"])) for e in chosen]
                )
        if check_files:
            check_ids(source, sorted(needed), table_rows, tables_file, "tables_file")
    if mode == "flan_explain_pred":
        label_rows = read_id_rows(label_predictions, "label_predictions")
        pred_splits = set(pred_label_splits)

        def label_for(eid):
            if split_of(eid) not in pred_splits:
                return None
            return predicted_label(
                prediction_files.lookup(label_rows, eid, label_predictions, "label_predictions")
            )

        if check_files:
            check_ids(
                source,
                sorted(pred_splits & {train_split, *eval_splits}),
                label_rows,
                label_predictions,
                "label_predictions",
            )
    expand = make_expand(
        mode,
        train_split=train_split,
        matcha_prompt=matcha_prompt,
        prompt_setting=prompt_setting,
        few_shot=few_shot,
        table_for=table_for,
        label_for=label_for,
    )
    if (
        explanation_metrics is not None
        and explanation_metrics not in cc_metrics.EXPLANATION_VARIANTS
    ):
        raise ValueError(
            f"chartcheck_task: explanation_metrics {explanation_metrics!r} is not one of "
            f"{sorted(cc_metrics.EXPLANATION_VARIANTS)}"
        )

    def provenance(split):
        return test_set_provenance(source.builder_dir, split)

    score_fn = make_score_fn(
        mode,
        drop_unparseable=drop_unparseable,
        explanation_metrics=explanation_metrics,
        bertscore_model=bertscore_model,
        bleurt_checkpoint=bleurt_checkpoint,
        provenance=provenance,
    )
    logging.info("chartcheck: mode %s, train %s, eval %s", mode, train_split, eval_splits)
    return seq2seq.make_task(
        name="chartcheck",
        dataset="chartcheck",
        data_dir=data_dir,
        train_split=train_split,
        eval_splits=eval_splits,
        field_keys=FIELD_KEYS,
        expand=expand,
        score_fn=score_fn,
        features=features,
        decoding=decoding,
        shuffle_buffer=shuffle_buffer,
    )


def _check_args(
    mode,
    matcha_prompt,
    table_format,
    prompt_setting,
    few_shot_source,
    few_shot_k,
    features,
    tables_file,
    label_predictions,
):
    def need(ok, msg):
        if not ok:
            raise ValueError(f"chartcheck_task: {msg}")

    need(mode in MODES, f"mode {mode!r} is not one of {MODES}")
    need(
        matcha_prompt in ("paper", "zero_shot_script"),
        f"matcha_prompt {matcha_prompt!r} is not 'paper' or 'zero_shot_script'",
    )
    need(
        table_format in ("official", "text"),
        f"table_format {table_format!r} is not 'official' or 'text'",
    )
    need(
        prompt_setting in ("finetune", "zero", "few"),
        f"prompt_setting {prompt_setting!r} is not 'finetune', 'zero' or 'few'",
    )
    need(
        few_shot_source in ("official", "train"),
        f"few_shot_source {few_shot_source!r} is not 'official' or 'train'",
    )
    need(few_shot_k >= 1, f"few_shot_k must be >= 1, not {few_shot_k}")
    # The MatCha prompts read the chart: rendered above it ("image") or as PaliGemma's prefix.
    want = ("image", seq2seq.PREFIX_LM) if mode.startswith("matcha") else ("text",)
    need(
        features.modality in want,
        f"mode {mode!r} needs Features.modality = {' or '.join(map(repr, want))}, "
        f"not {features.modality!r}",
    )
    if mode.startswith("flan"):
        need(tables_file, f"mode {mode!r} needs tables_file (DePlot predictions.jsonl)")
    need(
        prompt_setting == "finetune" or mode in ("flan_class", "flan_multi"),
        f"prompt_setting {prompt_setting!r} applies to flan_class / flan_multi only",
    )
    if mode == "flan_explain_pred":
        need(label_predictions, "mode 'flan_explain_pred' needs label_predictions")


# ------------------------------------------------------------------ inference, scoring -------


def _target_text(value, label_names) -> str:
    """A TFDS reference as the MatCha classification target (supports -> Yes, refutes -> No)."""
    if label_names:
        name = label_names[value]
        return {"supports": "Yes", "refutes": "No"}.get(name, name)
    return str(value)


# Named `--template` prompts; {table} is DePlot's table text. The same strings the recipes train
# with, so inference sees the prompts of training.
TEMPLATES = {
    "chartcheck": MATCHA_CLASS,  # MatCha classification -> Yes / No
    "chartcheck_explain": MATCHA_CLASS + EXPLAIN_WHY,  # MatCha multi-task
    "chartcheck_flan_class": FLAN_CLASS,  # Flan-T5: claim, caption, table -> true / false
    "chartcheck_flan_multi": FLAN_MULTI,  # -> "true. <explanation>"
    "chartcheck_flan_explain": FLAN_EXPLAIN,  # claim, label, caption, table -> explanation
}
INFERENCE = InferenceSpec(
    name="chartcheck",
    modality="image",
    default_template="chartcheck",
    templates=TEMPLATES,
    target_field="label",
    target_text=_target_text,
)


def _is_gold(value) -> bool:
    try:
        cc_metrics.parse_gold(value)
    except ValueError:
        return False
    return True


# The reference fields and their types ("Filter" as reasoning_types would be six letters).
REFERENCE_FIELDS = {
    "target": ("a label: TRUE/FALSE, supports/refutes, Yes/No or 1/0", _is_gold),
    "explanation": TEXT,
    "chart_type": TEXT,
    "reasoning_types": TEXT_LIST,
}


def _score_files(inputs: ScoreInputs) -> Scores:
    check_fields(inputs.references, REFERENCE_FIELDS)
    ids = list(inputs.references)
    rows = [inputs.references[i] for i in ids]
    preds = inputs.predictions
    # A missing verdict is the empty text: no label (wrong), 0 in the explanation metrics.
    outputs = ["" if i in inputs.missing else str(preds[i]["prediction"]) for i in ids]
    # MatCha's targets are Yes/No: use its parser when every output starts that way.
    matcha = all(cc_metrics.parse_matcha(o) is not None for o in outputs if o) and any(outputs)
    scores = cc_metrics.chartcheck_scores(
        outputs,
        [r["target"] for r in rows],
        parser="matcha" if matcha else "flan_t5",
        chart_types=field_of(rows, "chart_type"),
        reasoning_types=field_of(rows, "reasoning_types"),
    )
    if "num_unparseable" in scores.metrics:  # of the predictions given (missing: num_missing)
        scores.metrics["num_unparseable"] -= sum(i in inputs.missing for i in ids)
    gold = field_of(rows, "explanation")
    if gold is not None:
        compat = inputs.options.get("compat") or "spec"
        # matcha_test.py scored the text after "Explanation: " of MatCha's outputs.
        mode = "matcha_multi" if compat == "matcha_test" else "flan_multi"
        expl = [
            "" if i in inputs.missing else preds[i].get("explanation", explanation_text(mode, o))
            for i, o in zip(ids, outputs)
        ]
        scores.update(
            cc_metrics.explanation_scores(
                expl,
                gold,
                variant="flan_t5_script" if compat == "spec" else compat,
                bertscore_model=inputs.options.get("bertscore_model"),
                bleurt_checkpoint=inputs.options.get("bleurt_checkpoint"),
            )
        )
    return scores


def _reference_row(ex: dict, split: str) -> dict:
    def s(v):
        return v.decode("utf-8") if isinstance(v, bytes) else v

    return {
        "target": ("FALSE", "TRUE")[int(ex["label"])],  # label 1 = supports = TRUE
        "explanation": s(ex["explanation"]),
        "chart_type": s(ex["chart_type"]),
        "reasoning_types": [s(r) for r in ex["reasoning_types"]],
    }


# --compat: the explanation metrics' variant ("spec" = the Flan-T5 script's).
SCORER = FileScorer(
    "chartcheck",
    "jsonl",
    _score_files,
    _reference_row,
    compat=("spec", *cc_metrics.EXPLANATION_VARIANTS),
    check_prediction=text_prediction,
)
