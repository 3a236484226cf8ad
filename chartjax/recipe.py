"""What a recipe (gin_configs/tasks/*.gin) says about itself, and what a run records of it.

`recipe.kind` is "train" (the default: the row fine-tunes or trains, `chartjax-train`) or
"eval" (an evaluation-only row: zero-/few-shot, or a released fine-tune evaluated as it is,
`chartjax-eval`). An evaluation-only recipe sets no optimizer, schedule or step count, so
`chartjax-train` refuses it (`check_trainable`) rather than train with the defaults.

`recipe.gin_files` is bound by `config.parse_gin` to the `--gin_file`s of the run, as given;
`gin.config_str()` then carries it into the workdir's `config.gin`, so a run names the recipe
it ran (`chartjax.tools.paper_tables` reads it). Nothing here imports the rest of chartjax.
"""

from __future__ import annotations

import dataclasses

import gin

KINDS = ("train", "eval")


@dataclasses.dataclass(frozen=True)
class Recipe:
    kind: str
    gin_files: tuple[str, ...]


@gin.configurable("recipe")
def settings(kind: str = "train", gin_files=()) -> Recipe:
    """The bound `recipe.kind` and `recipe.gin_files`."""
    if kind not in KINDS:
        raise ValueError(f"recipe.kind must be one of {KINDS}, not {kind!r}")
    return Recipe(kind=kind, gin_files=tuple(gin_files))


def record_gin_files(files) -> None:
    """Binds `recipe.gin_files` (config.parse_gin calls it after parsing)."""
    gin.bind_parameter("recipe.gin_files", [str(f) for f in files])


def recipe_name(gin_files) -> str | None:
    """The task recipe among a run's gin files: the stem of the first `tasks/<name>.gin`."""
    for f in gin_files:
        parts = str(f).replace("\\", "/").split("/")
        if len(parts) >= 2 and parts[-2] == "tasks" and parts[-1].endswith(".gin"):
            return parts[-1][: -len(".gin")]
    return None


class EvalOnlyRecipe(SystemExit):
    """A usage error of chartjax-train: the message is printed and the exit status is 1 (no
    traceback)."""


def check_trainable() -> None:
    """Raises EvalOnlyRecipe when the parsed config is an evaluation-only recipe."""
    r = settings()
    if r.kind == "train":
        return
    files = " ".join(f"--gin_file={f}" for f in r.gin_files) or "--gin_file=<the recipe>"
    name = recipe_name(r.gin_files)
    what = f"tasks/{name}.gin" if name else "this recipe"
    raise EvalOnlyRecipe(
        f"chartjax-train: {what} is an evaluation-only recipe (recipe.kind = 'eval'): it "
        "evaluates published weights as they are, with no training run, so it sets no "
        "optimizer, schedule or number of steps, and training it would use the defaults.\n"
        "Evaluate it instead (with the same --gin_bindings):\n"
        f"  chartjax-eval {files} --workdir=<workdir>\n"
        "To fine-tune from it anyway, give the training settings (e.g. "
        "--gin_file=runs/adafactor_t5x.gin, train.num_train_steps) and "
        "--gin_bindings=\"recipe.kind = 'train'\"."
    )
