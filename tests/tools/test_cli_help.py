"""Every flag of every console script says what it does in --help (issue 27, item 13): the
parser each command builds is taken as it parses, and each of its actions must carry help."""

import argparse
import importlib

import pytest

COMMANDS = {
    "chartjax-train": "chartjax.tools.train",
    "chartjax-eval": "chartjax.tools.evaluate",
    "chartjax-infer": "chartjax.tools.infer",
    "chartjax-convert": "chartjax.tools.convert_checkpoint",
    "chartjax-score": "chartjax.tools.score",
    "chartjax-train-vocab": "chartjax.tools.train_vocab",
    "chartjax-synth": "chartjax.tools.synth",
    "chartjax-plot": "chartjax.tools.plot_run",
}


def test_the_table_is_every_console_script():
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    scripts = tomllib.loads(pyproject.read_text())["project"]["scripts"]
    assert {k: v.split(":")[0] for k, v in scripts.items()} == COMMANDS


class _Parsed(Exception):
    pass


def _flags(parser: argparse.ArgumentParser, prefix: str) -> dict[str, str | None]:
    """`"<command> [subcommand] <flag>" -> help` of every action but -h, subcommands included."""
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.update(_flags(sub, f"{prefix} {name}"))
        elif "-h" not in action.option_strings:
            out[f"{prefix} {(action.option_strings or [action.dest])[-1]}"] = action.help
    return out


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_flag_has_a_help_line(command, monkeypatch):
    seen = []

    def capture(self, *args, **kwargs):
        seen.append(self)
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
    with pytest.raises((_Parsed, SystemExit)):
        importlib.import_module(COMMANDS[command]).main(["--help"])
    assert seen, f"{command} built no parser"
    flags = _flags(seen[0], command)
    assert len(flags) > 2
    assert [flag for flag, text in flags.items() if not text] == []
