"""Chart-to-Text from data records: the Chart2text and Field-Infuse rows of Table 4.

Inputs (one mode per kind of row):
  tab      Statista, TAB-: the gold data table (`table.linearized`, parsed).
  tab_ocr  Statista, TAB_OCR-: the table DePlot predicted for the chart (`tables_file`, a
           predictions.jsonl of `chartjax-infer --task deplot`), our stand-in for the paper's
           ChartOCR-extracted tables, as in chart_to_text's deplot_t5 mode.
  ocr      Pew, OCR-: the release's OCR phrases (`ocr.text` / `ocr.bbox`) in the release's order
           (`ocr_order`; it is data/<id>.txt's, which the authors' OcrPreprocess.py reads; or
           "top_to_bottom", ocr_boxes.py), each box divided by the image's width / height;
           `ocr_data`'s " | "-separated phrases, without boxes, for a chart with no bboxes file.

Records. A table gives one record per cell, row by row: (column header, cell value, column
index j, row index i), as Chart2Text's `templatePreprocess.py` writes `header|value|x|type` per
cell (read, not copied). OCR gives one record per word: the phrase index as the row i, the word's
position in it as the column j, no header, the phrase's box. At most `max_records` records are
kept (the rest are dropped, and no template refers to them).

Data variables (templating of the target). The summary is split on whitespace (Statista's
captions are pre-tokenized; Pew's are not, so "2020," stays one token and matches nothing).
Each token, unless it is one of the content-selection fillers or has no letter or digit, becomes
  templateValue[i][j]  if it equals a one-word cell value of record (i, j) (first in record
                       order; numbers compared as numbers once "," and a trailing "%" are
                       dropped: "2,740" matches "2740", "45%" matches "45.0"),
  templateLabel[j][k]  else if it is word k of column j's header,
  templateTitle[k]     else if it is word k of the chart's title,
and stays as written otherwise. Words match case-sensitively, so that substituting them back
gives the summary's own word ("revenue" is not the header's "Revenue": BLEU is case-sensitive);
numbers come back as the cell writes them ("2740" for "2,740"). Chart2Text's own variables (templateXValue[i], templateYLabel[k],
templateTitleDate, templateScale, ...) are specific to two-column charts; this two-index scheme
is the one the Chart-to-Text paper's Figure 3a shows (templateLabel[1][2]) [inferred]. After
decoding, `substitute` puts the referenced cell (as written), header word or title word back; a
variable that names nothing in the chart (a row the table does not have) is dropped.
`templating=False` trains on the summaries as written (the authors' Pew OCR steps copy
OriginalSummary to Summary, `baseline_models/Chart2Text/steps.txt`).

Content-selection labels: record (i, j) is 1 when the target's templating produced
templateValue[i][j], else 0 (the authors' DataLabel files mark the records a summary mentions).

Vocabulary: words, not SentencePiece pieces, as Chart2Text's `extract_vocab.py`: the `vocab_size`
- 3 most frequent tokens (templated targets, record values and headers, their words) of the
training split, ties by the word; ids 0 <pad> (also the decoder start), 1 </s>, 2 <unk>. It is
built when the task is built, from the data, so training and `chartjax-eval` agree without a
vocabulary file.

Scoring: as chart_to_text (BLEU, ROUGE, METEOR, CIDEr, content selection against the gold records
on Statista and the OCR text on Pew), on the back-substituted predictions; predictions.jsonl
also carries `templated_prediction`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Sequence

import gin
import numpy as np

from chartjax.data import sources, tables, word_vocab
from chartjax.data.word_vocab import UNK, WordVocab
from chartjax.metrics import prediction_files
from chartjax.metrics.content_selection import CS_FILLERS
from chartjax.tasks import chart_to_text
from chartjax.tasks.chart_to_text import ocr_boxes
from chartjax.tasks.core import seq2seq
from chartjax.tasks.core.task import Evaluation, SequenceLengths, Task

MODES = ("tab", "tab_ocr", "ocr")
_VARIABLE = re.compile(r"^template(Value|Label|Title)\[(\d+)\](?:\[(\d+)\])?$")
_WORD = re.compile(r"\w")


@dataclasses.dataclass(frozen=True)
class Record:
    header: str
    value: str
    column: int
    row: int
    box: tuple[float, float, float, float] | None = None  # fractions of the image


def table_records(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[Record]:
    """One record per cell, row by row; a short row is padded with empty cells."""
    width = max([len(header), *map(len, rows)], default=0)
    head = [str(h).strip() for h in header] + [""] * (width - len(header))
    return [
        Record(head[j], str(row[j]).strip() if j < len(row) else "", j, i)
        for i, row in enumerate(rows)
        for j in range(width)
    ]


def ocr_records(phrases: Sequence[tuple[str, Sequence[float] | None]]) -> list[Record]:
    """One record per word of each OCR phrase (row = phrase index, column = word index)."""
    out = []
    for i, (text, box) in enumerate(phrases):
        for j, word in enumerate(text.split()):
            out.append(Record("", word, j, i, None if box is None else tuple(map(float, box))))
    return out


def _key(token: str) -> str:
    t = token
    num = t.replace(",", "")
    num = num[:-1] if num.endswith("%") else num
    try:
        return repr(float(num))
    except ValueError:
        return t


def _templatable(token: str) -> bool:
    return token.lower() not in CS_FILLERS and bool(_WORD.search(token))


def template(summary: str, records: Sequence[Record], title: str) -> tuple[str, list[int]]:
    """(templated summary, content-selection label per record): the scheme of the docstring."""
    values: dict[str, tuple[int, int]] = {}
    for r in records:
        if r.value and len(r.value.split()) == 1:
            values.setdefault(_key(r.value), (r.row, r.column))
    labels: dict[str, tuple[int, int]] = {}
    for j, header in sorted({(r.column, r.header) for r in records}):
        for k, word in enumerate(header.split()):
            labels.setdefault(_key(word), (j, k))
    title_words: dict[str, int] = {}
    for k, word in enumerate(title.split()):
        title_words.setdefault(_key(word), k)
    out, mentioned = [], set()
    for tok in summary.split():
        key = _key(tok)
        if not _templatable(tok):
            out.append(tok)
        elif key in values:
            i, j = values[key]
            mentioned.add((i, j))
            out.append(f"templateValue[{i}][{j}]")
        elif key in labels:
            out.append("templateLabel[{}][{}]".format(*labels[key]))
        elif key in title_words:
            out.append(f"templateTitle[{title_words[key]}]")
        else:
            out.append(tok)
    return " ".join(out), [int((r.row, r.column) in mentioned) for r in records]


def slots(records: Sequence[Record], title: str) -> dict:
    """What `substitute` needs, JSON-able: cells by "i,j", header words by column, title words."""
    headers: dict[str, list[str]] = {}
    for r in records:
        headers.setdefault(str(r.column), r.header.split())
    return {
        "values": {f"{r.row},{r.column}": r.value for r in records},
        "labels": headers,
        "title": title.split(),
    }


def substitute(templated: str, slot: dict) -> str:
    """The data variables of a decoded summary replaced by what they name (see the docstring)."""
    out = []
    for tok in templated.split():
        m = _VARIABLE.match(tok)
        if not m:
            out.append(tok)
            continue
        kind, a, b = m.group(1), int(m.group(2)), m.group(3)
        if kind == "Value" and b is not None:
            word = slot["values"].get(f"{a},{b}")
        elif kind == "Label" and b is not None:
            words = slot["labels"].get(str(a), [])
            word = words[int(b)] if int(b) < len(words) else None
        elif kind == "Title" and b is None:
            word = slot["title"][a] if a < len(slot["title"]) else None
        else:
            word = None
        if word:
            out.append(word)
    return " ".join(out)


# ------------------------------------------------------------------ vocabulary ------------


def record_tokens(r: Record) -> list[str]:
    """The vocabulary entries a record reads: its value and header as one token each (spaces
    as "_", as Chart2Text's records) and their words."""
    return [
        r.value.replace(" ", "_"),
        r.header.replace(" ", "_"),
        *r.value.split(),
        *r.header.split(),
    ]


def build_vocab(texts: Iterable[Sequence[str]], size: int) -> WordVocab:
    """The `size` - 3 most frequent tokens of token lists (ties by the token)."""
    return word_vocab.most_frequent(texts, size)


# ------------------------------------------------------------------ features --------------


@dataclasses.dataclass(frozen=True)
class Shapes:
    """The padded sizes (the model's DataToTextConfig must agree: recipes bind both)."""

    max_records: int = 256
    max_target_len: int = 256
    max_header_words: int = 8
    max_value_words: int = 8

    @property
    def record_width(self) -> int:
        from chartjax.models.data_to_text import record_seq2seq as model_lib

        return model_lib.HEADER_WORDS + self.max_header_words + self.max_value_words


def pack(records: Sequence[Record], vocab: WordVocab, shapes: Shapes) -> np.ndarray:
    """`[max_records, record_width]` int32 rows in the layout of
    chartjax/models/data_to_text/record_seq2seq.py."""
    from chartjax.models.data_to_text import record_seq2seq as model_lib  # jax: imported on use

    out = np.zeros((shapes.max_records, shapes.record_width), np.int32)
    hw, vw = model_lib.HEADER_WORDS, model_lib.HEADER_WORDS + shapes.max_header_words
    for n, r in enumerate(records[: shapes.max_records]):
        row = out[n]
        row[model_lib.PRESENT] = 1
        row[model_lib.VALUE] = vocab.id(r.value.replace(" ", "_")) if r.value else UNK
        row[model_lib.HEADER] = vocab.id(r.header.replace(" ", "_"))
        row[model_lib.COLUMN], row[model_lib.ROW] = r.column, r.row
        if r.box is not None:
            box = np.clip(np.asarray(r.box, np.float64), 0.0, 1.0) * model_lib.BOX_SCALE
            row[model_lib.BOX] = np.rint(box).astype(np.int32)
        header = [vocab.id(w) for w in r.header.split()][: shapes.max_header_words]
        value = [vocab.id(w) for w in r.value.split()][: shapes.max_value_words] or [UNK]
        row[hw : hw + len(header)] = header
        row[vw : vw + len(value)] = value
    return out


def _records_of(meta: dict) -> list[Record]:
    return [Record(h, v, c, r, tuple(b) if b else None) for h, v, c, r, b in meta["records"]]


def example_arrays(meta: dict, target: str, vocab: WordVocab, shapes: Shapes, templating: bool):
    """(encoder_input_tokens, decoder_target_tokens, decoder_input_tokens, cs_labels)."""
    records = _records_of(meta)[: shapes.max_records]
    templated, labels = template(target, records, meta["title"])
    tgt, inp = seq2seq.target_arrays(
        vocab, templated if templating else target, shapes.max_target_len
    )
    cs = np.zeros((shapes.max_records,), np.float32)
    cs[: len(labels)] = labels
    return pack(records, vocab, shapes), tgt, inp, cs


def _featurize_fn(vocab, shapes: Shapes, templating: bool, keep_host: bool):
    def fn(rec):
        enc, tgt, inp, cs = example_arrays(
            json.loads(sources.as_python(rec["meta"])),
            sources.as_python(rec["target"]),
            vocab,
            shapes,
            templating,
        )
        out = {
            "encoder_input_tokens": enc,
            "decoder_target_tokens": tgt,
            "decoder_input_tokens": inp,
            "cs_labels": cs,
        }
        if keep_host:
            out.update({k: rec[k] for k in sources.RECORD_KEYS})
        return out

    return fn


# ------------------------------------------------------------------ examples --------------


def ocr_phrases(ex: dict, order: str = "release") -> list[tuple[str, list[float] | None]]:
    """Pew's OCR phrases in `order` (ocr_boxes.py), boxes as fractions of the image; `ocr_data`'s
    phrases without boxes when the chart has no bboxes file."""
    if not ex["ocr.text"]:
        return [(p.strip(), None) for p in ex["ocr_data"].split("|") if p.strip()]
    size = ocr_boxes.image_size(ex["image"])
    return ocr_boxes.ordered_phrases(ex["ocr.text"], ex["ocr.bbox"], order, size)


def make_expand(
    mode: str, config: str, *, max_records: int, table_for=None, ocr_order: str = "release"
):
    """expand(example) -> [record]; meta carries the chart's records for the feature map."""

    def expand(ex: dict) -> list[dict]:
        eid, title = ex["id"], ex["title"].strip()
        if mode == "ocr":
            records = ocr_records(ocr_phrases(ex, ocr_order))
        else:
            text = ex["table.linearized"] if mode == "tab" else table_for(eid)
            table = tables.parse(text)
            records = table_records(table.header, table.rows) if table.header else []
        records = records[:max_records]
        meta = {
            "chart_type": ex["chart_type"],
            "complexity": chart_to_text.COMPLEXITY[int(ex["complexity"])],
            "title": title,
            "cs_data": ex["table.records"] if config == "statista" else ex["ocr_data"],
            "records": [[r.header, r.value, r.column, r.row, r.box] for r in records],
        }
        prompt = " ".join(
            f"{r.header}|{r.value}|{r.column}|{r.row}".replace(" ", "_") for r in records
        )
        return [{"id": eid, "prompt": prompt, "target": ex["summary"], "meta": meta}]

    return expand


def training_vocab(source, size: int, templating: bool) -> WordVocab:
    """The vocabulary of the training split (see the module docstring)."""

    def texts():
        for rec in source.records(source.train_split):
            meta = rec["meta"]
            records = _records_of(meta)
            target = rec["target"]
            yield (template(target, records, meta["title"])[0] if templating else target).split()
            for r in records:
                yield record_tokens(r)

    return build_vocab(texts(), size)


@gin.configurable("chart_to_text_records_task", module="chartjax.tasks.chart_to_text_records")
def make_task(
    data_dir: str = "~/tensorflow_datasets",
    config: str = "statista",
    mode: str = "tab",
    *,
    vocab_size: int = gin.REQUIRED,
    max_records: int = 256,
    max_target_len: int = 256,
    max_header_words: int = 8,
    max_value_words: int = 8,
    templating: bool = True,
    train_split: str = "train",
    eval_splits: tuple[str, ...] = ("validation", "test"),
    tables_file: str | None = None,
    ocr_order: str = "release",
    bleurt_checkpoint: str | None = None,
    ppl_model: str | None = None,
    bleu_tokenize: str = "13a",
    shuffle_buffer: int = 10_000,
    check_files: bool = True,
    decoding=None,
) -> Task:
    """The Chart-to-Text task from records for Chart2text / Field-Infuse models."""
    decoding = decoding or seq2seq.Decoding()
    _check_args(config, mode, tables_file)
    dataset = f"chart_to_text/{config}"
    shapes = Shapes(max_records, max_target_len, max_header_words, max_value_words)
    table_for = None
    if mode == "tab_ocr":
        rows = prediction_files.read_id_rows(
            tables_file, "tables_file", required=("id", "prediction")
        )

        def table_for(eid):
            return str(prediction_files.lookup(rows, eid, tables_file, "tables_file")["prediction"])

        if check_files:
            ids = sources.TfdsSource(dataset, data_dir)
            for split in sorted({train_split, *eval_splits}):
                prediction_files.require_ids(
                    rows, ids.ids(split), tables_file, "tables_file", split
                )
    keys = chart_to_text.COMMON_KEYS + chart_to_text.CONFIG_KEYS[config]
    source = sources.TfdsSource(
        dataset,
        data_dir,
        train_split=train_split,
        shuffle_buffer=shuffle_buffer,
        expand=make_expand(
            mode, config, max_records=max_records, table_for=table_for, ocr_order=ocr_order
        ),
        field_keys=keys + (("image",) if mode == "ocr" else ()),
        image_key=None,
        encoded_keys=("image",) if mode == "ocr" else (),
    )
    vocab = training_vocab(source, vocab_size, templating)
    score_fn = chart_to_text.make_score_fn(
        bleurt_checkpoint=bleurt_checkpoint, ppl_model=ppl_model, bleu_tokenize=bleu_tokenize
    )

    def loss(model, batch, *, train):
        from chartjax.models.data_to_text import record_seq2seq as model_lib

        return model_lib.loss(model, batch, deterministic=not train)

    def evaluate(predictions, host, split):
        templated = vocab.decode_batch(np.asarray(predictions))
        records = [
            {
                "id": sources.as_python(i),
                "prompt": sources.as_python(p),
                "target": sources.as_python(t),
                "meta": json.loads(sources.as_python(m)),
            }
            for i, p, t, m in zip(host["id"], host["prompt"], host["target"], host["meta"])
        ]
        texts = [
            substitute(t, slots(_records_of(r["meta"]), r["meta"]["title"]))
            for t, r in zip(templated, records)
        ]
        scores, _ = score_fn(texts, records, split)
        rows = [
            {
                "id": r["id"],
                "input": r["prompt"][: seq2seq.INPUT_CHARS],
                "prediction": text,
                "templated_prediction": tmpl,
                "target": r["target"],
            }
            for text, tmpl, r in zip(texts, templated, records)
        ]
        return Evaluation(scores, rows)

    return Task(
        name="chart_to_text",
        source=source,
        features=lambda keep_host: _featurize_fn(vocab, shapes, templating, keep_host),
        loss=loss,
        predict=seq2seq.make_predict(decoding),
        evaluate=evaluate,
        model_inputs=(
            "encoder_input_tokens",
            "decoder_input_tokens",
            "decoder_target_tokens",
            "cs_labels",
        ),
        eval_splits=tuple(eval_splits),
        lengths=SequenceLengths(encoder=max_records, decoder=max_target_len),
    )


def _check_args(config, mode, tables_file):
    def need(ok, msg):
        if not ok:
            raise ValueError(f"chart_to_text_records_task: {msg}")

    need(
        config in chart_to_text.CONFIGS, f"config {config!r} is not one of {chart_to_text.CONFIGS}"
    )
    need(mode in MODES, f"mode {mode!r} is not one of {MODES}")
    need(
        not (mode == "tab" and config == "pew"),
        "mode 'tab' needs gold data tables, which Pew does not have (use ocr or tab_ocr)",
    )
    need(not (mode == "ocr" and config == "statista"), "mode 'ocr' reads Pew's OCR release files")
    need(mode != "tab_ocr" or tables_file, "mode 'tab_ocr' needs tables_file (DePlot predictions)")
