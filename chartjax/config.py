"""gin at the edges: flag parsing for the entry points and saving the resolved config.

A `--gin_file` that does not exist, a binding gin cannot parse or apply (a misspelt parameter
or configurable, an `include` of a missing file) is a `ConfigError` of one line naming the flag
or the file and line, with the nearest valid name (config_checks.py): the command lines print
it and exit with status 2 before anything is built.

Gin files name each other as gin_configs/ lays them out (`include 'runs/figureqa_adam.gin'`):
those names are looked up in the shipped gin_configs/ first, then in the working directory, so
a `runs/` or `tasks/` folder of the user's never stands in for them. A `--gin_file` is still
the user's own file when it exists as given.

Without `--gin_file`, `--workdir` (or the run a `--checkpoint` belongs to) supplies its saved
`config.gin`: `chartjax-eval --workdir=runs/x` evaluates a run as it was trained.

The vocabulary a run reads (`Features.vocab_file`) is checked against its model's embedding
rows (`check_vocabulary`): chartjax-train and chartjax-eval here, chartjax-infer against the
checkpoint's.
"""

from __future__ import annotations

import argparse
import importlib.resources
import inspect
import logging
import os
import re

import gin

from chartjax import output_place, recipe
from chartjax.config_checks import ConfigError, did_you_mean

__all__ = [
    "GIN_DIR",
    "ConfigError",
    "check_run_vocabulary",
    "check_vocabulary",
    "find_gin_file",
    "parse_flags",
    "parse_gin",
]

# The gin files ship inside the package (chartjax.gin_configs; the checkout's gin_configs/).
GIN_DIR = str(importlib.resources.files("chartjax.gin_configs"))
GIN_PREFIX = "gin_configs/"  # recipes and docs name files as the checkout lays them out


