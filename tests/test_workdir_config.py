"""A run's workdir is usable through its saved config.gin (issue 27 item 2).

A recipe that starts from weights (init/t5x.gin) turned into a from-scratch run with
init/random.gin saved `train.init_path = %INIT_PATH` with `INIT_PATH = %gin.REQUIRED`, and
chartjax-infer / chartjax-convert then failed on the workdir ("macro %gin.REQUIRED is not
defined"). chartjax-eval takes the workdir's config.gin when no --gin_file is given, from
--workdir or from the run --checkpoint belongs to (its workdir or a step folder)."""

import json
import os
import re

import gin
import pytest

from chartjax import config as config_lib
from chartjax import recipe
from chartjax.interop import formats
from chartjax.tools import convert_checkpoint
from chartjax.tools import evaluate as eval_cli
from chartjax.tools import train as train_cli

# Its fixtures build and compile models (or train a run) for every test: the whole file is slow.
pytestmark = pytest.mark.slow

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


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One from-scratch run (the from-weights recipe + init/random.gin, 2 steps) that every test
    below reads: started, as a user would, from its folder with a relative DATA_DIR and
    --workdir."""
    base = tmp_path_factory.mktemp("workdir_config")
    (base / "tfds").mkdir()
    recipe_file = _recipe(base)
    argv = [f"--gin_file={recipe_file}", "--gin_file=init/random.gin", "--workdir", "run"]
    argv += [f"--gin_bindings={b}" for b in [*SHORT, "DATA_DIR = 'tfds'"]]
    cwd = os.getcwd()
    os.chdir(base)
    gin.clear_config()
    try:
        status = train_cli.main(argv)
    finally:
        gin.clear_config()
        os.chdir(cwd)
    assert status == 0
    return {"base": base, "workdir": base / "run", "argv": argv, "recipe": recipe_file}


def test_a_from_scratch_workdir_converts_and_evaluates_with_its_own_config(
    trained, tmp_path, capsys
):
    workdir = trained["workdir"]
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
    assert recorded == [trained["recipe"], "init/random.gin"]
    gin.clear_config()
    capsys.readouterr()

    assert eval_cli.main([f"--workdir={tmp_path / 'empty'}"]) == 2
    assert capsys.readouterr().err == (
        f"chartjax-eval: error: --gin_file: none given, and --workdir={tmp_path / 'empty'} "
        "holds no config.gin of an earlier run to default to\n"
    )
    assert not os.path.exists(tmp_path / "empty")


def test_an_unbound_or_wrong_vocab_is_one_line_before_anything_is_written(tmp_path, capsys):
    """A recipe's VOCAB left %gin.REQUIRED, or naming no file, used to end in 40 lines of
    traceback that never named it (issue 44 item 6), in chartjax-train and chartjax-eval."""
    recipe_file = "tasks/chart_to_text_pew_ocr_t5.gin"
    work = tmp_path / "w"
    for cli, name in ((train_cli, "chartjax-train"), (eval_cli, "chartjax-eval")):
        gin.clear_config()
        assert cli.main(["--gin_file", recipe_file, "--workdir", str(work)]) == 2
        assert capsys.readouterr().err.splitlines() == [
            f"{name}: error: {macro} is required by {recipe_file} and not given: add "
            f"--gin_bindings=\"{macro}='...'\" (the recipe's header says what it is)"
            for macro in ("INIT_PATH", "VOCAB")
        ]
        gin.clear_config()
        argv = ["--gin_file", recipe_file, "--gin_file", "init/random.gin", "--workdir", work]
        assert cli.main([*map(str, argv), "--gin_bindings", "VOCAB='/no/spm.model'"]) == 2
        assert capsys.readouterr().err == (
            f"{name}: error: Features.vocab_file = '/no/spm.model': no such file or directory "
            "(the recipe's VOCAB?)\n"
        )
    gin.clear_config()
    assert not work.exists()


def test_a_bad_loader_worker_count_is_one_line_before_the_workdir_is_made(
    tmp_path, capsys, monkeypatch
):
    """loader_workers.count = -1 and CHARTJAX_LOADER_WORKERS=abc failed after the workdir was
    made, the variable not named (issue 44 item 10)."""
    work = tmp_path / "w"
    argv = ["--gin_file", "tasks/t5_synthetic_smoke.gin", "--workdir", str(work)]
    gin.clear_config()
    assert train_cli.main([*argv, "--gin_bindings", "loader_workers.count = -1"]) == 2
    assert capsys.readouterr().err == (
        "chartjax-train: error: loader_workers.count must be a whole number >= 0, got -1\n"
    )
    monkeypatch.setenv("CHARTJAX_LOADER_WORKERS", "abc")
    gin.clear_config()
    assert train_cli.main(argv) == 2
    assert capsys.readouterr().err == (
        "chartjax-train: error: CHARTJAX_LOADER_WORKERS='abc': expected a whole number >= 0 of "
        "loader worker processes\n"
    )
    gin.clear_config()
    assert not work.exists()


def test_a_workdir_that_cannot_be_written_is_one_line_before_any_work(tmp_path, capsys):
    """A file in the workdir's place was a traceback in train and, after evaluating
    everything, in eval (issue 44 item 7). (A read-only folder is refused the same way, by the
    probe file output_place writes; root writes anywhere, so it is not tested here.)"""
    blocker = tmp_path / "file"
    blocker.write_text("")
    for cli, name in ((train_cli, "chartjax-train"), (eval_cli, "chartjax-eval")):
        gin.clear_config()
        argv = ["--gin_file", "tasks/t5_synthetic_smoke.gin", "--workdir", str(blocker / "run")]
        assert cli.main(argv) == 2
        assert capsys.readouterr().err == (
            f"{name}: error: --workdir={blocker / 'run'}: {blocker} is a file, not a folder\n"
        )
    gin.clear_config()


def test_relative_paths_are_saved_resolved_and_compared_resolved(trained, monkeypatch):
    """A relative DATA_DIR / VOCAB kept in config.gin worked only from the folder the run
    started in (issue 44 item 18): saved absolute, and a rerun from the same folder (or a
    config.gin saved before, relative) is no config change."""
    from chartjax import workdir_lock

    base = trained["base"]
    monkeypatch.chdir(base)
    saved = (base / "run" / "config.gin").read_text()
    joined = re.sub(r"\\\n\s*", "", saved)  # gin wraps a long binding onto a second line
    assert f"DATA_DIR = '{base / 'tfds'}'" in joined
    assert train_cli.main(trained["argv"]) == 0  # resumed: not refused as a change
    relative = saved.replace(str(base / "tfds"), "tfds")
    assert workdir_lock.config_changes(relative, saved) == []
    monkeypatch.chdir(base / "tfds")  # elsewhere, the same relative name is other data
    assert workdir_lock.config_changes(relative, saved) != []


def test_an_evaluation_with_other_settings_writes_beside_the_runs_own(trained, capsys, monkeypatch):
    """chartjax-eval with other bindings overwrote the run's eval/<split>/step_N/ (issue 44
    item 4): results of other settings go to eval_<digest>/, named on stderr, the run's kept."""
    monkeypatch.chdir(trained["base"])  # the run's relative DATA_DIR and --workdir
    workdir = trained["workdir"]
    argv = [str(workdir) if a == "run" else a for a in trained["argv"]]
    assert eval_cli.main([*argv, "--gin_bindings=evaluate.progress = False"]) == 0
    own = sorted((workdir / "eval").rglob("metrics.json"))
    assert own
    before = {p: p.read_bytes() for p in own}
    gin.clear_config()
    capsys.readouterr()
    other = "--gin_bindings=Decoding.max_decode_len = 3"
    assert eval_cli.main([*argv, other]) == 0
    err = capsys.readouterr().err
    (folder,) = [p for p in workdir.iterdir() if p.name.startswith("eval_")]
    assert f"results go to {folder}/, not over the run's eval/" in err
    assert (folder / "settings.txt").read_text() == "Decoding.max_decode_len: (unset) -> 3\n"
    assert list(folder.rglob("metrics.json"))
    assert {p: p.read_bytes() for p in own} == before  # the run's own results untouched
