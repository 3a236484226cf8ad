"""bench/caption_learning.py's generated charts say what their captions say (no training here:
the benchmark itself is run by hand, its figures in issue 19)."""

import numpy as np

from chartjax.tools.bench import caption_learning as cl


def _runs(mask_1d):
    """Number of runs of True in a 1-d boolean array."""
    m = np.concatenate([[False], mask_1d, [False]]).astype(int)
    return int(np.sum(np.diff(m) == 1))


def test_captions_match_the_drawn_charts():
    images, captions = cl.corpus(3, 60)
    assert images.shape == (60, 32, 32, 3) and images.dtype == np.uint8
    for img, cap in zip(images, captions):
        words = cap.split()
        kind = " ".join(words[1:3]) if words[2] == "bar" else words[1]
        n, colour, trend = int(words[-5]), words[-4], words[-1]
        assert kind in cl.TYPES and trend in cl.TRENDS
        masks = {c: (img == rgb).all(-1) for c, rgb in cl.COLOURS.items()}
        assert masks[colour].any() and not any(m.any() for c, m in masks.items() if c != colour)
        mask = masks[colour]
        if kind == "vertical bar":
            assert _runs(mask.any(0)) == n  # one run of coloured columns per bar
            heights = [mask[:, c].sum() for c in range(32) if mask[:, c].any()]
        elif kind == "horizontal bar":
            assert _runs(mask.any(1)) == n
            heights = [mask[r].sum() for r in range(32) if mask[r].any()]
        else:  # line: its height (small row = high) read left to right
            heights = [-np.flatnonzero(mask[:, c]).mean() for c in range(32) if mask[:, c].any()]
        first, last = heights[0], heights[-1]
        # Horizontal bars are drawn top to bottom, the first value at the top.
        assert (last > first) == (trend == "increase") or first == last


def test_the_best_constant_is_the_best_training_caption():
    _, captions = cl.corpus(0, 40)
    _, test = cl.corpus(1, 20)
    best, score = cl.best_constant(captions, test)
    assert best in captions and 0 < score < 1
    from chartjax.metrics import text

    for c in set(captions):
        assert text.bleu([c] * 20, [[t] for t in test]).metrics["bleu"] <= score + 1e-12