def parse_flags(
    argv=None,
    *,
    description: str = "",
    extra=None,
    workdir_help: str = "the run's folder",
    first_check=None,
) -> argparse.Namespace:
    """`--gin_file` (repeatable; relative to cwd or to gin_configs/; default: the saved
    config.gin of `--workdir`, or of the run `--checkpoint` belongs to), `--gin_bindings`,
    `--workdir` (its help: `workdir_help`); then parses gin and checks the run's vocabulary
    against its model. `extra(parser)` may add entry-point flags; `first_check()` runs once gin
    is parsed, before the other checks (chartjax-train's refusal of an evaluation-only recipe
    says more than the bindings such a recipe leaves unset)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--gin_file",
        action="append",
        default=[],
        help="gin file (repeatable), relative to the working directory or to gin_configs/; "
        f"default: the {RUN_CONFIG} a run saved in --workdir, else in the run --checkpoint "
        "belongs to (the run's own settings, so its bindings need not be repeated)",
    )
    parser.add_argument(
        "--gin_bindings",
        action="append",
        default=[],
        metavar="BINDING",
        help="a gin binding applied after the gin files (repeatable), e.g. "
        "'train.num_train_steps = 100' or \"VOCAB='~/spm.model'\"",
    )
    parser.add_argument("--workdir", required=True, help=workdir_help)
    if extra:
        extra(parser)
    args = parser.parse_args(argv)
    checkpoint = getattr(args, "checkpoint", None)
    if checkpoint and os.path.isdir(os.path.join(checkpoint, "checkpoints")):
        # A run's workdir given as the checkpoint (as chartjax-infer takes it): its latest step.
        from chartjax.interop import formats

        try:
            args.checkpoint = formats.locate(checkpoint, "chartjax").path
        except ValueError as e:
            raise ConfigError(f"--checkpoint={checkpoint}: {e}") from None
    if not args.gin_file:
        saved = saved_run_config(args.workdir, getattr(args, "checkpoint", None))
        if saved is None:
            raise ConfigError(
                f"--gin_file: none given, and --workdir={args.workdir} holds no {RUN_CONFIG} "
                "of an earlier run to default to"
            )
        args.gin_file = [saved]
    why = output_place.unwritable(args.workdir)  # before any work (evaluation writes last)
    if why:
        raise ConfigError(f"--workdir={args.workdir}: {why}")
    parse_gin(args.gin_file, args.gin_bindings)
    if first_check is not None:
        first_check()
    resolve_relative_paths()
    check_run_vocabulary()  # a bound vocabulary that does not fit says more than what is unbound
    check_required_macros(args.gin_file)
    check_loader_workers()
    return args


def check_loader_workers() -> None:
    """The worker count (gin or CHARTJAX_LOADER_WORKERS), checked before a workdir is made."""
    from chartjax.data import loader

    try:
        loader.loader_workers()
    except ValueError as e:
        raise ConfigError(str(e)) from None


# Arguments that name files or folders (DATA_DIR and VOCAB reach them through macros).
PATH_ARGS = ("data_dir", "vocab_file", "init_path", "tokenizer", "path")


def resolve_relative_paths() -> None:
    """Makes a relative path that exists from here (a macro's value, or a `*.data_dir`,
    `*.vocab_file`, ... binding) absolute in the parsed config, so the run's config.gin works
    from any folder (chartjax-eval, -infer and -convert read a workdir through it)."""
    rebind = []
    for (scope, selector), params in gin.config._CONFIG.items():
        for arg, value in params.items():
            if (selector == "gin.macro" or arg in PATH_ARGS) and output_place.is_relative_path(
                value
            ):
                key = f"{scope}/{selector}.{arg}" if scope else f"{selector}.{arg}"
                rebind.append((key, os.path.abspath(value)))
    for key, value in rebind:
        gin.bind_parameter(key, value)


def check_required_macros(files) -> None:
    """A macro a recipe leaves `%gin.REQUIRED` (its VOCAB, INIT_PATH, ...), that a binding still
    uses and nobody bound, would reach the code as gin's placeholder object and fail deep inside
    it (a 40-line traceback that never names the macro): refused here, one line per macro. A
    placeholder no binding uses any more (INIT_PATH under init/random.gin) is fine."""
    required = {
        scope
        for (scope, selector), params in gin.config._CONFIG.items()
        if selector == "gin.macro" and _is_required(params.get("value"))
    }
    used = set()
    for (_, selector), params in gin.config._CONFIG.items():
        if selector != "gin.macro":
            for value in params.values():
                used |= _macros_in(value)
    missing = sorted(required & used)
    if missing:
        raise ConfigError(
            "\n".join(
                f"{name} is required by {', '.join(files)} and not given: add "
                f"--gin_bindings=\"{name}='...'\" (the recipe's header says what it is)"
                for name in missing
            )
        )


def _macros_in(value) -> set[str]:
    """The macro names a binding's value refers to (`%NAME`, also inside lists and dicts)."""
    if isinstance(value, gin.config.ConfigurableReference):
        return set(value.scopes) if value.selector == "gin.macro" else set()
    if isinstance(value, list | tuple | set):
        return set().union(*map(_macros_in, value)) if value else set()
    if isinstance(value, dict):
        return _macros_in(list(value.values()))
    return set()


def _is_required(value) -> bool:
    if isinstance(value, gin.config.ConfigurableReference) and value.evaluate:
        try:
            value = value.scoped_configurable_fn()
        except Exception:  # an @x() that cannot run yet is no placeholder
            return False
    return value is gin.REQUIRED


RUN_CONFIG = "config.gin"  # what a run saves in its workdir (train.py, evaluate.py)


def saved_run_config(workdir: str, checkpoint: str | None = None) -> str | None:
    """The config.gin of `workdir`, else of the run `checkpoint` belongs to (a run's workdir,
    or its `checkpoints/<step>` or `best/<step>` folder); None when neither has one."""
    candidates = [workdir]
    if checkpoint:
        path = os.path.abspath(checkpoint)
        candidates += [path, os.path.dirname(os.path.dirname(path))]
    for d in candidates:
        if os.path.isfile(os.path.join(d, RUN_CONFIG)):
            return os.path.join(d, RUN_CONFIG)
    return None


class _QuietGinResourceLookups(logging.Filter):
    # gin first tries every include as a package resource and logs an error when that fails,
    # before it finds the file on the search path: noise, not a problem.
    def filter(self, record):
        return not str(record.msg).startswith("Path not found")


def parse_gin(files, bindings=()) -> None:
    """Parses `files` then `bindings`; raises ConfigError (one line) on what gin refuses."""
    import chartjax.gin_imports  # noqa: F401  (registers every configurable)

    logging.getLogger().addFilter(_QuietGinResourceLookups())

    _includes_from_gin_dir_first()
    resolved = [find_gin_file(f) for f in files]
    try:
        gin.parse_config_files_and_bindings(resolved, list(bindings), finalize_config=False)
    except (ValueError, SyntaxError, OSError) as err:  # what gin raises for a bad file/binding
        raise ConfigError(_gin_error(err, bindings)) from None
    recipe.record_gin_files(files, resolved)  # config.gin then names the run's recipe


