"""Bad-input policy shared by the builders: fail naming the file (and row), or skip and count.

A builder raises `BadInputError` for a missing or corrupt image or a malformed record. With
`skip_bad` off (the default) the error stops the build; with it on, `SkipLedger` counts the
example per split, logs it, and the builder writes `skipped_examples.json` beside the dataset.

`skip_bad` is a builder kwarg. `tfds build <folder>` passes no builder kwargs, and tfds 4.9.10
refuses a JSON `--config` that reuses a predefined config's name, so the CLI routes are:
  * Python: `Builder(skip_bad=True)` / `tfds.builder(name, skip_bad=True)`;
  * CLI, any builder: the environment variable `CHARTJAX_SKIP_BAD=1`;
  * CLI, registered name: `tfds build chart_to_text/pew/skip_bad=True
    --imports tfds_builders.chart_to_text` (tfds parses `name[/config][:version]/k=v` into kwargs).
"""

from __future__ import annotations

import collections
import json
import os
from typing import Any

import tensorflow_datasets as tfds
from absl import logging
from etils import epath

SKIP_BAD_ENV = "CHARTJAX_SKIP_BAD"
REPORT_NAME = "skipped_examples.json"
# How many skip messages the report keeps verbatim (the counts are always complete).
_MAX_MESSAGES = 50


class BadInputError(ValueError):
    """A record of the release that cannot become an example; the message names file and row."""

    def __init__(self, path: os.PathLike | str, reason: str, row: str | int | None = None):
        self.path = os.fspath(path)
        self.row = row
        self.reason = reason
        where = self.path if row is None else f"{self.path}, row {row}"
        super().__init__(f"{where}: {reason}")


def skip_bad_from_env() -> bool:
    value = os.environ.get(SKIP_BAD_ENV, "").strip().lower()
    if value in ("", "0", "false", "no"):
        return False
    if value in ("1", "true", "yes"):
        return True
    raise ValueError(f"{SKIP_BAD_ENV}={value!r}: expected 1/true/yes or 0/false/no")


class SkipLedger:
    """Raises bad-input errors, or (with `skip_bad`) counts them per split."""

    def __init__(self, dataset: str, skip_bad: bool):
        self.dataset = dataset
        self.skip_bad = skip_bad
        self.counts: collections.Counter[str] = collections.Counter()
        self.messages: list[str] = []

    def handle(self, split: str, error: BadInputError) -> None:
        if not self.skip_bad:
            raise error
        self.counts[split] += 1
        if len(self.messages) < _MAX_MESSAGES:
            self.messages.append(f"{split}: {error}")
        logging.warning("%s: skipping bad example in split %s: %s", self.dataset, split, error)

    def end_split(self, split: str, num_examples: int) -> None:
        if num_examples == 0 and self.counts[split]:
            # tfds cannot write an empty split; say why instead of failing in the writer.
            raise ValueError(
                f"{self.dataset}: all {self.counts[split]} examples of split {split} were bad; "
                f"first: {next((m for m in self.messages if m.startswith(split + ':')), '?')}"
            )
        if self.skip_bad:
            logging.warning(
                "%s: split %s: %d examples, %d bad examples skipped",
                self.dataset,
                split,
                num_examples,
                self.counts[split],
            )

    def report(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "skip_bad": self.skip_bad,
            "total_skipped": sum(self.counts.values()),
            "skipped_per_split": dict(sorted(self.counts.items())),
            "messages": list(self.messages),
        }


class SkipBadMixin:
    """Adds the `skip_bad` kwarg and the end-of-build skip report to a GeneratorBasedBuilder.

    Put it before `tfds.core.GeneratorBasedBuilder` in the bases. It is not a DatasetBuilder
    itself, so a builder module still holds exactly one builder class (tfds requires that).
    """

    def __init__(self, *, skip_bad: bool | None = None, **kwargs):
        super().__init__(**kwargs)
        # tfds pickles builders (Beam) as their __init__ kwargs: keep skip_bad among them.
        self._original_state["skip_bad"] = skip_bad
        resolved = skip_bad if skip_bad is not None else skip_bad_from_env()
        self.skip_ledger = SkipLedger(self.name, resolved)

    def _download_and_prepare(self, dl_manager, download_config=None):
        self.skip_ledger = SkipLedger(self.name, self.skip_ledger.skip_bad)
        super()._download_and_prepare(dl_manager, download_config=download_config)
        report = self.skip_ledger.report()
        if self.skip_ledger.skip_bad:
            # data_dir is the temporary build folder here; tfds renames it with its contents.
            path = epath.Path(self.data_dir) / REPORT_NAME
            path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
            logging.warning(
                "%s: %d bad examples skipped in total (report: %s)",
                self.name,
                report["total_skipped"],
                REPORT_NAME,
            )


def read_skip_report(builder: tfds.core.DatasetBuilder) -> dict[str, Any] | None:
    """The skip report written beside a prepared dataset, or None when none was written."""
    path = epath.Path(builder.data_dir) / REPORT_NAME
    return json.loads(path.read_text()) if path.exists() else None
