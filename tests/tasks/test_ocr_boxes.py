"""OCR phrases in reading order and their per-token boxes
(chartjax/tasks/chart_to_text/ocr_boxes.py), on hand-made phrases, the tiny test vocabulary and pew
10's real boxes."""

from __future__ import annotations

import io

import numpy as np
import pytest

from chartjax.data import vocab as vocab_lib
from chartjax.tasks.chart_to_text import ocr_boxes as ob

# pew_dataset/dataset/bboxes/10.json of the release (vis-nlp/Chart-to-text a21d315), in file
# order: data/10.txt is these sentences joined by " | ".
PEW_10 = [
    ("total revenue lin us dollars ", [1, 29, 220, 45]),
    ("4b ", [9, 54, 29, 66]),
    ("3b ", [9, 121, 29, 133]),
    ("2b ", [10, 188, 29, 198]),
    ("1 b ", [12, 254, 29, 264]),
    ("2016 ", [321, 332, 352, 345]),
    ("2018 ", [600, 331, 632, 345]),
    ("2014 ", [33, 333, 64, 344]),
    ("2015 ", [177, 333, 208, 345]),
    ("2017 ", [465, 333, 496, 345]),
]
PEW_10_DATA = (
    "total revenue lin us dollars  | 4b  | 3b  | 2b  | 1 b  | 2016  | 2018  | 2014  | 2015  | 2017 "
)


def test_reading_orders():
    texts, boxes = zip(*PEW_10)
    assert " | ".join(texts) == PEW_10_DATA  # the release's text is the file order
    release = [texts[i].strip() for i in ob.reading_order(boxes, "release")]
    assert release == [t.strip() for t in texts]
    lines = [texts[i].strip() for i in ob.reading_order(boxes, "top_to_bottom")]
    # The x-axis years (tops 331-333) are one line, read left to right.
    assert lines == ["total revenue lin us dollars", "4b", "3b", "2b", "1 b"] + [
        "2014",
        "2015",
        "2016",
        "2017",
        "2018",
    ]
    # A tall box (a rotated axis title) does not swallow the short rows it spans.
    tall = [[0, 10, 10, 200], [20, 12, 40, 22], [20, 40, 40, 50]]
    assert ob.reading_order(tall) == [0, 1, 2]
    with pytest.raises(ValueError, match="OCR order 'bottom_up'"):
        ob.reading_order(boxes, "bottom_up")


def test_normalize_and_ordered_phrases():
    assert ob.normalize([50, 20, 100, 40], 200, 80) == [0.25, 0.25, 0.5, 0.5]
    assert ob.normalize([-2, 0, 203, 81], 200, 80) == [0.0, 0.0, 1.0, 1.0]  # clipped
    with pytest.raises(ValueError, match="image size 0x80"):
        ob.normalize([0, 0, 1, 1], 0, 80)
    texts = ["Q2 '20 ", "Number of users ", "  ", "2740 "]
    boxes = [[3, 30, 20, 38], [3, 1, 40, 9], [0, 0, 1, 1], [25, 30, 40, 38]]
    assert ob.ordered_phrases(texts, boxes, "top_to_bottom", (40, 40)) == [
        ("Number of users", [3 / 40, 1 / 40, 1.0, 9 / 40]),
        ("Q2 '20", [3 / 40, 30 / 40, 0.5, 38 / 40]),
        ("2740", [25 / 40, 30 / 40, 1.0, 38 / 40]),
    ]  # the blank phrase is dropped
    with pytest.raises(ValueError, match="2 OCR phrases but 1 boxes"):
        ob.ordered_phrases(["a", "b"], [[0, 0, 1, 1]], "release", None)


def test_image_size():
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (9, 6)).save(buf, format="PNG")
    assert ob.image_size(buf.getvalue()) == (9, 6)


A, B, C = [0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 0.6, 0.6], [0.7, 0.7, 0.8, 0.8]


def test_join_spans():
    text, spans = ob.join("T <s> ", [("ab", A), ("c d", B)])
    assert text == "T <s> ab | c d"
    assert spans == [(6, 8, A), (11, 14, B)]
    assert [text[s:e] for s, e, _ in spans] == ["ab", "c d"]


@pytest.fixture(scope="module")
def vocab(vocab_file):
    return vocab_lib.open_vocabulary(vocab_file)