def _includes_from_gin_dir_first() -> None:
    """gin looks an include up under each search path in turn, the working directory ('')
    first: a cwd folder named like one of gin_configs/ (runs/, tasks/) then shadows the shipped
    file, or, as a namespace package, crashes gin's package-resource lookup (TypeError). The
    shipped files name each other, so gin_configs/ goes first; the cwd stays as the fallback.
    gin has no public way to reorder its search paths or readers: its lists are edited here."""
    prefixes = gin.config._LOCATION_PREFIXES
    prefixes[:] = [GIN_DIR, *(p for p in prefixes if p != GIN_DIR)]
    readers = gin.config._FILE_READERS
    for i, (reader, exists) in enumerate(readers):
        if exists is gin.resource_reader.system_path_file_exists:
            readers[i] = (reader, _package_file_exists)


def _package_file_exists(path: str) -> bool:
    # A folder without __init__.py is a namespace package whose spec has no origin: gin's check
    # then fails on os.path.dirname(None) instead of answering "not there".
    try:
        return gin.resource_reader.system_path_file_exists(path)
    except TypeError:
        return False


def find_gin_file(name: str) -> str:
    """A `--gin_file` value -> a path: as given (relative to the working directory), else inside
    the installed gin_configs (with or without the `gin_configs/` prefix). A file of the working
    directory is made absolute: gin would look a relative name up in gin_configs/ first."""
    if os.path.exists(name):
        return os.path.abspath(name)
    inner = name.removeprefix(GIN_PREFIX)
    if os.path.exists(os.path.join(GIN_DIR, inner)):
        return os.path.join(GIN_DIR, inner)
    raise ConfigError(
        f"--gin_file={name}: no such file in the working directory or in {GIN_PREFIX}"
        + did_you_mean(inner, _shipped_gin_files())
    )


def _shipped_gin_files() -> list[str]:
    """Every file under gin_configs/, as `tasks/figureqa_rn.gin`."""
    out = []
    for root, _, names in os.walk(GIN_DIR):
        rel = os.path.relpath(root, GIN_DIR)
        out += [os.path.normpath(os.path.join(rel, n)) for n in names if n.endswith(".gin")]
    return out


# -- the vocabulary against the model --------------------------------------------------------

# Embedding tables are padded past their vocabulary: T5 v1.1's 32128 rows hold
# cc_all.32000.100extra (32000 pieces, 100 sentinel ids, rounded up to a multiple of 128), and
# Pix2Struct's 50244 its 50000 pieces. Far more rows than pieces means the vocabulary is not the
# one the model was sized for: the ids past it are never targets, yet each step's softmax
# spreads over them, so the loss starts at ln(rows) and the model predicts UNK for a long time
# (a 500-piece vocabulary in a 50244-row model wrote " ⁇  ⁇ ..."). Up to 2 x pieces + 128 rows
# is allowed; `vocabulary_check.allow_unused_ids = True` allows any larger model.
SPARE_ROWS = 128


def max_rows(pieces: int) -> int:
    """The most embedding rows a model may have for a vocabulary of `pieces` pieces."""
    return 2 * pieces + SPARE_ROWS


@gin.configurable("vocabulary_check")
def _allow_unused_ids(allow_unused_ids: bool = False) -> bool:
    """`vocabulary_check.allow_unused_ids = True`: a model may have any number of embedding
    rows past its vocabulary (e.g. one sized for a vocabulary that will grow)."""
    return bool(allow_unused_ids)


