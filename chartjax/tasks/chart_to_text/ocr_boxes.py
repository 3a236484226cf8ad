"""OCR phrases of a chart in reading order, and one box per input token (Chart-to-Text).

The Chart-to-Text release has one box per detected phrase, not per token (docs/corpora.md §2.4:
`bboxes/<id>.json`, `[{"sentence", "bounding_box": [x_min, y_min, x_max, y_max]}]`, ints in
image pixels with the origin at the top left and y growing downwards; [verified] for Pew,
[inferred] for Statista). The paper's OCR-T5 with boxes "feeds the bounding box coordinates of
each detected text token into a linear layer"; here every token of a phrase takes its phrase's
box, normalised to [0, 1] by the image size, and every other token (prefix, title, separators,
EOS, padding) gets the zero box, which a bias-free linear layer maps to exactly nothing
(chartjax/models/t5/__init__.py `box_embedding`).

Reading orders:
  release        the file's order. For Pew it is the order of the release's OCR text
                 `data/<id>.txt`, which is the file's sentences joined by " | " ([verified] on
                 pew 10: "total revenue lin us dollars  | 4b  | ... | 2016  | 2018  | 2014 ..."),
                 the text the authors' preprocessing fed (`baseline_models/Chart2Text/etc/
                 OcrPreprocess.py` reads data/<id>.txt; `BboxPreprocess.py` pairs its phrases
                 with the boxes one to one in file order).
  top_to_bottom  lines top to bottom, phrases left to right within a line ("we concatenate all
                 OCR-extracted sentences from top to bottom order"). A phrase joins the current
                 line when its vertical overlap with the line's first phrase is at least half
                 the taller of the two, so boxes of one visual row whose tops differ by a pixel
                 or two (pew 10's x-axis years: tops 331-333) stay one line, read left to right;
                 a plain sort by (top, left) would read them 2018, 2016, 2014, 2015, 2017.
                 Hand-written: no library orders OCR boxes this way.

Token alignment uses SentencePiece's piece offsets into the prompt, so the tokens are exactly
those of tokenizing the whole prompt (the plain OCR-T5 input): each token whose characters overlap
a phrase (or the one space before it, which SentencePiece attaches to the phrase's first piece as
"▁") takes that phrase's box. SentencePiece splits at whitespace, so no piece spans two phrases.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

ORDERS = ("release", "top_to_bottom")
SEPARATOR = " | "  # between phrases, as in Pew's data/<id>.txt

Box = Sequence[float]  # [x_min, y_min, x_max, y_max]


def reading_order(boxes: Sequence[Box], order: str = "top_to_bottom") -> list[int]:
    """The indices of `boxes` in reading order (see the module docstring)."""
    if order not in ORDERS:
        raise ValueError(f"OCR order {order!r} is not one of {ORDERS}")
    if order == "release":
        return list(range(len(boxes)))
    by_top = sorted(range(len(boxes)), key=lambda i: (boxes[i][1], boxes[i][0]))
    lines: list[list[int]] = []
    for i in by_top:
        y0, y1 = boxes[i][1], boxes[i][3]
        if lines:
            a0, a1 = boxes[lines[-1][0]][1], boxes[lines[-1][0]][3]
            overlap = min(a1, y1) - max(a0, y0)
            if overlap > 0 and overlap >= 0.5 * max(y1 - y0, a1 - a0):
                lines[-1].append(i)
                continue
        lines.append([i])
    return [i for line in lines for i in sorted(line, key=lambda j: (boxes[j][0], boxes[j][1]))]


def normalize(box: Box, width: int, height: int) -> list[float]:
    """Pixel box -> [x_min/w, y_min/h, x_max/w, y_max/h], clipped to [0, 1] (a detector's box
    may reach a pixel or two past the border)."""
    if width <= 0 or height <= 0:
        raise ValueError(f"image size {width}x{height} cannot normalise OCR boxes")
    x0, y0, x1, y1 = (float(v) for v in box)
    return [min(max(v, 0.0), 1.0) for v in (x0 / width, y0 / height, x1 / width, y1 / height)]


def image_size(encoded: bytes) -> tuple[int, int]:
    """(width, height) of an encoded image; PIL reads only the header."""
    from PIL import Image

    with Image.open(io.BytesIO(encoded)) as im:
        return im.size


def ordered_phrases(
    texts: Sequence[str], boxes: Sequence[Box], order: str, image_wh: tuple[int, int] | None
) -> list[tuple[str, list[float]]]:
    """[(phrase, box)] in reading order; empty phrases dropped; boxes normalised by the image
    size `image_wh` (None keeps them as given)."""
    if len(texts) != len(boxes):
        raise ValueError(f"{len(texts)} OCR phrases but {len(boxes)} boxes")
    out = []
    for i in reading_order(boxes, order):
        text = texts[i].strip()
        if text:
            box = [float(v) for v in boxes[i]]
            out.append((text, box if image_wh is None else normalize(box, *image_wh)))
    return out


def join(
    head: str, phrases: Sequence[tuple[str, Box]], separator: str = SEPARATOR
) -> tuple[str, list[tuple[int, int, list[float]]]]:
    """`head` + the phrases joined by `separator` -> (text, [(start, end, box)]): the character
    span of each phrase in the text and its box."""
    parts, spans, pos = [head], [], len(head)
    for k, (text, box) in enumerate(phrases):
        if k:
            parts.append(separator)
            pos += len(separator)
        parts.append(text)
        spans.append((pos, pos + len(text), [float(v) for v in box]))
        pos += len(text)
    return "".join(parts), spans


def token_boxes(
    sp, text: str, spans: Sequence[tuple[int, int, Box]], max_len: int, *, eos_id: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """(tokens int32 `[max_len]`, boxes float32 `[max_len, 4]`) for `text` tokenized by the
    SentencePiece processor `sp` with EOS, truncated and padded as `Vocabulary.encode_batch`
    does (the first max_len - 1 pieces, then EOS). `spans` are character spans (`join`)."""
    pieces = sp.encode(text, out_type="immutable_proto").pieces
    # This SentencePiece reports offsets in characters of `text`; older builds gave UTF-8
    # bytes, mapped back to characters here. A byte-fallback character's pieces are empty
    # spans but the last: each counts as covering the character it starts at.
    to_char = None
    if pieces and pieces[-1].end == len(text.encode("utf-8")) != len(text):
        to_char = np.repeat(np.arange(len(text) + 1), [len(c.encode("utf-8")) for c in text] + [1])
    bounds = []
    for p in pieces:
        b, e = (p.begin, p.end) if to_char is None else (to_char[p.begin], to_char[p.end])
        bounds.append((int(b), max(int(e), int(b) + 1)))
    # A phrase's span includes the space before it: SentencePiece's "▁" of its first piece.
    wide = [(s - (1 if s > 0 and text[s - 1] == " " else 0), e, box) for s, e, box in spans]
    ids = [p.id for p in pieces] + [eos_id]
    boxes = np.zeros((len(ids), 4), np.float32)
    k = 0  # phrases and pieces both run left to right
    for n, (b, e) in enumerate(bounds):
        while k < len(wide) and wide[k][1] <= b:
            k += 1
        if k < len(wide) and b < wide[k][1] and e > wide[k][0]:
            boxes[n] = wide[k][2]
    if len(ids) > max_len:
        ids = ids[: max_len - 1] + [eos_id]
        boxes = np.concatenate([boxes[: max_len - 1], np.zeros((1, 4), np.float32)])
    tokens = np.zeros(max_len, np.int32)
    tokens[: len(ids)] = ids
    out = np.zeros((max_len, 4), np.float32)
    out[: len(ids)] = boxes
    return tokens, out
