"""chartjax-convert: T5X -> chartjax -> HF -> T5X keeps every parameter (float32, exact)."""

import errno
import json
import os
import shutil

import numpy as np
import pytest
from flax import nnx

from chartjax.interop import t5x
from chartjax.models.t5 import pix2struct as p2s_lib
from chartjax.models.tiny import tiny_pix2struct
from chartjax.tools import convert_checkpoint


def _flat(model):
    return {k: np.asarray(v[...]) for k, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}


@pytest.mark.slow
def test_chain_of_conversions(tmp_path, capsys):
    pytest.importorskip("safetensors")
    model = p2s_lib.build(tiny_pix2struct(), 5)
    src = tmp_path / "checkpoint_9"
    t5x.save(model, str(src), step=9)
    steps = [
        ("t5x", "chartjax", src, tmp_path / "cj"),
        ("chartjax", "hf", tmp_path / "cj", tmp_path / "hf"),
        ("hf", "t5x", tmp_path / "hf", tmp_path / "checkpoint_out"),
    ]
    for a, b, i, o in steps:
        convert_checkpoint.main(["--from", a, "--to", b, str(i), str(o)])
        line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert line["family"] == "Pix2Struct" and line["params"] == sum(
            w.size for w in _flat(model).values()
        )
    assert (tmp_path / "cj" / "params").is_dir()
    assert json.loads((tmp_path / "cj" / "config.json").read_text())["family"] == "pix2struct"
    back, cfg = convert_checkpoint.load_chartjax(str(tmp_path / "cj"))
    assert cfg == model.cfg
    final, _, _ = t5x.load(str(tmp_path / "checkpoint_out"))
    want = _flat(model)
    for got in (_flat(back), _flat(final)):
        assert set(got) == set(want)
        for k, w in want.items():
            np.testing.assert_array_equal(got[k], w, err_msg=str(k))


def test_cli_errors(tmp_path, capsys):
    with pytest.raises(SystemExit):
        convert_checkpoint.main(
            ["--from", "t5x", "--to", "hf", str(tmp_path / "nope"), str(tmp_path / "o")]
        )
    assert "input not found" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as e:
        convert_checkpoint.main(
            ["--from", "chartjax", "--to", "hf", str(tmp_path / "empty"), str(tmp_path / "o")]
        )
    assert e.value.code == 1
    assert "not a chartjax params checkpoint" in capsys.readouterr().err


# --------------------------------------------------------------------------- faults (issue 26)


@pytest.fixture(scope="module")
def hf_t5(tmp_path_factory):
    """A tiny HF T5 directory (2+2 layers); read-only, copy it to change it."""
    from chartjax.interop import hf
    from chartjax.models import t5 as t5_lib
    from chartjax.models.tiny import tiny_t5

    pytest.importorskip("safetensors")
    d = tmp_path_factory.mktemp("hf") / "t5"
    hf.save(t5_lib.build(tiny_t5(), 0), str(d))
    return d


def _fail(capsys, *argv) -> str:
    """The one stderr line of a conversion that must exit with status 1."""
    with pytest.raises(SystemExit) as e:
        convert_checkpoint.main([str(a) for a in argv])
    assert e.value.code == 1
    return capsys.readouterr().err


