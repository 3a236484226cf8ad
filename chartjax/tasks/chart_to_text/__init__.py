"""Chart-to-Text (Kantharaj et al., ACL 2022): summarize a Statista or Pew chart.

Modes (one per kind of row of the paper's Table 4 that chartjax models can run):
  tab_t5     Statista, TAB-T5: "translate Chart to Text: {title} <s> {table}" -> summary, with the
             gold data table. The prefix and t5-base come from the authors'
             `baseline_models/bart_t5/README.md` (`--source_prefix "translate Chart to Text: "`;
             it names "translate Table to Text: " for T5 evaluation, taken as a slip); "we
             concatenate the chart title and the chart together by separating them with <s>"
             (the spacing around <s> is [unverified]). The table is unrolled row by row as the
             data records the paper's Figure 3c shows ("Quarter|Q3_'20|x|bar_chart ...",
             `table.records`, `table_format="records"`), or DePlot's linearized form
             (`table_format="linearized"`).
  ocr_t5     OCR-T5: "translate Chart to Text: {title} <s> {ocr text}" -> summary. Pew: the
             release's OCR text (`data/<id>.txt`, phrases joined by " | "); Statista, whose only
             OCR text is `bboxes/<n>.json`: its phrases in `ocr_order` joined by " | " ("we
             concatenate all OCR-extracted sentences from top to bottom order"; that the
             authors fed these files is [inferred]). `ocr_order` (ocr_boxes.py):
             "top_to_bottom" (lines top to bottom, left to right within a line) or "release"
             (the file's order, which for Pew is data/<id>.txt's).
             With `boxes=True` (OCR-T5 with boxes) the phrases come from the bbox file for
             Pew too (in `ocr_order`; "release" gives data/<id>.txt's text, as the authors'
             BboxPreprocess.py pairs its phrases with the boxes one to one), and the batch
             gains `encoder_input_boxes [B, L, 4]`: each token of a phrase its phrase's box
             divided by the image's width and height, zeros for the other tokens; the model
             needs T5Config.box_embedding. A chart without a bbox file reads Pew's
             data/<id>.txt (Statista: no OCR text) with zero boxes.
  image      Pix2Struct / MatCha: the chart image alone (no header) -> summary. MatCha's
             chart-to-text fine-tuning format is not public (docs/corpora.md §5.3): [unverified].
             PaliGemma (`Features.modality = "prefix_lm"`): the chart as image tokens, the
             prefix `Features.prompt_template` made of the empty prompt (e.g. "caption en").
  deplot_t5  as tab_t5 with the table DePlot predicted for the chart (`tables_file`, a
             predictions.jsonl of `chartjax-infer --task deplot --tfds chart_to_text/<config>:
             <split>`), parsed and written in `table_format`: our stand-in for the paper's
             automatically extracted tables (TAB_OCR rows, ChartOCR-based).

Scoring: chartjax.metrics.chart_to_text.chart_to_text_scores (BLEU, ROUGE, METEOR, CIDEr,
content selection, BLEURT / perplexity with their models), breakdowns by chart type and
complexity. Content selection reads the gold data records (Statista `table.records`) or, for
Pew, the OCR text (the official script is `ocrdata_auto_eval.py`: [inferred]). A BLEU over 1
by float rounding (sacrebleu scores a perfect corpus 100.00000000000004) is clipped to 1.

The Chart-to-Text room (tasks/chart_to_text/): these seq2seq rows; caption.py (the
image-captioning row and its Barlow Twins pretraining); records.py (Chart2text, Field-Infuse);
ocr_boxes.py (OCR phrases and boxes).
"""

from __future__ import annotations

import json

import gin
import numpy as np

from chartjax.data import sources, tables
from chartjax.data.table_records import records_from_table
from chartjax.metrics import prediction_files
from chartjax.metrics.chart_to_text import chart_to_text_scores
from chartjax.metrics.prediction_files import TEXT, TEXTS, check_fields, field_of
from chartjax.tasks.chart_to_text import ocr_boxes
from chartjax.tasks.core import seq2seq
from chartjax.tasks.core.task import FileScorer, InferenceSpec, ScoreInputs, Task, text_prediction

