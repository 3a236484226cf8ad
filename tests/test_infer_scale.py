"""chartjax-infer at scale, on the tiny Pix2Struct (DePlot task, so tables/<id>.csv too) over 20
charts, with the 8 simulated devices of the test process unless a subprocess says otherwise:

* data parallel: a run on 1 device (a subprocess) writes the same files as on 8, and so do
  2 processes x 2 devices (below), where the batch is rounded up to the 4 devices;
* a run stopped hard after a commit (uncommitted rows and a half-written line on disk, the
  unfinished chunk's tables written) resumes into files byte-identical to an uninterrupted
  run's, with the ids that map to one table name numbered as without the stop; a resumed run
  refuses other settings, and resuming a finished run does nothing;
* a run stopped by a bad input keeps the batches before it and resumes with --skip_bad;
* --shard 0/2 and 1/2 concatenate to the whole run;
* a bad --out is one line before anything is read;
* 2 processes x 2 devices (gloo) write, from process 0, the files of 1 process.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from chartjax.inference import output as infer_output
from chartjax.interop import hf
from chartjax.models import tiny
from chartjax.models.t5 import pix2struct as p2s_lib
from chartjax.tools import infer as infer_cli
from tests.test_infer import COMMON, VOCAB_SIZE, _image, fail_infer, run_infer

ROOT = str(Path(__file__).resolve().parents[1])
pytestmark = pytest.mark.multi_device  # `whole` runs on the 8 devices
# Sorted ids: "x y" (position 15, batch 2 of 8) and "x_y" (16, batch 3) both map to
# tables/x_y.csv, so the second is x_y~2.csv.
IDS = [f"c{i:02d}" for i in range(15)] + ["x y", "x_y", "z0", "z1", "z2"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from chartjax.tools import train_vocab
    from tests.test_infer import _VOCAB_TEXT

    work = tmp_path_factory.mktemp("infer_scale")
    vocab = train_vocab.train(
        _VOCAB_TEXT * 8, str(work / "spm"), vocab_size=VOCAB_SIZE, hard_vocab_limit=False
    )
    ckpt = str(work / "p2s_hf")
    hf.save(p2s_lib.build(tiny.tiny_pix2struct(vocab_size=VOCAB_SIZE), 0), ckpt)
    charts = work / "charts"
    for i, id_ in enumerate(IDS):
        _image(str(charts / f"{id_}.png"), (20 + i % 5 * 6, 30 - i % 3 * 5), i)
    args = ["--task", "deplot", "--checkpoint", ckpt, "--vocab", vocab, *COMMON]
    return {"work": work, "args": [*args, "--images", charts], "charts": charts}


def files_of(out) -> dict[str, bytes]:
    """Every file under an output folder but the progress record, by relative path."""
    out = Path(out)
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != infer_output.PROGRESS
    }


@pytest.fixture(scope="module")
def whole(setup):
    """An uninterrupted run on the test process's 8 devices: its files and summary."""
    out = setup["work"] / "whole"
    infer_cli.main([str(a) for a in [*setup["args"], "--out", out]])
    return files_of(out)


def test_whole_run_on_8_devices(whole, setup, capsys):
    rows = [json.loads(line) for line in whole["predictions.jsonl"].decode().splitlines()]
    assert [r["id"] for r in rows] == IDS
    assert rows[15]["table_file"] == "tables/x_y.csv"
    assert rows[16]["table_file"] == "tables/x_y~2.csv"
    assert len([k for k in whole if k.startswith("tables/")]) == len(IDS)
    progress = json.loads((setup["work"] / "whole" / infer_output.PROGRESS).read_text())
    assert (progress["complete"], progress["done"], progress["rows"]) == (True, 20, 20)
    assert progress["bytes"] == len(whole["predictions.jsonl"])


def _cli(args, devices: int, extra_env=None):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env.pop("CHARTJAX_COORDINATOR", None)
    env.update(extra_env or {})
    code = "import sys; from chartjax.tools.infer import main; main(sys.argv[1:])"
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _summary(proc) -> dict:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow  # an interpreter of its own
def test_1_device_writes_the_8_device_files(whole, setup, tmp_path):
    # (4 devices, the --batch_size 2 rounded up to them: the 2-process test below.)
    summary = _summary(_cli([*setup["args"], "--out", tmp_path / "1"], 1))
    assert (summary["devices"], summary["batch_size"], summary["processes"]) == (1, 2, 1)
    assert (summary["examples"], summary["inputs"], summary["resumed"]) == (20, 20, 0)
    assert summary["examples_per_s"] > 0
    assert files_of(tmp_path / "1") == whole


