"""An independent answer key for FigureQA questions, computed from annotations.json source data.

Written apart from chartjax.synth.figureqa_questions (plain Python, different formulations) so
the tests compare two implementations instead of one with itself.
"""

from __future__ import annotations


def categorical_values(ann: dict) -> dict[str, float]:
    """Colour name -> value of a bar or pie figure, read as the release stores it."""
    t = ann["type"]
    if t == "pie":
        return {m["label"]: m["span"] for m in ann["models"]}
    (bars,) = ann["models"]
    names, values = (bars["x"], bars["y"]) if t == "vbar_categorical" else (bars["y"], bars["x"])
    return dict(zip(names, values, strict=True))


def trapezoid(x: list[float], y: list[float]) -> float:
    return sum((x[i + 1] - x[i]) * (y[i] + y[i + 1]) / 2 for i in range(len(x) - 1))


def paper_roughness(x: list[float], y: list[float]) -> float:
    """Kahou et al. §3.2, index by index as printed (1-based i = 1..n-2 -> 0-based i)."""
    total = 0.0
    for i in range(len(x) - 2):
        right = (y[i + 2] - y[i + 1]) / (x[i + 2] - x[i + 1])
        left = (y[i + 1] - y[i]) / (x[i + 1] - x[i])
        total += abs(right - left)
    return total


def crosses(ya: list[float], yb: list[float]) -> bool:
    """Polylines on one x grid cross iff some segment has the curves' order flip or touch."""
    d = [a - b for a, b in zip(ya, yb, strict=True)]
    return 0 in d or any((d[i] > 0) != (d[i + 1] > 0) for i in range(len(d) - 1))


def unique_arg(key: dict[str, float], pick) -> str:
    """The single name whose value is pick(values); raises if the extreme is tied."""
    best = pick(key.values())
    names = [n for n, v in key.items() if v == best]
    if len(names) != 1:
        raise AssertionError(f"tied extreme {best}: {names}")
    return names[0]


def answer(ann: dict, qa: dict) -> int:
    qid, c1, c2 = qa["question_id"], qa["color1_name"], qa["color2_name"]
    if qid <= 5:
        v = categorical_values(ann)
        ranked = sorted(v, key=v.get)
        if len(set(v.values())) != len(v):
            raise AssertionError(f"tied categorical values {v}")
        n = len(ranked)
        target = {0: ranked[0], 1: ranked[-1], 4: ranked[(n - 1) // 2], 5: ranked[n // 2]}
        if qid in target:
            return int(c1 == target[qid])
        return int(v[c1] < v[c2]) if qid == 2 else int(v[c1] > v[c2])
    curves = {m["label"]: (m["x"], m["y"]) for m in ann["models"]}
    if qid in (6, 7):
        aucs = {n: trapezoid(*xy) for n, xy in curves.items()}
        return int(c1 == unique_arg(aucs, min if qid == 6 else max))
    if qid in (8, 9):
        rough = {n: paper_roughness(*xy) for n, xy in curves.items()}
        return int(c1 == unique_arg(rough, min if qid == 8 else max))
    if qid == 10:
        return int(c1 == unique_arg({n: min(y) for n, (_, y) in curves.items()}, min))
    if qid == 11:
        return int(c1 == unique_arg({n: max(y) for n, (_, y) in curves.items()}, max))
    ya, yb = curves[c1][1], curves[c2][1]
    if qid == 12:
        return int(all(a < b for a, b in zip(ya, yb, strict=True)))
    if qid == 13:
        return int(all(a > b for a, b in zip(ya, yb, strict=True)))
    if qid == 14:
        return int(crosses(ya, yb))
    raise AssertionError(f"unknown question_id {qid}")