def check_vocabulary(
    pieces: int,
    rows: int,
    *,
    vocab: str,
    model: str,
    allow_unused_ids: bool = False,
    remedy: str | None = None,
) -> None:
    """Raises ConfigError (one line) unless a vocabulary of `pieces` ids fits a model of
    `rows` embedding rows: every id must have a row, and the rows may not outnumber the ids by
    more than padding (`max_rows`) unless `allow_unused_ids`. `vocab` names the vocabulary,
    `model` the model's size (`Pix2StructConfig.vocab_size = 50244`); `remedy` replaces the
    advice of the training loops (chartjax-infer's has no binding to give)."""
    if pieces > rows:
        raise ConfigError(
            f"{model}, but the vocabulary {vocab} has {pieces} pieces: ids {rows} to "
            f"{pieces - 1} have no embedding; "
            + (remedy or f"it is not this model's vocabulary, or the model needs {pieces} rows")
        )
    if rows > max_rows(pieces) and not allow_unused_ids:
        raise ConfigError(
            f"{model}, but the vocabulary {vocab} has only {pieces} pieces: {rows - pieces} ids "
            f"would never be targets (training starts at loss ln({rows}) and predicts UNK); "
            + (
                remedy
                or "use the model's own vocabulary or size the model to it (at most "
                f"2 x {pieces} + {SPARE_ROWS} = {max_rows(pieces)} rows), or bind "
                "vocabulary_check.allow_unused_ids = True"
            )
        )


def check_run_vocabulary() -> None:
    """Checks the parsed config's vocabulary (`Features.vocab_file`, as the seq2seq tasks
    read it) against the `vocab_size` of the model config `train.model_fn` /
    `evaluate.model_fn` builds from (`build_model.config`); raises ConfigError. A config
    without either (FigureQA's question vocabulary, the synthetic token tasks, an HF model
    config whose path is still unbound, a vocabulary file that cannot be opened) is not
    checked: the run reports what it lacks."""
    from chartjax.data import vocab as vocab_lib

    path = _bound_value("Features.vocab_file")
    if not isinstance(path, str):
        return
    models = {}
    for loop in ("train", "evaluate"):
        cfg = _model_config(loop)
        if isinstance(getattr(cfg, "vocab_size", None), int):
            models.setdefault(f"{type(cfg).__name__}.vocab_size = {cfg.vocab_size}", cfg)
    if not models:
        return
    if not os.path.exists(os.path.expanduser(path)):
        raise ConfigError(
            f"Features.vocab_file = {path!r}: no such file or directory (the recipe's VOCAB?)"
        )
    if _bound_value("Features.modality") == "prefix_lm":
        _check_prefix_lm_vocabulary(path, models)
        return
    try:
        pieces = vocab_lib.open_vocabulary(os.path.expanduser(path)).vocab_size
    except (OSError, ValueError):
        return  # an unreadable file: the task names it when it opens it
    for name, cfg in models.items():
        check_vocabulary(
            pieces,
            cfg.vocab_size,
            vocab=path,
            model=name,
            allow_unused_ids=_allow_unused_ids(),
        )


def _check_prefix_lm_vocabulary(path: str, models: dict) -> None:
    """A PaliGemma's tokenizer (the checkpoint folder's tokenizer.json / tokenizer.model) against
    the model: its `<image>` must be the model's `image_token_id`, and its ids (the image id
    aside when it lies past the table, as PaliGemma 1's does) must fit `vocab_size`, without
    more spare rows than `check_vocabulary` allows."""
    from chartjax.data import paligemma_inputs
    from chartjax.models.paligemma import PaliGemmaConfig

    try:
        tok = paligemma_inputs.open_tokenizer(os.path.expanduser(path))
    except FileNotFoundError as e:
        raise ConfigError(
            f"Features.vocab_file = {path!r}: {e} (a PaliGemma checkpoint's folder holds them)"
        ) from None
    except ValueError:
        return  # an unreadable file: the task names it when it opens it
    image_id = tok.id_of(paligemma_inputs.IMAGE)
    for name, cfg in models.items():
        if not isinstance(cfg, PaliGemmaConfig):
            continue
        if image_id != cfg.image_token_id:
            raise ConfigError(
                f"{type(cfg).__name__}.image_token_id = {cfg.image_token_id}, but the tokenizer "
                f"{path} has {paligemma_inputs.IMAGE} at id {image_id}: not this model's "
                "tokenizer (give the checkpoint's own folder as Features.vocab_file)"
            )
        pieces = len(tok) - (1 if image_id >= cfg.vocab_size else 0)
        check_vocabulary(
            pieces, cfg.vocab_size, vocab=path, model=name, allow_unused_ids=_allow_unused_ids()
        )


def _model_config(loop: str):
    """The config `<loop>.model_fn = @build_model` builds its model from, or None."""
    try:
        ref = gin.query_parameter(f"{loop}.model_fn")
    except ValueError:
        return None
    if not (
        isinstance(ref, gin.config.ConfigurableReference)
        and ref.selector.rpartition(".")[2] == "build_model"
    ):
        return None
    return _bound_value("build_model.config", ref.scopes)