CONFIGS = ("statista", "pew")
MODES = ("tab_t5", "ocr_t5", "image", "deplot_t5")
TABLE_FORMATS = ("records", "linearized")
COMPLEXITY = ("simple", "complex")  # the builder's ClassLabel names
PREFIX = "translate Chart to Text: "
SEPARATOR = " <s> "
COMMON_KEYS = ("id", "title", "summary", "chart_type", "complexity", "ocr.text", "ocr.bbox")
CONFIG_KEYS = {"statista": ("table.linearized", "table.records"), "pew": ("ocr_data",)}


def ocr_phrases(ex: dict, order: str, image_wh=None) -> list[tuple[str, list[float]]]:
    """The bbox file's [(phrase, box)] in `order`; boxes divided by `image_wh` when given."""
    return ocr_boxes.ordered_phrases(ex["ocr.text"], ex["ocr.bbox"], order, image_wh)


def ocr_text(ex: dict, config: str, order: str = "top_to_bottom") -> str:
    """The OCR input: Pew's release text as written, else the bbox file's phrases in `order`,
    joined by " | "."""
    if config == "pew":
        return ex["ocr_data"]
    return ocr_boxes.SEPARATOR.join(text for text, _ in ocr_phrases(ex, order))


def table_text(prediction: str, table_format: str) -> str:
    """A predicted (DePlot) table in the form the model reads; its title line is dropped (the
    chart's title is in the prompt already)."""
    table = tables.parse(prediction)
    if table_format == "linearized":
        return tables.linearize(table.header, table.rows) if table.header else ""
    if not table.header:
        return ""
    width = max([len(table.header), *map(len, table.rows)])
    header = list(table.header) + [""] * (width - len(table.header))  # -> "Unnamed:_j"
    return records_from_table(header, table.rows)


def make_expand(
    mode: str,
    config: str,
    *,
    table_format: str = "records",
    prefix: str = PREFIX,
    separator: str = SEPARATOR,
    table_for=None,
    ocr_order: str = "top_to_bottom",
    boxes: bool = False,
):
    """expand(example) -> [record]; `table_for(id)` gives DePlot's table (deplot_t5).

    With `boxes` (ocr_t5) the example also carries its encoded `image` (for the size) and
    meta["ocr_boxes"] lists `[start, end, x_min, y_min, x_max, y_max]` per phrase: its
    character span in the prompt and its box in [0, 1] (`box_features` turns it into tokens)."""

    def expand(ex: dict) -> list[dict]:
        eid, title = ex["id"], ex["title"].strip()
        spans = []
        if mode == "tab_t5":
            data = ex["table.records"] if table_format == "records" else ex["table.linearized"]
        elif mode == "deplot_t5":
            data = table_text(table_for(eid), table_format)
        elif mode == "ocr_t5" and boxes:
            phrases = ocr_phrases(ex, ocr_order, ocr_boxes.image_size(ex["image"]))
            head = f"{prefix}{title}{separator}"
            if phrases or config != "pew":
                prompt, spans = ocr_boxes.join(head, phrases)
                data = prompt[len(head) :]
            else:  # a Pew chart without a bbox file: its OCR text, no boxes
                data = ex["ocr_data"]
        elif mode == "ocr_t5":
            data = ocr_text(ex, config, ocr_order)
        prompt = "" if mode == "image" else f"{prefix}{title}{separator}{data}"
        meta = {
            "chart_type": ex["chart_type"],
            "complexity": COMPLEXITY[int(ex["complexity"])],
            "title": title,
            "cs_data": ex["table.records"] if config == "statista" else ex["ocr_data"],
        }
        if boxes:
            meta["ocr_boxes"] = [[s, e, *box] for s, e, box in spans]
        return [{"id": eid, "prompt": prompt, "target": ex["summary"], "meta": meta}]

    return expand


