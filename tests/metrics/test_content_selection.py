"""Chart-to-Text content selection: metrics reference §2.2 hand cases."""

import pytest

from chartjax.data.table_records import records_from_table
from chartjax.metrics.content_selection import (
    content_selection,
    content_selection_score,
    cs_records,
)

DATA = "Year|2020|x|line_chart Sales|45|y|line_chart"
TITLE = "Sales 2015-2020\n"
GOLD = "Sales rose to 45 % in 2020 ."


def test_records_from_table_two_columns():
    assert records_from_table(["Year", "Sales"], [["2020", "45"]]) == DATA
    out = records_from_table(
        ["Country", "Share in %*"], [["United States", "1,234"], ["Rest of world", "-"], ["EU", ""]]
    )
    assert out == (
        "Country|United_States|x|bar_chart Share_in_|1234|y|bar_chart "
        "Country|Rest_of_world|x|bar_chart Share_in_|0|y|bar_chart "
        "Country|EU|x|bar_chart Share_in_|0|y|bar_chart"
    )


def test_records_from_table_multi_column_and_unnamed():
    out = records_from_table(["year", "White", ""], [["2019", "250.52", "5%"]])
    assert out == ("year|2019|0|line_chart White|250.52|1|line_chart Unnamed:_2|5|2|line_chart")
    with pytest.raises(ValueError, match="row 0 has 3 cells for 2 headers"):
        records_from_table(["a", "b"], [["1", "2", "3"]])


def test_cs_reference_cases():
    assert cs_records(GOLD, DATA, TITLE) == ["sales", "45", "2020"]
    assert content_selection("In 2020 , sales were 45 percent .", GOLD, DATA, TITLE) == 1.0
    assert content_selection("In 2020, sales were 45 percent.", GOLD, DATA, TITLE) == pytest.approx(
        2 / 3
    )
    # Substring quirk: "20" is a record because "2020" is in the data.
    assert cs_records("About 20 % of sales", DATA, TITLE) == ["20", "sales"]
    # Each record matches once; no records -> 0.
    assert content_selection("sales sales", GOLD, DATA, TITLE) == pytest.approx(1 / 3)
    assert content_selection("anything", "the of", DATA, TITLE) == 0.0


def test_cs_corpus_mean():
    score = content_selection_score(
        ["In 2020 , sales were 45 percent .", "In 2020, sales were 45 percent."],
        [GOLD, GOLD],
        [DATA, DATA],
        [TITLE, TITLE],
    )
    assert score == pytest.approx((1 + 2 / 3) / 2)
    with pytest.raises(ValueError, match="differ in length"):
        content_selection_score(["a"], [], [], [])