def _tree(path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_weights_config_json_leaves_out_are_refused(hf_t5, tmp_path, capsys):
    src = shutil.copytree(hf_t5, tmp_path / "in")
    cfg = json.loads((src / "config.json").read_text())
    cfg["num_layers"] = 1  # the decoder follows it; a smaller model was written, status 0
    del cfg["num_decoder_layers"]
    (src / "config.json").write_text(json.dumps(cfg))
    before = _tree(tmp_path)
    err = _fail(capsys, "--from", "hf", "--to", "chartjax", src, tmp_path / "out")
    assert f"chartjax-convert: {src}: the weights do not fit the T5Transformer" in err
    assert "(23 unused, 0 missing" in err
    assert "\n  unused: decoder.block.1.layer.0.SelfAttention.q.weight (32, 32)\n" in err
    assert _tree(tmp_path) == before  # no output, no temporary folder


def test_truncated_safetensors_is_named(hf_t5, tmp_path, capsys):
    src = shutil.copytree(hf_t5, tmp_path / "in")
    st = src / "model.safetensors"
    st.write_bytes(st.read_bytes()[:-100])
    before = _tree(tmp_path)
    err = _fail(capsys, "--from", "hf", "--to", "t5x", src, tmp_path / "out")
    assert err.startswith(f"chartjax-convert: {st}: truncated or damaged safetensors file (")
    assert err.count("\n") == 1 and _tree(tmp_path) == before


def test_invalid_config_json_is_named(hf_t5, tmp_path, capsys):
    src = shutil.copytree(hf_t5, tmp_path / "in")
    cfg = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**cfg, "feed_forward_proj": "quick_gelu"}))
    err = _fail(capsys, "--from", "hf", "--to", "hf", src, tmp_path / "out")
    assert err.startswith(
        f"chartjax-convert: unknown activation 'quick_gelu' in {src / 'config.json'} field "
        "feed_forward_proj, supported: gelu_new, gelu_pytorch_tanh, relu, silu, gated-gelu_new"
    )
    (src / "config.json").write_text("{")
    err = _fail(capsys, "--from", "hf", "--to", "hf", src, tmp_path / "out")
    assert err.startswith(f"chartjax-convert: {src / 'config.json'}: invalid JSON (")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "case,message",
    [
        ("file", "output {out} exists and is not a directory"),
        ("under_a_file", "cannot write output {out}: {tmp}/file is a file, not a directory"),
        ("not_empty", "output exists and is not empty: {out}"),
        (
            "read_only",
            "cannot write output {out}: cannot create a directory in {tmp}/ro (Permission denied)",
        ),
    ],
)
def test_unwritable_output_is_refused_before_the_work(
    hf_t5, tmp_path, capsys, monkeypatch, case, message
):
    out = {
        "file": tmp_path / "file",
        "under_a_file": tmp_path / "file" / "sub" / "out",
        "not_empty": tmp_path / "full",
        "read_only": tmp_path / "ro" / "new" / "out",
    }[case]
    (tmp_path / "file").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o555)
    if case == "read_only" and os.access(tmp_path / "ro", os.W_OK):
        pytest.skip("this user (root) writes into read-only folders")

    def load_any(*_):
        raise AssertionError("the checkpoint was read before the output was checked")

    monkeypatch.setattr(convert_checkpoint, "load_any", load_any)
    before = _tree(tmp_path)
    err = _fail(capsys, "--from", "hf", "--to", "chartjax", hf_t5, out)
    assert err == "chartjax-convert: " + message.format(out=out, tmp=tmp_path) + "\n"
    assert _tree(tmp_path) == before


def _full_disk(monkeypatch, dst):
    """The writer of `dst` fails part-way with ENOSPC, after writing part of its files (Orbax
    leaves its `*-tmp` folder, safetensors half a file)."""

    def enospc(path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    if dst == "chartjax":
        import orbax.checkpoint as ocp

        def save(self, directory, *a, **k):
            os.makedirs(f"{directory}.orbax-checkpoint-tmp-1")
            enospc(directory)

        monkeypatch.setattr(ocp.StandardCheckpointer, "save", save)
    else:
        import safetensors.numpy

        def save_file(tensors, filename, metadata=None):
            with open(filename, "wb") as f:
                f.write(b"\0" * 1000)
            enospc(filename)

        monkeypatch.setattr(safetensors.numpy, "save_file", save_file)


@pytest.mark.parametrize("dst", ["chartjax", "hf"])
@pytest.mark.slow
def test_full_disk_leaves_nothing_and_the_rerun_works(hf_t5, tmp_path, capsys, monkeypatch, dst):
    out = tmp_path / "new" / "out"
    before = _tree(tmp_path)
    with monkeypatch.context() as m:
        _full_disk(m, dst)
        err = _fail(capsys, "--from", "hf", "--to", dst, hf_t5, out)
    assert err.startswith(f"chartjax-convert: cannot write {out}: [Errno {errno.ENOSPC}] No space")
    assert err.count("\n") == 1
    assert _tree(tmp_path) == before  # neither the output, its parent, nor a temporary folder
    out.mkdir(parents=True)  # an empty output folder made beforehand is taken too
    convert_checkpoint.main(["--from", "hf", "--to", dst, str(hf_t5), str(out)])
    want = convert_checkpoint.load_any("hf", str(hf_t5))[0]
    n = sum(w.size for w in _flat(want).values())
    assert json.loads(capsys.readouterr().out)["params"] == n
    assert os.listdir(out.parent) == ["out"]
    back = convert_checkpoint.load_any(dst, str(out))[0]
    for k, w in _flat(want).items():
        np.testing.assert_array_equal(_flat(back)[k], w, err_msg=str(k))