def make_score_fn(*, bleurt_checkpoint=None, ppl_model=None, bleu_tokenize: str = "13a"):
    def score_fn(texts, records, split):
        metas = [r["meta"] for r in records]
        scores = chart_to_text_scores(
            texts,
            [r["target"] for r in records],
            records=[m["cs_data"] for m in metas],
            titles=[m["title"] for m in metas],
            groups={
                "chart_type": [m["chart_type"] for m in metas],
                "complexity": [m["complexity"] for m in metas],
            },
            bleu_tokenize=bleu_tokenize,
            bleurt_checkpoint=bleurt_checkpoint,
            ppl_model=ppl_model,
        )
        return scores, None

    return score_fn


@gin.configurable("chart_to_text_task")
def make_task(
    data_dir: str = "~/tensorflow_datasets",
    config: str = "statista",
    mode: str = "tab_t5",
    *,
    train_split: str = "train",
    eval_splits: tuple[str, ...] = ("validation", "test"),
    tables_file: str | None = None,
    table_format: str = "records",
    prefix: str = PREFIX,
    separator: str = SEPARATOR,
    bleurt_checkpoint: str | None = None,
    ppl_model: str | None = None,
    bleu_tokenize: str = "13a",
    shuffle_buffer: int = 10_000,
    check_files: bool = True,
    ocr_order: str = "top_to_bottom",
    boxes: bool = False,
    features=None,
    decoding=None,
) -> Task:
    """The Chart-to-Text task on `config` in `mode` (see the module docstring).

    `check_files`: before anything runs, `tables_file` must hold every id of the training and
    eval splits (a missing id is a KeyError naming the file and the id).
    """
    features = features or seq2seq.Features()
    decoding = decoding or seq2seq.Decoding()
    _check_args(config, mode, table_format, features, tables_file, ocr_order, boxes)
    dataset = f"chart_to_text/{config}"
    table_for = None
    if mode == "deplot_t5":
        rows = prediction_files.read_id_rows(
            tables_file, "tables_file", required=("id", "prediction")
        )

        def table_for(eid):
            return str(prediction_files.lookup(rows, eid, tables_file, "tables_file")["prediction"])

        if check_files:
            source = sources.TfdsSource(dataset, data_dir)
            for split in sorted({train_split, *eval_splits}):
                prediction_files.require_ids(
                    rows, source.ids(split), tables_file, "tables_file", split
                )
    expand = make_expand(
        mode,
        config,
        table_format=table_format,
        prefix=prefix,
        separator=separator,
        table_for=table_for,
        ocr_order=ocr_order,
        boxes=boxes,
    )
    task = seq2seq.make_task(
        name="chart_to_text",
        dataset=dataset,
        data_dir=data_dir,
        train_split=train_split,
        eval_splits=eval_splits,
        field_keys=COMMON_KEYS + CONFIG_KEYS[config] + (("image",) if boxes else ()),
        expand=expand,
        score_fn=make_score_fn(
            bleurt_checkpoint=bleurt_checkpoint, ppl_model=ppl_model, bleu_tokenize=bleu_tokenize
        ),
        features=features,
        decoding=decoding,
        shuffle_buffer=shuffle_buffer,
        encoded_keys=("image",) if boxes else (),  # only its size is read
    )
    return box_features(task, features) if boxes else task


def box_features(task: Task, features) -> Task:
    """`task` whose examples also give `encoder_input_boxes [max_input_len, 4]` (a model input),
    from the prompt and its meta["ocr_boxes"] spans (ocr_boxes.py); the tokens are recomputed
    with them, equal to the plain prompt's."""
    import dataclasses

    from chartjax.data import vocab as vocab_lib

    vocab = vocab_lib.open_vocabulary(features.vocab_file)
    if not isinstance(vocab, vocab_lib.Vocabulary):
        raise ValueError(
            f"chart_to_text_task: boxes need a SentencePiece vocabulary (T5), not "
            f"{features.vocab_file}"
        )
    length = features.max_input_len

    def make(keep_host):
        base = task.features(keep_host)

        def fn(rec):
            out = base(rec)
            meta = json.loads(sources.as_python(rec["meta"]))
            spans = [(int(s), int(e), box) for s, e, *box in meta["ocr_boxes"]]
            tokens, boxes = ocr_boxes.token_boxes(
                vocab.sp, sources.as_python(rec["prompt"]), spans, length
            )
            out["encoder_input_tokens"] = np.asarray(tokens, np.int32)
            out["encoder_input_boxes"] = np.asarray(boxes, np.float32)
            return out

        return fn

    return dataclasses.replace(
        task, features=make, model_inputs=(*task.model_inputs, "encoder_input_boxes")
    )