def _pieces(vocab, tokens):
    return [vocab.sp.id_to_piece(int(t)) for t in tokens if t]


def test_token_boxes_alignment(vocab):
    head = "translate Chart to Text: Users <s> "
    text, spans = ob.join(head, [("Number of users", A), ("Q2 '20", B), ("2740", C)])
    tokens, boxes = ob.token_boxes(vocab.sp, text, spans, 64)
    # The tokens are those of the whole prompt (the plain OCR-T5 input).
    np.testing.assert_array_equal(tokens, vocab.encode_batch([text], max_len=64)[0])
    pieces = _pieces(vocab, tokens)
    n_head = len(vocab.encode(head.rstrip()))
    got = [(p, tuple(b)) for p, b in zip(pieces, boxes.tolist())]
    zero = (0.0,) * 4
    a, b, c = (tuple(np.float32(v).item() for v in x) for x in (A, B, C))
    # This vocabulary's pieces (hand-checked): the head's, then each phrase's with its box;
    # the separators "▁|", EOS and padding get the zero box.
    assert got[:n_head] == [(p, zero) for p in pieces[:n_head]]
    phrase_a = ["▁N", "um", "b", "er", "▁o", "f", "▁", "use", "r", "s"]
    phrase_b = ["▁Q", "2", "▁", "<0x27>", "2", "0"]
    phrase_c = ["▁2", "7", "4", "0"]
    assert got[n_head:] == (
        [(p, a) for p in phrase_a]
        + [("▁|", zero)]
        + [(p, b) for p in phrase_b]
        + [("▁|", zero)]
        + [(p, c) for p in phrase_c]
        + [("</s>", zero)]
    )
    assert not boxes[len(pieces) :].any()  # padding


def test_token_boxes_truncation_keeps_eos(vocab):
    text, spans = ob.join("x <s> ", [("Number of users", A), ("2740", C)])
    full, full_boxes = ob.token_boxes(vocab.sp, text, spans, 64)
    n = int((full > 0).sum())
    tokens, boxes = ob.token_boxes(vocab.sp, text, spans, n - 3)
    np.testing.assert_array_equal(tokens, vocab.encode_batch([text], max_len=n - 3)[0])
    assert tokens[-1] == vocab_lib.EOS_ID and not boxes[-1].any()
    np.testing.assert_array_equal(boxes[:-1], full_boxes[: n - 4])


def test_token_boxes_non_ascii_phrase(vocab):
    # Byte-fallback pieces (empty spans but the last) after and inside multi-byte characters.
    text, spans = ob.join("“é” <s> ", [("é", A), ("2740", C)])
    tokens, boxes = ob.token_boxes(vocab.sp, text, spans, 64)
    np.testing.assert_array_equal(tokens, vocab.encode_batch([text], max_len=64)[0])
    by_box = {}
    for p, bx in zip(_pieces(vocab, tokens), boxes.tolist()):
        by_box.setdefault(tuple(round(v, 6) for v in bx), []).append(p)
    assert "".join(by_box[(0.7, 0.7, 0.8, 0.8)]) == "▁2740"
    assert len(by_box[(0.1, 0.2, 0.3, 0.4)]) >= 1


class _BytePieces:
    """A SentencePiece stand-in reporting UTF-8 byte offsets, as older builds do."""

    class _P:
        def __init__(self, i, b, e):
            self.id, self.begin, self.end = i, b, e

    def __init__(self, pieces):
        self.pieces = [self._P(*p) for p in pieces]

    def encode(self, text, out_type):
        return self


def test_token_boxes_byte_offsets():
    text, spans = ob.join("é <s> ", [("ü", A), ("7", C)])  # "é <s> ü | 7": é, ü 2 bytes
    # pieces: "▁é"[0,2) "▁<s>"[2,6) "▁ü"[6,9) "▁|"[9,11) "▁7"[11,13) in bytes
    sp = _BytePieces([(5, 0, 2), (6, 2, 6), (7, 6, 9), (8, 9, 11), (9, 11, 13)])
    tokens, boxes = ob.token_boxes(sp, text, spans, 8)
    assert tokens.tolist() == [5, 6, 7, 8, 9, 1, 0, 0]
    expected = [[0] * 4, [0] * 4, A, [0] * 4, C, [0] * 4, [0] * 4, [0] * 4]
    np.testing.assert_allclose(boxes, np.asarray(expected, np.float32))
