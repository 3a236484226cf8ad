"""chartjax.run_log.RunLog: train_metrics.jsonl, TensorBoard scalars, log lines, progress bar.

The progress-bar tests check that the calls train.py makes in that mode run and leave the
files right; they assert nothing about time.
"""

import glob
import json
import logging
import os
import struct

import pytest
from tensorboardX.proto import event_pb2
from tensorboardX.proto.event_pb2 import SessionLog

from chartjax import run_log
from chartjax.run_log import RunLog

START = SessionLog.START
ROWS = [
    {"loss": 2.5, "learning_rate": 0.001, "step": 1, "elapsed_s": 0.5},
    {"loss": 1.25, "learning_rate": 0.002, "examples_per_s": 64.0, "step": 2, "elapsed_s": 1.0},
]


@pytest.fixture
def records():
    """Log records of the `chartjax` logger (it does not propagate to pytest's root handler).

    With a handler present RunLog adds no stderr handler of its own, so none is bound to a
    `capsys` stream that is closed after the test.
    """
    got = []

    class Keep(logging.Handler):
        def emit(self, record):
            got.append(record)

    handler = Keep(logging.INFO)
    run_log.logger.addHandler(handler)
    level = run_log.logger.level
    run_log.logger.setLevel(logging.INFO)
    try:
        yield got
    finally:
        run_log.logger.removeHandler(handler)
        run_log.logger.setLevel(level)


