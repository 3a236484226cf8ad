"""What a recipe (gin_configs/tasks/*.gin) says about itself, and what a run records of it.

`recipe.kind` is "train" (the default: the row fine-tunes or trains, `chartjax-train`) or
"eval" (an evaluation-only row: zero-/few-shot, or a released fine-tune evaluated as it is,
`chartjax-eval`). An evaluation-only recipe sets no optimizer, schedule or step count, so
`chartjax-train` refuses it (`check_trainable`) rather than train with the defaults.

`recipe.gin_files` is bound by `config.parse_gin` to the `--gin_file`s of the run, as given;
`gin.config_str()` then carries it into the workdir's `config.gin`, so a run names the recipe
it ran (`chartjax.tools.paper_tables` reads it); a run's saved config.gin given as a gin file
(`chartjax-eval --workdir=runs/x` defaults to it) stands for the files that run recorded. Nothing
here imports the rest of chartjax.
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


def record_gin_files(files, paths=None) -> None:
    """Binds `recipe.gin_files` to `files` as given (config.parse_gin calls it after parsing;
    `paths`: where each was found). A saved config.gin among them is replaced by the files it
    recorded, so an evaluation from a run's config.gin still names that run's recipe."""
    out = []
    for f, path in zip(files, paths or files):
        saved = saved_binding(str(path), "recipe", "gin_files")
        out += [str(f)] if saved is None else [str(g) for g in saved]
    gin.bind_parameter("recipe.gin_files", out)


def saved_binding(path: str, configurable: str, arg: str):
    """The value the gin file at `path` (a run's saved config.gin) binds to unscoped
    `configurable.arg`, or None: gin's statement parser only, so the caller's configuration is
    left alone (references and macros read as None)."""
    from gin import config_parser

    class Delegate(config_parser.ParserDelegate):
        def configurable_reference(self, scoped_name, evaluate):
            return None

        def macro(self, macro_name):
            return None

    try:
        with open(path, encoding="utf-8") as f:
            statements = list(config_parser.ConfigParser(f.read(), Delegate()))
    except (OSError, UnicodeDecodeError, SyntaxError):
        return None  # the run's own parse of it reports what is wrong
    value = None
    for st in statements:
        if (
            isinstance(st, config_parser.BindingStatement)
            and (st.selector.rpartition(".")[2], st.arg_name) == (configurable, arg)
            and not st.scope
        ):
            value = st.value  # the last binding wins, as in gin
    return value


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
