"""Configuration errors of chartjax-train and chartjax-eval are one line on stderr naming the
flag, gin file or binding (and the nearest valid choice), exit status 2, before any model is
built and with nothing written: a missing gin file, a misspelt binding or configurable (on the
command line or in a gin file), a training setting of the wrong type or range, a --split the
dataset lacks. Run through the commands' main(), as they run; one case in a fresh interpreter.
"""

import os
import subprocess
import sys

import gin
import pytest
import tensorflow_datasets as tfds

from chartjax.tools import evaluate as eval_cli
from chartjax.tools import train as train_cli
from tfds_builders.figureqa import figureqa as figureqa_builder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECIPE = "--gin_file=tasks/synthetic_rn.gin"


@pytest.fixture(autouse=True)
def _clean_gin():
    gin.clear_config()
    yield
    gin.clear_config()


def _train(tmp_path, *args):
    workdir = tmp_path / "run"
    status = train_cli.main([f"--workdir={workdir}", *args])
    return status, workdir


@pytest.mark.parametrize(
    "binding,line",
    [
        (
            "train.num_train_steps='five'",
            "train.num_train_steps = 'five': must be a positive integer",
        ),
        ("train.checkpoint_every=0", "train.checkpoint_every = 0: must be a positive integer"),
        ("train.log_every=0", "train.log_every = 0: must be a positive integer"),
        ("train.global_batch_size=0", "train.global_batch_size = 0: must be a positive integer"),
        ("train.num_train_steps=-1", "train.num_train_steps = -1: must be a positive integer"),
        (
            "train.max_train_time_s=0",
            "train.max_train_time_s = 0: must be a positive number or None",
        ),
        ("train.final_eval='no'", "train.final_eval = 'no': must be True or False"),
        (
            "train.rules='fdsp'",
            "train.rules = 'fdsp': not a known rules preset; did you mean 'fsdp'?",
        ),
        (
            "train.task='synthetik'",
            "train.task = 'synthetik': not a known task; did you mean 'synthetic'?",
        ),
    ],
)
def test_a_bad_training_setting_is_one_line_before_anything_is_built(
    tmp_path, capsys, binding, line
):
    status, workdir = _train(tmp_path, RECIPE, f"--gin_bindings={binding}")
    assert status == 2
    assert capsys.readouterr().err == f"chartjax-train: error: {line}\n"
    assert not workdir.exists()


def test_every_bad_setting_is_listed(tmp_path, capsys):
    status, _ = _train(
        tmp_path, RECIPE, "--gin_bindings=train.log_every=0", "--gin_bindings=train.seed=-3"
    )
    assert status == 2
    assert capsys.readouterr().err.splitlines() == [
        "chartjax-train: error: train.seed = -3: must be an integer >= 0",
        "chartjax-train: error: train.log_every = 0: must be a positive integer",
    ]


@pytest.mark.parametrize(
    "args,line",
    [
        (
            ["--gin_file=tasks/synthetic_rnn.gin"],
            "--gin_file=tasks/synthetic_rnn.gin: no such file in the working directory or in "
            "gin_configs/; did you mean 'tasks/synthetic_rn.gin'?",
        ),
        (
            [RECIPE, "--gin_bindings=train.num_train_step=5"],
            "--gin_bindings 'train.num_train_step=5': train has no parameter 'num_train_step'; "
            "did you mean 'num_train_steps'?",
        ),
        (
            [RECIPE, "--gin_bindings=trian.num_train_steps=5"],
            "--gin_bindings 'trian.num_train_steps=5': no configurable named 'trian'; did you "
            "mean 'train'?",
        ),
        (
            [RECIPE, "--gin_bindings=train.log_every=5", "--gin_bindings=train.seed=five"],
            "--gin_bindings 'train.seed=five': cannot parse it: Failed to parse token 'five'",
        ),
    ],
)
def test_a_missing_gin_file_or_misspelt_binding_is_one_line(tmp_path, capsys, args, line):
    status, workdir = _train(tmp_path, *args)
    assert status == 2
    assert capsys.readouterr().err == f"chartjax-train: error: {line}\n"
    assert not workdir.exists()