def _jsonl(workdir):
    with open(os.path.join(workdir, "train_metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def _tb_scalars(workdir):
    """{tag: [(step, value)]} read from the TFRecord event files under tensorboard/."""
    out = {}
    for path in glob.glob(os.path.join(workdir, "tensorboard", "events.out.tfevents.*")):
        with open(path, "rb") as f:
            data = f.read()
        i = 0
        while i < len(data):
            (n,) = struct.unpack("<Q", data[i : i + 8])
            event = event_pb2.Event.FromString(data[i + 12 : i + 12 + n])
            i += 12 + n + 4  # length, length CRC, payload, payload CRC
            for v in event.summary.value:
                out.setdefault(v.tag, []).append((event.step, v.simple_value))
    return out


def test_metrics_write_one_json_object_per_logged_step(tmp_path):
    log = RunLog(str(tmp_path))
    for m in ROWS:
        log.metrics(dict(m))
    log.close()
    rows = _jsonl(str(tmp_path))
    assert rows == ROWS
    assert [list(r) for r in rows] == [list(m) for m in ROWS]  # key order kept


def test_a_resumed_run_appends_to_the_same_jsonl(tmp_path):
    log = RunLog(str(tmp_path))
    log.metrics(dict(ROWS[0]))
    log.close()
    log = RunLog(str(tmp_path))
    log.metrics(dict(ROWS[1]))
    log.close()
    assert _jsonl(str(tmp_path)) == ROWS


def _tb_scalars_as_tensorboard_shows_them(workdir):
    """({tag: [(step, value)]}, purge steps) after TensorBoard's purge rule: the files in name
    order, and a SessionLog.START event at step s hides the events read before it with
    step >= s."""
    out, starts = {}, []
    for path in sorted(glob.glob(os.path.join(workdir, "tensorboard", "events.out.tfevents.*"))):
        with open(path, "rb") as f:
            data = f.read()
        i = 0
        while i < len(data):
            (n,) = struct.unpack("<Q", data[i : i + 8])
            event = event_pb2.Event.FromString(data[i + 12 : i + 12 + n])
            i += 12 + n + 4
            if event.HasField("session_log") and event.session_log.status == START:
                starts.append(event.step)
                for tag, values in out.items():
                    out[tag] = [(s, v) for s, v in values if s < event.step]
            for v in event.summary.value:
                out.setdefault(v.tag, []).append((event.step, v.simple_value))
    return out, starts


def test_a_resumed_run_logs_each_step_once(tmp_path):
    log = RunLog(str(tmp_path))
    for step in (1, 2, 3, 4):  # checkpoint at 2, killed after logging 4
        log.metrics({"step": step, "loss": float(step)})
    log.close()
    with open(tmp_path / "train_metrics.jsonl", "a") as f:
        f.write('{"step": 5, "lo')  # torn by the kill

    log = RunLog(str(tmp_path))
    log.resume_from(2)
    for step in (3, 4, 5):
        log.metrics({"step": step, "loss": 10.0 * step})
    log.close()
    rows = _jsonl(str(tmp_path))
    assert [(r["step"], r["loss"]) for r in rows] == [
        (1, 1.0),
        (2, 2.0),
        (3, 30.0),
        (4, 40.0),
        (5, 50.0),
    ]
    scalars, starts = _tb_scalars_as_tensorboard_shows_them(str(tmp_path))
    assert starts == [3]  # purge_step: the step after the restored one
    assert scalars["train/loss"] == [(1, 1.0), (2, 2.0), (3, 30.0), (4, 40.0), (5, 50.0)]
    assert len(glob.glob(str(tmp_path / "tensorboard" / "events.out.tfevents.*"))) == 2


def test_resume_from_without_earlier_files_and_out_of_order_use(tmp_path):
    log = RunLog(str(tmp_path))
    log.resume_from(0)  # a fresh run: nothing to drop, no purge event
    log.metrics(dict(ROWS[0]))
    with pytest.raises(RuntimeError, match="before the first metrics row"):
        log.resume_from(0)
    log.close()
    assert _jsonl(str(tmp_path)) == ROWS[:1]
    assert _tb_scalars_as_tensorboard_shows_them(str(tmp_path))[1] == []
    RunLog(str(tmp_path / "off"), enabled=False).resume_from(3)  # other processes: no-op


def test_tensorboard_scalars_are_every_metric_but_step(tmp_path):
    log = RunLog(str(tmp_path))
    for m in ROWS:
        log.metrics(dict(m))
    log.close()
    assert glob.glob(str(tmp_path / "tensorboard" / "events.out.tfevents.*"))
    scalars = _tb_scalars(str(tmp_path))
    assert set(scalars) == {
        "train/loss",
        "train/learning_rate",
        "train/elapsed_s",
        "train/examples_per_s",
    }
    assert scalars["train/loss"] == [(1, 2.5), (2, 1.25)]
    assert scalars["train/learning_rate"] == [(1, pytest.approx(0.001)), (2, pytest.approx(0.002))]
    assert scalars["train/examples_per_s"] == [(2, 64.0)]


def test_info_and_metrics_lines_go_to_the_chartjax_logger(tmp_path, records):
    log = RunLog(str(tmp_path))
    log.info("mesh {'data': 8, 'model': 1}")
    log.metrics({"step": 3, "loss": 0.123456, "accuracy": 0.5})
    log.close()
    lines = [(r.levelno, r.getMessage()) for r in records]
    assert (logging.INFO, "mesh {'data': 8, 'model': 1}") in lines
    assert (logging.INFO, "step=3 loss=0.1235 accuracy=0.5") in lines


def test_disabled_writes_no_files_but_still_logs(tmp_path, records):
    log = RunLog(str(tmp_path), enabled=False)
    log.info("process 1 here")
    log.start_progress(0, 10, enabled=True)
    log.start_budget()
    log.advance()
    log.metrics(dict(ROWS[0]))
    log.close_progress()
    log.close()
    assert os.listdir(tmp_path) == []
    msgs = [r.getMessage() for r in records]
    assert "process 1 here" in msgs
    assert not any("loss=" in m for m in msgs)  # metrics are process 0's


def test_progress_bar_by_steps_routes_info_through_the_bar(tmp_path, capsys, records):
    log = RunLog(str(tmp_path))
    log.start_progress(5, 10, enabled=True)
    log.start_budget()
    for step in (6, 7):
        log.advance()
        log.metrics({**ROWS[0], "step": step})
    log.info("eval validation @ 7: accuracy=0.5000")
    log.close_progress()
    log.close_progress()  # the final close in train.py may follow an earlier one
    log.info("stopped at step 7: done")
    log.close()
    err = capsys.readouterr().err
    assert "eval validation @ 7: accuracy=0.5000" in err  # written above the bar
    assert "7/10" in err
    msgs = [r.getMessage() for r in records]
    assert "stopped at step 7: done" in msgs  # back on the logger once the bar is closed
    assert not any("loss=" in m for m in msgs)  # with a bar the loss is its postfix
    assert [r["step"] for r in _jsonl(str(tmp_path))] == [6, 7]


def test_progress_bar_over_a_time_budget_counts_steps(tmp_path, capsys, records):
    # A time-capped recipe's bar counted seconds ("16/600s, step=30"): it counts steps, and
    # the budget used is a postfix.
    log = RunLog(str(tmp_path))
    log.start_progress(0, 1000, enabled=True, budget_s=60.0)
    log.advance()  # the compiling first step: before the budget starts
    log.start_budget()
    for _ in range(10):
        log.advance()
    log.metrics({**ROWS[0], "step": 11})
    log.close_progress()
    log.close()
    err = capsys.readouterr().err
    assert "11/1000" in err and "step/s" in err
    assert "budget=0/60s" in err and "loss=2.5000" in err
    assert "/60s [" not in err  # not a bar over seconds
    assert [r["step"] for r in _jsonl(str(tmp_path))] == [11]


def test_eval_metrics_are_eval_split_metric_scalars(tmp_path):
    log = RunLog(str(tmp_path))
    log.metrics(dict(ROWS[0]))
    log.eval_metrics(2, "validation1", {"accuracy": 0.75, "num_unparseable": 0})
    log.eval_metrics(2, "validation1[:10%]", {"accuracy": 0.5})  # TensorBoard-safe tag
    log.eval_metrics(2, "no_annot_test1", {})  # predictions only: nothing to write
    log.eval_metrics(1, "validation1", {"accuracy": 0.25}, prefix="eval_best")
    log.close()
    scalars = _tb_scalars(str(tmp_path))
    assert scalars["eval/validation1/accuracy"] == [(2, 0.75)]
    assert scalars["eval/validation1/num_unparseable"] == [(2, 0.0)]
    assert scalars["eval/validation1__10__/accuracy"] == [(2, 0.5)]
    assert scalars["eval_best/validation1/accuracy"] == [(1, 0.25)]
    assert not any("no_annot" in tag for tag in scalars)
    assert scalars["train/loss"] == [(1, 2.5)]


def test_write_eval_events_adds_a_file_beside_the_training_run(tmp_path):
    log = RunLog(str(tmp_path))
    log.metrics(dict(ROWS[0]))
    log.close()
    run_log.write_eval_events(str(tmp_path), 40, {"validation": {"accuracy": 0.5}, "test": {}})
    run_log.write_eval_events(str(tmp_path), 50, {"no_annot_test2": {}})  # writes no file
    assert len(glob.glob(str(tmp_path / "tensorboard" / "events.out.tfevents.*"))) == 2
    scalars = _tb_scalars(str(tmp_path))
    assert scalars["eval/validation/accuracy"] == [(40, 0.5)]
    assert scalars["train/loss"] == [(1, 2.5)]


def test_progress_disabled_keeps_log_lines_on_the_logger(tmp_path, capsys, records):
    log = RunLog(str(tmp_path))
    log.start_progress(0, 10, enabled=False)
    log.advance()
    log.metrics(dict(ROWS[0]))
    log.close_progress()
    log.close()
    assert "train:" not in capsys.readouterr().err  # no bar drawn
    assert any(r.getMessage().startswith("loss=2.5 ") for r in records)
    assert _jsonl(str(tmp_path)) == ROWS[:1]
