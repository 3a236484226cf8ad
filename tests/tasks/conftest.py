"""Shared fixtures for the task-recipe end-to-end tests.

* `vocab_file`: a tiny SentencePiece model (tools/train_vocab.py, byte fallback), trained once.
* `tfds_dir`: one TFDS data_dir holding every builder's dummy data, each built on first use.
* JAX's persistent compilation cache in a session folder: recipes of one model family share
  the same tiny shapes, so their train and decode steps compile once per session (per process
  under xdist) instead of once per recipe.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])
VOCAB_SIZE = 400  # SentencePiece pieces (256 bytes + chars + words); tiny models match it

# Text the tiny vocabulary is trained on: words of the prompts, tables and dummy corpora.
_VOCAB_TEXT = [
    "The chart below has the following caption: Given the caption and the chart below, "
    "is the following claim true? Explain why?",
    "Generate underlying data table of the figure below:",
    "Yes. Explanation: the claim is true. No, the claim is false because the value is lower",
    "TITLE | Number of users in millions by year 2019 2020 2021 Q1 Q2 Q3 Q4",
    "Characteristic | Share of respondents | Value | Country | Category",
    "translate Chart to Text: Title: Table: summarize the chart",
    "pie donut line scatter vertical horizontal box grouped stacked bar chart title axis legend",
    "chart_title axis_title tick_label legend_label value_label mark_label tick_grouping other",
    "0 1 2 3 4 5 6 7 8 9 10 20 30 40 50 60 70 80 90 100 % $ , . ( ) - : |",
]


@pytest.fixture(scope="session")
def vocab_file(tmp_path_factory) -> str:
    from chartjax.tools import train_vocab

    d = tmp_path_factory.mktemp("vocab")
    return train_vocab.train(
        _VOCAB_TEXT * 8, str(d / "spm"), vocab_size=VOCAB_SIZE, hard_vocab_limit=False
    )


class _Built:
    """Builds `name[/config]` from its dummy_data into one data_dir, once per session."""

    def __init__(self, data_dir: str):
        self.data_dir = data_dir
        self.done: set[str] = set()

    def __call__(self, name: str, config: str | None = None) -> str:
        import importlib

        import tensorflow_datasets as tfds

        key = f"{name}/{config}" if config else name
        if key not in self.done:
            mod = importlib.import_module(f"tfds_builders.{name}.{name}")
            manual = os.path.join(ROOT, "tfds_builders", name, "dummy_data")
            if name == "chart_info":
                manual = os.path.join(manual, config)
            builder = mod.Builder(data_dir=self.data_dir, **({"config": config} if config else {}))
            builder.download_and_prepare(
                download_config=tfds.download.DownloadConfig(manual_dir=manual)
            )
            self.done.add(key)
        return self.data_dir


@pytest.fixture(scope="session")
def tfds_dir(tmp_path_factory) -> _Built:
    """`tfds_dir("chartcheck")` / `tfds_dir("chart_to_text", "pew")` -> the data_dir."""
    return _Built(str(tmp_path_factory.mktemp("tfds")))


@pytest.fixture(scope="session")
def tiny_t5x(tmp_path_factory):
    """`tiny_t5x("pix2struct" | "t5")` -> a T5X checkpoint of the tiny model (vocab 400, 1+1
    layers, tests/tasks/tiny_recipes.py), written once per session; read-only."""
    from tests.tasks.test_deplot import tiny_t5x_checkpoint

    root = tmp_path_factory.mktemp("tiny_t5x")

    def get(family: str = "pix2struct") -> str:
        return tiny_t5x_checkpoint(str(root / family / "checkpoint_0"), family=family)

    return get