def _bound_value(key: str, scopes=()):
    """The value bound to gin `key` (under `scopes`, else unscoped), macros and `@x()`
    references evaluated; None when nothing is bound or it cannot be evaluated (a REQUIRED
    macro, an HF config.json not found: the run itself reports those)."""
    keys = ["/".join([*scopes, key])] if scopes else []
    for k in [*keys, key]:
        try:
            value = gin.query_parameter(k)
        except ValueError:
            continue
        if isinstance(value, gin.config.ConfigurableReference) and value.evaluate:
            try:
                value = value.scoped_configurable_fn()
            except Exception:
                return None
        return None if value is gin.REQUIRED else value
    return None


# -- gin's errors as one line --------------------------------------------------------------------

_NO_PARAMETER = re.compile(
    r"Configurable '(?P<name>[^']+)' doesn't have a parameter named '(?P<arg>[^']+)'"
)
_NO_CONFIGURABLE = re.compile(
    r"No configurable matching (?:reference )?'@?(?P<name>[^'(]+)(?:\(\))?'"
)
_NO_FILE = re.compile(r"Unable to open file: (?P<path>.+?)\. Searched config paths")
_IN_FILE = re.compile(r'\s*In file "(?P<path>[^"]+)", line (?P<line>\d+)')
_IN_BINDINGS = re.compile(r"\s*In bindings string line \d+")


def _gin_error(err: BaseException, bindings=()) -> str:
    """`where: what[; did you mean ...?]` from gin's multi-line error: `where` is the binding
    (`--gin_bindings 'train.num_train_step=5'`) or `file, line N`."""
    if isinstance(err, SyntaxError):  # gin's parser: the location is in the exception
        what = f"cannot parse it: {str(err.msg).strip().splitlines()[-1].strip()}"
        if err.filename:
            where = f"{_shown_path(err.filename)}, line {err.lineno}"
        else:
            # gin parses the bindings as one text, a line each
            text = (err.text or "").strip() or _line("\n".join(bindings), err.lineno)
            where = f"--gin_bindings {text!r}"
        return f"{where}: {what}"
    lines = str(err).splitlines()
    what, where = lines[0].strip(), None
    for i, line in enumerate(lines[1:], 1):
        if m := _IN_FILE.match(line):
            where = f"{_shown_path(m['path'])}, line {m['line']}"
        elif _IN_BINDINGS.match(line) and i + 1 < len(lines):
            where = f"--gin_bindings {lines[i + 1].strip()!r}"
    if m := _NO_PARAMETER.match(what):
        what = f"{m['name']} has no parameter {m['arg']!r}" + did_you_mean(
            m["arg"], _parameters(m["name"])
        )
    elif m := _NO_CONFIGURABLE.match(what):
        what = f"no configurable named {m['name']!r}" + did_you_mean(m["name"], _configurables())
    elif m := _NO_FILE.match(what):
        inner = m["path"].removeprefix(GIN_PREFIX)
        what = f"include {m['path']!r}: no such file" + did_you_mean(inner, _shipped_gin_files())
    return f"{where}: {what}" if where else what


def _line(text: str, lineno: int | None) -> str:
    lines = text.splitlines()
    return lines[lineno - 1].strip() if lineno and 0 < lineno <= len(lines) else ""


def _shown_path(path: str) -> str:
    """A gin file as the checkout names it (gin_configs/...), one under the working directory
    relative to it (find_gin_file made it absolute), others as given."""
    inside = os.path.relpath(os.path.abspath(path), GIN_DIR)
    if not inside.startswith(".."):
        return GIN_PREFIX + inside
    here = os.path.relpath(os.path.abspath(path))
    return path if here.startswith("..") else here


# gin keeps its registry private; the suggestions are a courtesy, so they go quiet if it moves.
def _configurables() -> list[str]:
    try:
        registry = gin.config._REGISTRY
        return [registry.minimal_selector(k) for k, _ in registry.items()]
    except Exception:
        return []


def _parameters(name: str) -> list[str]:
    try:
        c = gin.config._REGISTRY.get_match(name)
        names = list(inspect.signature(c.wrapped).parameters)
    except Exception:
        return []
    if c.allowlist:
        names = [n for n in names if n in c.allowlist]
    return [n for n in names if n not in (c.denylist or ())]
