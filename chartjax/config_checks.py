"""Up-front checks of a run's configuration: one line per problem, before any model is built.

`ConfigError` is what the command lines print without a traceback (exit status 2): each line of
its message names the flag, gin file or binding at fault and, where there is one, the nearest
valid choice. The loops (`train.train`, `evaluate.evaluate`) check their gin arguments with
`check` first thing, so a zero `checkpoint_every` or a string step count is refused at once
rather than as a ZeroDivisionError, a TensorFlow error or a silent step-0 run. Nothing here
imports the rest of chartjax (config.py, train.py and evaluate.py all use it).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable
from typing import Any


class ConfigError(ValueError):
    """A configuration a run cannot start with; one line per problem."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """ "; did you mean 'x'?" with the closest of `choices`, or "" when none is close."""
    close = difflib.get_close_matches(str(word), sorted(set(choices)), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


# A rule: value -> None when it is fine, else what is wrong ("must be ...").
Rule = Callable[[Any], "str | None"]


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)  # True is an int to Python


def _is_number(v) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


def positive_int(v) -> str | None:
    return None if _is_int(v) and v > 0 else "must be a positive integer"


def non_negative_int(v) -> str | None:
    return None if _is_int(v) and v >= 0 else "must be an integer >= 0"


def positive_number(v) -> str | None:
    return None if _is_number(v) and v > 0 else "must be a positive number"


def boolean(v) -> str | None:
    return None if isinstance(v, bool) else "must be True or False"


def string(v) -> str | None:
    return None if isinstance(v, str) else "must be a string"


def optional(rule: Rule) -> Rule:
    def check_optional(v):
        problem = rule(v)
        return None if v is None or problem is None else f"{problem} or None"

    return check_optional


def one_of(choices: Iterable[str], what: str) -> Rule:
    choices = tuple(choices)

    def check_choice(v):
        if isinstance(v, str) and v in choices:
            return None
        return f"not a known {what}{did_you_mean(v, choices)}"

    return check_choice


def mesh_shape(v) -> str | None:
    ok = isinstance(v, (tuple, list)) and v and all(_is_int(s) and (s > 0 or s == -1) for s in v)
    return None if ok else "must be a tuple of positive integers (at most one -1)"


def step_range(v) -> str | None:
    ok = (
        isinstance(v, (tuple, list))
        and len(v) == 2
        and all(_is_int(s) and s > 0 for s in v)
        and v[0] <= v[1]
    )
    return None if ok else "must be (first, last): 1-based update numbers, first <= last"


def check(configurable: str, settings: dict[str, tuple[Any, Rule]]) -> None:
    """Raises ConfigError listing every `name: (value, rule)` the rule refuses, one line each,
    as `configurable.name = value: problem` (the binding a user writes to fix it)."""
    problems = []
    for name, (value, rule) in settings.items():
        problem = rule(value)
        if problem:
            problems.append(f"{configurable}.{name} = {value!r}: {problem}")
    if problems:
        raise ConfigError("\n".join(problems))
