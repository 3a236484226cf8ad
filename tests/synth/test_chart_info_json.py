"""The CHART-Info JSON writer is `json.dumps(indent=4, sort_keys=True)`, character for character."""

from __future__ import annotations

import json
from enum import IntEnum

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from chartjax.synth import chart_info as ci
from chartjax.synth.chart_info_json import dumps


def _reference(doc) -> str:
    return json.dumps(doc, indent=4, sort_keys=True)


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)  # any code point: escapes and non-ASCII
)
_trees = st.recursive(
    _scalars,
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.tuples(kids, kids)
        | st.dictionaries(st.text(max_size=6), kids, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_trees)
@example([float("nan"), float("inf"), -float("inf"), -0.0, 1e-300, 2**70, True, None])
@example({'é\n"\x00': ["\ud83d\ude00", "", {}, [], ()], "": {"b": 1, "a": [[]]}})
@pytest.mark.slow
def test_matches_json_dumps_on_any_json_tree(doc):
    assert dumps(doc) == _reference(doc)


def test_matches_json_dumps_on_generated_charts():
    for index in (0, 1, 2, 3):  # several chart types, with and without tasks 2-6
        doc = ci.make_chart(5, index).doc
        assert dumps(doc) == _reference(doc)


def test_other_types_and_keys_are_left_to_json():
    class Level(IntEnum):
        LOW = 1

    doc = {"b": [np.float64(0.1), Level.LOW], "a": {2: "int key", 1: None}}
    assert dumps(doc) == _reference(doc)
    assert '"1": null' in dumps(doc)