def test_a_misspelt_name_inside_a_gin_file_names_the_file_and_line(tmp_path, capsys):
    recipe = tmp_path / "mine.gin"
    recipe.write_text(
        "include 'tasks/synthetic_rn.gin'\nRNConfig.imag_size = 16\n"
        "include 'models/relation_netwrk.gin'\n"
    )
    status, _ = _train(tmp_path, f"--gin_file={recipe}")
    assert status == 2
    assert capsys.readouterr().err == (
        f"chartjax-train: error: {recipe}, line 2: RNConfig has no parameter 'imag_size'; did "
        "you mean 'image_size'?\n"
    )
    recipe.write_text("include 'models/relation_netwrk.gin'\n")
    assert _train(tmp_path, f"--gin_file={recipe}")[0] == 2
    assert capsys.readouterr().err == (
        f"chartjax-train: error: {recipe}, line 1: include 'models/relation_netwrk.gin': no such "
        "file; did you mean 'models/relation_network.gin'?\n"
    )


def test_a_split_the_dataset_lacks_is_one_line_for_chartjax_eval(tmp_path, capsys):
    data_dir = str(tmp_path / "tfds")
    figureqa_builder.Builder(data_dir=data_dir).download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            manual_dir=os.path.join(ROOT, "tfds_builders", "figureqa", "dummy_data")
        )
    )
    workdir = tmp_path / "run"
    status = eval_cli.main(
        [
            "--gin_file=tasks/figureqa_text_only.gin",
            f"--workdir={workdir}",
            f"--gin_bindings=figureqa_task.data_dir = '{data_dir}'",
            "--split=validaton1",
        ]
    )
    assert status == 2
    assert capsys.readouterr().err == (
        "chartjax-eval: error: --split=validaton1: figureqa has no split 'validaton1' (it has "
        "train1, validation1, no_annot_test1); did you mean 'validation1'?\n"
    )
    assert not workdir.exists()
    # A slice that selects nothing (validation1 holds one figure) is refused the same way.
    args = ["--gin_file=tasks/figureqa_text_only.gin", f"--workdir={workdir}"]
    args.append(f"--gin_bindings=figureqa_task.data_dir = '{data_dir}'")
    assert eval_cli.main([*args, "--split=validation1[99%:]"]) == 2
    assert capsys.readouterr().err == (
        "chartjax-eval: error: --split=validation1[99%:]: selects no record of figureqa's build\n"
    )
    assert not workdir.exists()


@pytest.mark.parametrize("command", ["train", "eval"])
def test_a_data_dir_without_the_dataset_is_one_line_before_the_model(tmp_path, capsys, command):
    """DATA_DIR moves the FigureQA recipes' data too; a folder without the build is one line."""
    nope = tmp_path / "nope"
    workdir = tmp_path / "run"
    main = train_cli.main if command == "train" else eval_cli.main
    status = main(
        [
            "--gin_file=tasks/figureqa_demo_rn.gin",
            f"--workdir={workdir}",
            f"--gin_bindings=DATA_DIR = '{nope}'",
        ]
    )
    assert status == 2
    assert capsys.readouterr().err == (
        f"chartjax-{command}: error: no TFDS dataset 'figureqa' under {nope} (looked for "
        f"{nope}/figureqa); build it with `tfds build tfds_builders/figureqa --manual_dir=... "
        f"--data_dir={nope}` (the recipes read DATA_DIR: "
        "--gin_bindings=\"DATA_DIR='/path/to/tfds'\")\n"
    )
    assert not workdir.exists()


@pytest.mark.slow
def test_the_command_prints_one_line_and_exits_2(tmp_path):
    """The whole command in a fresh interpreter: no traceback, no start-up noise."""
    workdir = tmp_path / "run"
    cmd = [
        sys.executable,
        "-c",
        "import sys; from chartjax.tools.train import main; sys.exit(main(sys.argv[1:]))",
        RECIPE,
        f"--workdir={workdir}",
        "--gin_bindings=train.num_train_step=5",
    ]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert out.returncode == 2, out.stderr
    assert out.stderr == (
        "chartjax-train: error: --gin_bindings 'train.num_train_step=5': train has no parameter "
        "'num_train_step'; did you mean 'num_train_steps'?\n"
    )
    assert not workdir.exists()