class Crash(BaseException):
    """A hard stop: nothing more reaches the disk."""


def test_stopped_run_resumes_to_the_uninterrupted_files(
    whole, setup, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "o"
    args = [*setup["args"], "--out", out, "--flush_every", 8]
    commits = []
    real_commit = infer_output.Writer.commit

    def commit(self, complete=False):
        commits.append(self.state["done"])
        if len(commits) > 3:  # after the commits at start, 8 and 16 inputs
            raise Crash
        real_commit(self, complete)

    monkeypatch.setattr(infer_output.Writer, "commit", commit)
    with pytest.raises(Crash):
        infer_cli.main([str(a) for a in args])
    monkeypatch.undo()
    capsys.readouterr()
    progress = json.loads((out / infer_output.PROGRESS).read_text())
    assert (progress["done"], progress["rows"], progress["complete"]) == (16, 16, False)
    pred = out / "predictions.jsonl"
    assert pred.read_text().count("\n") == 20  # the unfinished chunk's rows reached the file
    assert (out / "tables" / "x_y~2.csv").exists()  # and its tables
    with open(pred, "ab") as f:
        f.write(b'{"id": "z2", "predic')  # a line cut short by the stop

    assert "--resume continues" in fail_infer(capsys, *args)
    err = fail_infer(capsys, *args, "--resume", "--max_decode_len", 4)
    assert "other settings: --max_decode_len 8 then, 4 now" in err
    summary = run_infer(capsys, *args, "--resume")
    assert (summary["resumed"], summary["examples"], summary["inputs"]) == (16, 20, 20)
    assert files_of(out) == whole
    # A finished run resumes to nothing more.
    summary = run_infer(capsys, *args, "--resume")
    assert (summary["resumed"], summary["examples"]) == (20, 20)
    assert files_of(out) == whole


def test_bad_input_keeps_the_batches_before_it_then_resumes_with_skip_bad(setup, tmp_path, capsys):
    charts = tmp_path / "charts"
    charts.mkdir()
    for id_ in IDS[:9]:
        (charts / f"{id_}.png").write_bytes((setup["charts"] / f"{id_}.png").read_bytes())
    (charts / "c09.png").write_bytes(b"\x89PNG not an image")  # position 9: batch 2
    args = [*setup["args"][:-1], charts]
    err = fail_infer(capsys, *args, "--out", tmp_path / "stopped")
    assert "c09.png" in err and "--skip_bad" in err
    progress = json.loads((tmp_path / "stopped" / infer_output.PROGRESS).read_text())
    assert (progress["done"], progress["rows"]) == (8, 8)
    summary = run_infer(capsys, *args, "--out", tmp_path / "stopped", "--resume", "--skip_bad")
    assert (summary["resumed"], summary["examples"], summary["skipped"]) == (8, 9, 1)
    run_infer(capsys, *args, "--out", tmp_path / "straight", "--skip_bad")
    assert files_of(tmp_path / "stopped") == files_of(tmp_path / "straight")


def test_shards_concatenate_to_the_whole_run(whole, setup, tmp_path, capsys):
    parts = {}
    for i in range(2):
        out = tmp_path / str(i)
        summary = run_infer(capsys, *setup["args"], "--out", out, "--shard", f"{i}/2")
        assert (summary["shard"], summary["inputs"], summary["examples"]) == (f"{i}/2", 10, 10)
        parts[i] = files_of(out)
    assert (
        parts[0]["predictions.jsonl"] + parts[1]["predictions.jsonl"] == whole["predictions.jsonl"]
    )
    tables = {k: v for part in parts.values() for k, v in part.items() if k.startswith("tables/")}
    assert tables == {k: v for k, v in whole.items() if k.startswith("tables/")}
    with pytest.raises(SystemExit) as e:
        infer_cli.parse_args(
            ["--task", "deplot", "--checkpoint", "c", "--out", "o", "--shard", "2/2"]
        )
    assert e.value.code == 2
    assert "0 <= I < N" in capsys.readouterr().err


def test_bad_out_is_one_line_before_anything_is_read(tmp_path, capsys):
    # A checkpoint that does not exist: a later check would name it instead.
    cli = ["--task", "deplot", "--checkpoint", tmp_path / "none", "--images", tmp_path]
    (tmp_path / "file").write_text("")
    cases = {
        f"--out {tmp_path}/file/sub: {tmp_path}/file is a file, not a folder": [
            "--out",
            tmp_path / "file" / "sub",
        ],
        f"--out {tmp_path}/file is a file, not a folder": ["--out", tmp_path / "file"],
        # sysfs refuses new files even to root, as a read-only folder does.
        "--out /sys/chartjax-infer-out: cannot write in /sys (Permission denied)": [
            "--out",
            "/sys/chartjax-infer-out",
        ],
        "--resume continues what --out holds and --overwrite removes it": [
            "--out",
            tmp_path / "new",
            "--resume",
            "--overwrite",
        ],
        f"--out {tmp_path} holds no infer_progress.json: nothing to resume": [
            "--out",
            tmp_path,
            "--resume",
        ],
    }
    for want, extra in cases.items():
        err = fail_infer(capsys, *cli, *extra)
        assert err.startswith("chartjax-infer: ") and err.count("\n") == 1, err
        assert want in err, err
    assert sorted(os.listdir(tmp_path)) == ["file"]


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_write_the_one_process_files(whole, setup, tmp_path):
    port = _free_port()
    procs = [
        _cli(
            [*setup["args"], "--out", tmp_path / "two"],
            2,
            {
                "CHARTJAX_COORDINATOR": f"localhost:{port}",
                "CHARTJAX_NUM_PROCESSES": "2",
                "CHARTJAX_PROCESS_ID": str(i),
            },
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    # Gloo writes its own lines to stdout; the summary is process 0's alone.
    (summary,) = [json.loads(x) for x in outs[0][0].splitlines() if x.startswith("{")]
    assert not [x for x in outs[1][0].splitlines() if x.startswith("{")]
    # --batch_size 2: the global batch is rounded up to a multiple of the devices.
    assert (summary["devices"], summary["processes"], summary["batch_size"]) == (4, 2, 4)
    assert summary["examples"] == 20
    assert files_of(tmp_path / "two") == whole


def _lock_held_by(pid: int, out: Path) -> Path:
    """infer.lock as a job of process `pid` on this host writes it."""
    from chartjax import workdir_lock

    out.mkdir(parents=True, exist_ok=True)
    holder = {**workdir_lock._this_process(), "pid": pid, "start_ticks": None}
    (out / infer_output.LOCK).write_text(json.dumps(holder))
    return out / infer_output.LOCK


def test_a_second_job_on_a_held_out_is_refused_in_one_line(setup, tmp_path, capsys):
    """Two chartjax-infer on one --out used to both start and interleave their rows (issue 44
    item 2): --out is held as train.lock holds a workdir, and the second job refused."""
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = _lock_held_by(holder.pid, tmp_path / "out")
        err = fail_infer(capsys, *setup["args"], "--out", tmp_path / "out")
    finally:
        holder.kill()
        holder.wait()
    assert err.count("\n") == 1 and f"is in use by another run: pid {holder.pid}" in err, err
    assert f"(lock file {lock}; stop that run or choose another --out)" in err
    assert os.listdir(tmp_path / "out") == [infer_output.LOCK]  # nothing written


@pytest.mark.parametrize("flag", ["", "--resume"])
def test_a_job_killed_before_its_first_commit_leaves_a_folder_a_rerun_takes(
    setup, tmp_path, capsys, flag
):
    """kill -9 before the first commit leaves an empty predictions.jsonl and tables/ (and its
    lock): neither a rerun nor --resume took the folder (issue 44 item 3). Counted as empty."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "out"
    (out / "tables").mkdir(parents=True)
    (out / infer_output.PREDICTIONS).write_text("")
    _lock_held_by(dead.pid, out)
    summary = run_infer(capsys, *setup["args"], "--out", out, *([flag] if flag else []))
    assert (summary["resumed"], summary["examples"]) == (0, len(IDS))
    assert infer_output.LOCK not in os.listdir(out)  # released at the end


def test_ctrl_c_is_one_line_and_keeps_what_was_committed(setup, tmp_path, capsys, monkeypatch):
    """Ctrl-C in chartjax-infer ended in a KeyboardInterrupt traceback (issue 44 item 14)."""
    from chartjax.inference.engine import Engine

    calls = []
    real_step = Engine.step

    def step(self, batch):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_step(self, batch)

    monkeypatch.setattr(Engine, "step", step)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        infer_cli.main([str(a) for a in [*setup["args"], "--out", out, "--flush_every", "2"]])
    assert e.value.code == 130
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        f"chartjax-infer: stopped by Ctrl-C; the rows committed in {out} are kept (--resume "
        "continues)"
    )
    monkeypatch.setattr(Engine, "step", real_step)
    summary = run_infer(capsys, *setup["args"], "--out", out, "--resume")
    assert summary["resumed"] > 0 and summary["examples"] == len(IDS)  # rows in the file
    with open(out / infer_output.PREDICTIONS, encoding="utf-8") as f:
        assert [json.loads(line)["id"] for line in f] == IDS
