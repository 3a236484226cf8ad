"""Training-curve plots from train_metrics.jsonl (matplotlib, Agg)."""

from __future__ import annotations

import json
import os


def read_train_metrics(path: str) -> list[dict]:
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{n}: not JSON ({e})") from e
    return rows


def plot_training_curves(runs: dict[str, str], out_png: str, keys=("loss", "accuracy")) -> str:
    """One panel per metric key, one line per run; `runs` maps a label to a workdir."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys), 3.6), squeeze=False)
    for label, workdir in runs.items():
        rows = read_train_metrics(os.path.join(workdir, "train_metrics.jsonl"))
        for ax, key in zip(axes[0], keys):
            pts = [(r["step"], r[key]) for r in rows if key in r]
            if pts:
                ax.plot(*zip(*pts), label=label, marker="." if len(pts) < 30 else None)
    for ax, key in zip(axes[0], keys):
        ax.set_xlabel("step")
        ax.set_title(f"train {key}")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return out_png
