"""chartjax.recipe: `recipe.kind` (chartjax-train refuses an evaluation-only recipe before
anything runs; tests/tools/test_train.py runs the command) and `recipe.gin_files` (recorded by
parse_gin, so a run's config.gin names its recipe)."""

import gin
import pytest

from chartjax import config as config_lib
from chartjax import recipe

ZERO = "tasks/chartcheck_matcha_chartqa_zero.gin"


@pytest.fixture(autouse=True)
def _clean_gin():
    gin.clear_config()
    yield
    gin.clear_config()


def test_kind_defaults_to_train_and_rejects_anything_else():
    assert recipe.settings() == recipe.Recipe(kind="train", gin_files=())
    gin.bind_parameter("recipe.kind", "finetune")
    with pytest.raises(ValueError, match="recipe.kind must be one of"):
        recipe.settings()


def test_recipe_name_is_the_first_task_recipe_among_the_gin_files():
    assert recipe.recipe_name(["init/t5x.gin", ZERO, "tasks/figureqa_rn.gin"]) == (
        "chartcheck_matcha_chartqa_zero"
    )
    assert recipe.recipe_name(["/abs/gin_configs/tasks/figureqa_rn.gin"]) == "figureqa_rn"
    assert recipe.recipe_name(["hardware/fsdp.gin", "mine.gin"]) is None


@pytest.mark.parametrize("extra", [[], ["hardware/fsdp.gin"]])
def test_an_evaluation_only_recipe_is_not_trainable(extra):
    config_lib.parse_gin([ZERO, *extra], ["VOCAB = 'spm.model'"])
    with pytest.raises(recipe.EvalOnlyRecipe) as err:
        recipe.check_trainable()  # chartjax-train's first step after parsing its flags
    message = str(err.value)
    assert "tasks/chartcheck_matcha_chartqa_zero.gin is an evaluation-only recipe" in message
    files = " ".join(f"--gin_file={f}" for f in [ZERO, *extra])
    assert f"chartjax-eval {files} --workdir=<workdir>" in message
    assert isinstance(err.value, SystemExit)  # the command line prints it, no traceback
    # Asked for explicitly, training is allowed (with the user's own training settings).
    gin.bind_parameter("recipe.kind", "train")
    recipe.check_trainable()


def test_parse_gin_records_the_gin_files_in_the_saved_config():
    config_lib.parse_gin(["tasks/figureqa_rn.gin", "hardware/fsdp.gin"])
    assert recipe.settings().gin_files == ("tasks/figureqa_rn.gin", "hardware/fsdp.gin")
    # What train() saves as <workdir>/config.gin (tests/tools/test_paper_tables.py reads the
    # same line back to name the recipe).
    text = gin.config_str()
    assert "recipe.gin_files = ['tasks/figureqa_rn.gin', 'hardware/fsdp.gin']" in text
