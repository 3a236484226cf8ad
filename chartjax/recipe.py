"""What a recipe (gin_configs/tasks/*.gin) says about itself, and what a run records of it.

`recipe.kind` is "train" (the default: the row fine-tunes or trains, `chartjax-train`) or
"eval" (an evaluation-only row: zero-/few-shot, or a released fine-tune evaluated as it is,
`chartjax-eval`). An evaluation-only recipe sets no optimizer, schedule or step count, so
`chartjax-train` refuses it (`check_trainable`) rather than train with the defaults.

`recipe.gin_files` is bound by `config.parse_gin` to the `--gin_file`s of the run, as given;
`gin.config_str()` then carries it into the workdir's `config.gin`, so a run names the recipe
it ran (`chartjax.tools.paper_tables` reads it); a run's saved config.gin given as a gin file
(`chartjax-eval --workdir=runs/x` defaults to it) stands for the files that run recorded.

`recipe.substitutions` lists, in one place, what a paper-row recipe does differently from the
paper's run (one sentence each, the source in the header comment); paper_tables prints them
under the row. `differences(recipe, run)` names what makes a run not comparable with its recipe:
its model size, steps, batch or data splits (`COMPARED`) bound to other values. Nothing here
imports the rest of chartjax.
"""

from __future__ import annotations

import dataclasses
import os
import re

import gin

KINDS = ("train", "eval")


@dataclasses.dataclass(frozen=True)
class Recipe:
    kind: str
    gin_files: tuple[str, ...]
    substitutions: tuple[str, ...] = ()


@gin.configurable("recipe")
def settings(kind: str = "train", gin_files=(), substitutions=()) -> Recipe:
    """The bound `recipe.kind`, `recipe.gin_files` and `recipe.substitutions`."""
    if kind not in KINDS:
        raise ValueError(f"recipe.kind must be one of {KINDS}, not {kind!r}")
    if isinstance(substitutions, str) or not all(isinstance(x, str) for x in substitutions):
        raise ValueError("recipe.substitutions must be a list of sentences")
    return Recipe(kind=kind, gin_files=tuple(gin_files), substitutions=tuple(substitutions))


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


class _Reference:
    """A macro (`%NAME`) or configurable reference (`@name`) as gin's parser hands it over."""

    def __init__(self, text: str):
        self.text = text

    def __eq__(self, other):
        return isinstance(other, _Reference) and other.text == self.text

    def __repr__(self):
        return self.text


def bindings(path: str, gin_dir: str | None = None) -> dict[tuple[str, str], object]:
    """`{(configurable, arg): value}` of the unscoped bindings of the gin file at `path` (a
    recipe, or a run's saved config.gin), its includes read first from `gin_dir` (as gin does:
    the last binding wins) and macros replaced by their values; read with gin's statement
    parser only, so the caller's configuration is left alone."""
    from gin import config_parser

    class Delegate(config_parser.ParserDelegate):
        def configurable_reference(self, scoped_name, evaluate):
            return _Reference("@" + scoped_name + ("()" if evaluate else ""))

        def macro(self, macro_name):
            return _Reference("%" + macro_name)

    out: dict[tuple[str, str], object] = {}

    def read(file: str) -> None:
        with open(file, encoding="utf-8") as f:
            statements = list(config_parser.ConfigParser(f.read(), Delegate()))
        for st in statements:
            if isinstance(st, config_parser.IncludeStatement):
                inner = os.path.join(gin_dir or os.path.dirname(file), st.filename)
                if os.path.isfile(inner):
                    read(inner)
            elif isinstance(st, config_parser.BindingStatement) and not st.scope:
                out[(st.selector.rpartition(".")[2], st.arg_name)] = st.value

    read(path)

    def value(v, depth=0):
        if isinstance(v, _Reference) and v.text.startswith("%") and depth < 10:
            return value(out.get((v.text[1:], ""), v), depth + 1)
        return v

    return {k: value(v) for k, v in out.items() if k[1]}


# What must be bound alike for a run to be compared with its recipe's paper row. Model size:
# the size fields of the model configs (an HF checkpoint's size is its own, not a binding).
SIZE_FIELD = re.compile(
    r"^(emb_dim|num_heads|head_dim|mlp_dim|num_(encoder_|decoder_)?layers|d_model|ffn_dim|"
    r"(encoder|decoder)_layers|conv_layers|conv_channels|lstm_dim|embed_dim|[gf]_(dim|layers)|"
    r"cnn_fc_dim|image_size)$"
)
COMPARED = {
    "steps": (("train", "num_train_steps"),),
    "batch": (("train", "global_batch_size"), ("make_optimizer", "accumulate_steps")),
}
SPLIT_ARGS = ("train_split", "eval_splits", "split", "final_split")


def _category(key: tuple[str, str]) -> str | None:
    configurable, arg = key
    for name, keys in COMPARED.items():
        if key in keys:
            return name
    if configurable.endswith("Config") and SIZE_FIELD.match(arg):
        return "model size"
    if (configurable.endswith("_task") or configurable.endswith("Selection")) and (
        arg in SPLIT_ARGS
    ):
        return "data split"
    return None


def differences(recipe: dict, run: dict) -> list[str]:
    """What makes a run not comparable with its recipe (both as `bindings` returns them): one
    "<category>: <binding> = <run's> (recipe: <recipe's>)" per compared binding whose values
    differ, in a stable order. A binding the run's config lacks is not a difference (an older
    config.gin may record less)."""
    out = []
    for key in sorted(set(recipe) | set(run)):
        category = _category(key)
        if category is None or key not in run:
            continue
        ours, theirs = run[key], recipe.get(key, "(default)")
        if _norm(ours) != _norm(theirs):
            out.append(f"{category}: {key[0]}.{key[1]} = {ours!r} (recipe: {theirs!r})")
    return out


def _norm(value):
    return list(value) if isinstance(value, tuple | list) else value


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
