"""chartjax-convert: T5X -> chartjax -> HF -> T5X keeps every parameter (float32, exact)."""

import json

import numpy as np
import pytest
from flax import nnx

from chartjax.interop import t5x
from chartjax.models import pix2struct as p2s_lib
from chartjax.models.tiny import tiny_pix2struct
from chartjax.tools import convert_checkpoint


def _flat(model):
    return {k: np.asarray(v[...]) for k, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}


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