def _check_args(config, mode, table_format, features, tables_file, ocr_order, boxes):
    def need(ok, msg):
        if not ok:
            raise ValueError(f"chart_to_text_task: {msg}")

    need(config in CONFIGS, f"config {config!r} is not one of {CONFIGS}")
    need(mode in MODES, f"mode {mode!r} is not one of {MODES}")
    need(
        table_format in TABLE_FORMATS,
        f"table_format {table_format!r} is not one of {TABLE_FORMATS}",
    )
    need(
        not (mode == "tab_t5" and config == "pew"),
        "mode 'tab_t5' needs gold data tables, which Pew does not have (use ocr_t5 or deplot_t5)",
    )
    # The chart alone: Pix2Struct's patches ("image") or PaliGemma's image tokens.
    want = ("image", seq2seq.PREFIX_LM) if mode == "image" else ("text",)
    need(
        features.modality in want,
        f"mode {mode!r} needs Features.modality = {' or '.join(map(repr, want))}, "
        f"not {features.modality!r}",
    )
    if mode == "deplot_t5":
        need(tables_file, "mode 'deplot_t5' needs tables_file (DePlot predictions.jsonl)")
    need(
        ocr_order in ocr_boxes.ORDERS,
        f"ocr_order {ocr_order!r} is not one of {ocr_boxes.ORDERS}",
    )
    need(not boxes or mode == "ocr_t5", f"boxes=True needs mode 'ocr_t5', not {mode!r}")


# ------------------------------------------------------------------ inference, scoring -------

# A chart-to-text image model (MatCha / Pix2Struct) summarizes the chart alone.
INFERENCE = InferenceSpec(
    name="summary", modality="image", default_template="", target_field="summary"
)


# The reference fields and their types (a record table or title of NaN would crash CS).
REFERENCE_FIELDS = {
    "target": TEXTS,
    **dict.fromkeys(("records", "title", "split", "chart_type", "complexity"), TEXT),
}


def _score_files(inputs: ScoreInputs):
    check_fields(inputs.references, REFERENCE_FIELDS)
    ids = list(inputs.references)
    rows = [inputs.references[i] for i in ids]
    # A missing summary is the empty text: 0 in BLEU, ROUGE, METEOR, CIDEr and CS.
    outputs = ["" if i in inputs.missing else str(inputs.predictions[i]["prediction"]) for i in ids]
    groups = {k: v for k in ("split", "chart_type", "complexity") if (v := field_of(rows, k))}
    return chart_to_text_scores(
        outputs,
        [r["target"] for r in rows],
        records=field_of(rows, "records"),
        titles=field_of(rows, "title"),
        groups=groups,
        bleurt_checkpoint=inputs.options.get("bleurt_checkpoint"),
        ppl_model=inputs.options.get("ppl_model"),
    )


def _reference_row(ex: dict, split: str) -> dict:
    def s(v):
        return v.decode("utf-8") if isinstance(v, bytes) else v

    records = ex["table"]["records"] if "table" in ex else ex.get("ocr_data", b"")
    return {
        "target": s(ex["summary"]),
        "title": s(ex["title"]),
        "records": s(records),
        "chart_type": s(ex["chart_type"]),
        "complexity": COMPLEXITY[int(ex["complexity"])],
        "split": split,
    }


SCORER = FileScorer(
    "chart_to_text", "jsonl", _score_files, _reference_row, check_prediction=text_prediction
)
