"""Beam builds that keep every example: a lossless local data plane, and a count check.

Apache Beam 2.77's FnApiRunner (what `runner=DirectRunner` falls back to offline, and what the
tests and tools/bench/build.py name) loses data in its gRPC worker modes (`direct_running_mode`
`multi_processing` and `multi_threading`, any number of workers). The runner sends each stage's
input to a worker through a `data_plane.TimeBasedBufferingClosableOutputStream`
(`worker_handlers.DATA_BUFFER_TIME_LIMIT_MS = 1000`): its flusher thread runs `callback(get())`
then `_clear()`, while the runner's thread keeps `write()`-ing chunks into the same buffer
without the flush lock. The callback can block on the channel's 100 MB send queue, and what is
written meanwhile is cleared unsent; `close()` waits for the flusher, so the tail of the stage
input goes. It needs a stage input that takes over a second to write, so it depends on size and
load, not on our transforms. Measured (FigureQA, 2000 images, 27972 examples, loaded 2-core
machine): tfds's `serialized_examples` counter saw 27972, its next stage 27146 (2 worker
processes) and 25827 (1); the runner stream got 446610534 bytes and sent 420264368. With
`multi_threading` the in-process workers' output streams are time-flushed too (both directions).

`prepare_beam_build` turns the time-based flushing off (size-based buffering, as Beam's SDK
workers use by default) and rejects options that turn it back on; Beam has no option for the
runner side, so its module constant is set. Independently of the runner,
`check_no_examples_lost` compares what the workers counted (Beam counters travel over the
control plane, not the data plane) with what tfds wrote, and fails the build when they differ.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

import tensorflow_datasets as tfds
from absl import logging
from tensorflow_datasets.core import file_adapters

# Experiment that turns on time-based flushing of the SDK workers' outputs (Beam's
# sdk_worker_main reads it): the same race, in the worker-to-runner direction.
_TIME_FLUSH_EXPERIMENT = re.compile(r"data_buffer_time_limit_ms=(-?\d+)$")


class BeamExamplesLostError(RuntimeError):
    """A Beam build wrote fewer (or more) examples than its workers produced."""


def uses_beam(download_config: tfds.download.DownloadConfig | None) -> bool:
    """True when the build was given a Beam runner or Beam pipeline options."""
    return download_config is not None and (
        download_config.beam_runner is not None or download_config.beam_options is not None
    )


def prepare_beam_build(download_config: tfds.download.DownloadConfig | None) -> bool:
    """Makes a Beam build's local data plane lossless; returns whether the build uses Beam.

    Raises:
        ValueError: the pipeline options turn time-based data-plane flushing on.
    """
    if not uses_beam(download_config):
        return False
    if download_config.beam_options is not None:
        _reject_time_flush_experiment(download_config.beam_options)
    disable_runner_time_flush()
    return True


def _reject_time_flush_experiment(options) -> None:
    beam = tfds.core.lazy_imports.apache_beam
    debug = options.view_as(beam.options.pipeline_options.DebugOptions)
    for experiment in debug.experiments or ():
        match = _TIME_FLUSH_EXPERIMENT.match(experiment)
        if match and int(match.group(1)) > 0:
            raise ValueError(
                f"Beam experiment '{experiment}' turns on time-based flushing of the workers' "
                "data streams, which loses examples in Beam 2.77 (tfds_builders/common/"
                "beam_build.py); leave it out or set it to 0."
            )


def disable_runner_time_flush() -> None:
    """Sets the FnApiRunner's data-plane time flush to 0 (process-wide, for later runners).

    Read when a runner starts its gRPC server and workers, so it applies to every FnApiRunner
    pipeline run after this call; runners that are not the FnApiRunner do not read it.
    """
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    if getattr(worker_handlers, "DATA_BUFFER_TIME_LIMIT_MS", 0):
        logging.info(
            "Beam FnApiRunner: turning off its time-based data-plane flushing (loses data, "
            "see tfds_builders/common/beam_build.py)."
        )
        worker_handlers.DATA_BUFFER_TIME_LIMIT_MS = 0


def example_counts(pipeline_result, namespace: str) -> dict[str, int] | None:
    """The workers' `examples:<split>` counters of `namespace`, or None if the runner has none.

    Committed values only: attempted ones may count retried bundles twice.
    """
    beam = tfds.core.lazy_imports.apache_beam
    query = pipeline_result.metrics().query(beam.metrics.MetricsFilter().with_namespace(namespace))
    counts: dict[str, int] = {}
    for result in query["counters"]:
        kind, split = result.key.metric.name.split(":", 1)
        if kind != "examples":
            continue
        if result.committed is None:
            return None
        counts[split] = counts.get(split, 0) + result.committed
    return counts or None


def check_no_examples_lost(
    dataset: str, splits: Mapping[str, Any], counted: Mapping[str, int] | None
) -> None:
    """Fails when tfds wrote a different number of examples than the workers produced.

    Args:
        dataset: name for the message.
        splits: the built `info.splits` (split name -> SplitInfo with `num_examples`).
        counted: `example_counts` of the pipeline; None (no counters from this runner) skips the
            check with a warning.

    Raises:
        BeamExamplesLostError: naming every split whose counts differ.
    """
    if counted is None:
        logging.warning(
            "%s: the Beam runner reported no example counters; written counts not checked.",
            dataset,
        )
        return
    wrong = []
    for split in sorted(set(splits) | set(counted)):
        written = splits[split].num_examples if split in splits else 0
        produced = counted.get(split, 0)
        if written != produced:
            wrong.append(f"{split}: workers produced {produced}, tfds wrote {written}")
    if wrong:
        raise BeamExamplesLostError(
            f"{dataset}: the Beam build lost examples ({'; '.join(wrong)}). The runner's data "
            "plane dropped data between stages; see tfds_builders/common/beam_build.py. "
            "Rebuild without Beam, or with direct_running_mode=in_memory."
        )


def with_runner(download_config: tfds.download.DownloadConfig | None):
    """The config with a Beam runner when it has Beam options alone.

    `tfds build --beam_pipeline_options=...` gives options and no runner, and tfds 4.9.10's
    shard-based builders run on Beam only when given a runner: the options' own `runner` (or
    the DirectRunner) is named, as `beam.Pipeline` would pick it from the options.
    """
    if (
        download_config is None
        or download_config.beam_runner is not None
        or download_config.beam_options is None
    ):
        return download_config
    beam = tfds.core.lazy_imports.apache_beam
    standard = download_config.beam_options.view_as(beam.options.pipeline_options.StandardOptions)
    return dataclasses.replace(download_config, beam_runner=standard.runner or "DirectRunner")


def check_shards(dataset: str, splits: Mapping[str, Any], file_format) -> None:
    """Fails when a shard file holds another number of records than the split info says.

    A shard-based build's lengths travel back from the workers; the files are the truth.
    """
    wrong = []
    for name, split in splits.items():
        adapter = file_adapters.ADAPTER_FOR_FORMAT[file_format]
        paths = split.filepaths
        if len(paths) != len(split.shard_lengths):
            wrong.append(f"{name}: {len(paths)} shard files, {len(split.shard_lengths)} lengths")
            continue
        for path, length in zip(paths, split.shard_lengths):
            found = adapter.num_examples(path)
            if found != length:
                wrong.append(f"{path}: holds {found} records, the split info says {length}")
    if wrong:
        raise BeamExamplesLostError(f"{dataset}: the build's shards disagree: {'; '.join(wrong)}")
