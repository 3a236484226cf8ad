"""A run's workdir is usable through its saved config.gin (issue 27 item 2).

A recipe that starts from weights (init/t5x.gin) turned into a from-scratch run with
init/random.gin saved `train.init_path = %INIT_PATH` with `INIT_PATH = %gin.REQUIRED`, and
chartjax-infer / chartjax-convert then failed on the workdir ("macro %gin.REQUIRED is not
defined"). chartjax-eval takes the workdir's config.gin when no --gin_file is given, from
--workdir or from the run --checkpoint belongs to (its workdir or a step folder)."""

import json
import os

import gin
import pytest

from chartjax import config as config_lib
from chartjax import recipe
from chartjax.interop import formats
from chartjax.tools import convert_checkpoint
from chartjax.tools import evaluate as eval_cli
from chartjax.tools import train as train_cli

SHORT = [
    "train.num_train_steps = 2",
    "train.checkpoint_every = 2",
    "train.log_every = 1",
    "train.progress = False",
    "train.final_eval = False",  # chartjax-eval evaluates it below
    "train.global_batch_size = 8",
    "evaluate.eval_batch_size = 8",
    "synthetic_seq2seq_task.num_eval = 8",
    "T5Config.num_encoder_layers = 1",  # tracing, not computing, is most of such a run
    "T5Config.num_decoder_layers = 1",
]


@pytest.fixture(autouse=True)
def _clean_gin():
    gin.clear_config()
    yield
    gin.clear_config()


def _recipe(tmp_path):
    """A from-weights recipe of the user's: the tiny T5 smoke recipe + init/t5x.gin."""
    path = tmp_path / "from_t5x.gin"
    path.write_text("include 'tasks/t5_synthetic_smoke.gin'\ninclude 'init/t5x.gin'\n")
    return str(path)


def test_init_random_after_a_pretrained_recipe_saves_a_loadable_config(tmp_path):
    config_lib.parse_gin([_recipe(tmp_path), "init/random.gin"])
    assert gin.query_parameter("train.init_path") is None
    assert gin.query_parameter("evaluate.init_format") == "random"  # not left at t5x
    workdir = tmp_path / "run"
    (workdir / "checkpoints" / "2" / "state").mkdir(parents=True)  # a step folder's layout
    (workdir / "config.gin").write_text(gin.config_str())
    cfg = formats.read_config(formats.locate(str(workdir)))  # what infer and convert read
    assert (type(cfg).__name__, cfg.vocab_size, cfg.emb_dim) == ("T5Config", 128, 32)


def _metrics(split_dir):
    return json.loads((split_dir / "metrics.json").read_text())


def test_a_from_scratch_workdir_converts_and_evaluates_with_its_own_config(tmp_path, capsys):
    workdir = tmp_path / "run"
    args = [f"--gin_file={_recipe(tmp_path)}", "--gin_file=init/random.gin"]
    status = train_cli.main(
        [*args, f"--workdir={workdir}", *(f"--gin_bindings={b}" for b in SHORT)]
    )
    assert status == 0, capsys.readouterr().err
    gin.clear_config()

    out = tmp_path / "hf"  # chartjax-convert takes the workdir (its latest step)
    convert_checkpoint.main(["--from", "chartjax", "--to", "hf", str(workdir), str(out)])
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["family"] == (
        "T5Transformer"
    )
    assert (out / "config.json").is_file()

    # No --gin_file: the workdir's config.gin, the run's own bindings (SHORT's num_eval too).
    assert eval_cli.main([f"--workdir={workdir}"]) == 0
    assert _metrics(workdir / "eval" / "validation" / "step_2")["num_examples"] == 8
    gin.clear_config()

    # Another workdir, the run given as --checkpoint: its config, and its recipe recorded.
    other = tmp_path / "other"
    assert eval_cli.main([f"--workdir={other}", f"--checkpoint={workdir}"]) == 0
    assert _metrics(other / "eval" / "validation" / "step_2")["num_examples"] == 8
    recorded = recipe.saved_binding(str(other / "config.gin"), "recipe", "gin_files")
    assert recorded == [_recipe(tmp_path), "init/random.gin"]
    gin.clear_config()
    capsys.readouterr()

    assert eval_cli.main([f"--workdir={tmp_path / 'empty'}"]) == 2
    assert capsys.readouterr().err == (
        f"chartjax-eval: error: --gin_file: none given, and --workdir={tmp_path / 'empty'} "
        "holds no config.gin of an earlier run to default to\n"
    )
    assert not os.path.exists(tmp_path / "empty")
