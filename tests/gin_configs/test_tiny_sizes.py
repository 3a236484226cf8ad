"""One tiny-config system: each family's tiny model is its gin_configs/sizes/*_tiny.gin, and
runs/smoke.gin and the tests' recipe runs (tests/tasks/tiny_recipes.py) take it from there
rather than restating it; the Python-built tiny models of those tests (TINY_LAYERS) match it."""

from __future__ import annotations

from pathlib import Path

from gin import config_parser

from tests.tasks import tiny_recipes

GIN = Path(__file__).resolve().parents[2] / "gin_configs"
TINY = sorted(p.name for p in (GIN / "sizes").glob("*_tiny.gin"))


class _Delegate(config_parser.ParserDelegate):
    def configurable_reference(self, scoped_name, evaluate):
        return scoped_name

    def macro(self, macro_name):
        return macro_name


def _statements(text: str):
    return list(config_parser.ConfigParser(text, _Delegate()))


def _bound(text: str) -> dict[str, object]:
    """`selector.param` -> value of a gin text's own bindings (its includes not followed)."""
    return {
        f"{s.selector}.{s.arg_name}": s.value
        for s in _statements(text)
        if isinstance(s, config_parser.BindingStatement)
    }


def _included(text: str) -> list[str]:
    return [s.filename for s in _statements(text) if isinstance(s, config_parser.IncludeStatement)]


def _size(name: str) -> dict[str, object]:
    return _bound((GIN / "sizes" / name).read_text())


def test_each_tiny_family_has_its_size_file():
    assert TINY == [
        "data_to_text_tiny.gin",
        "paligemma_tiny.gin",
        "pix2struct_tiny.gin",
        "relation_network_tiny.gin",
        "t5_1_1_tiny.gin",
    ]
    assert _size("t5_1_1_tiny.gin")["T5Config.num_encoder_layers"] == 1


def test_smoke_runs_take_every_tiny_size_and_restate_none():
    text = (GIN / "runs" / "smoke.gin").read_text()
    assert {f"sizes/{n}" for n in TINY} <= set(_included(text))
    restated = set(_bound(text)) & {k for n in TINY for k in _size(n)}
    assert not restated, restated


def test_the_tests_recipe_runs_take_the_size_and_restate_none_of_it():
    for bindings, size in (
        (tiny_recipes.P2S_TINY, "pix2struct_tiny.gin"),
        (tiny_recipes.T5_TINY, "t5_1_1_tiny.gin"),
    ):
        text = "\n".join(bindings)
        assert _included(text) == [f"sizes/{size}"]
        assert not set(_bound(text)) & set(_size(size))
        family = next(iter(_size(size))).split(".")[0]
        layers = {k.split(".")[1]: v for k, v in _size(size).items() if "layers" in k}
        assert layers == {
            k: v for k, v in tiny_recipes.TINY_LAYERS.items() if k.endswith("layers")
        }, family
