"""FigureQA scoring (metrics reference §4)."""

from chartjax.metrics import figureqa as FQ


def test_figureqa_scores_and_withheld_answers():
    out = FQ.figureqa_scores(
        ["yes", 0, "1", "maybe"],
        [1, 0, 0, 1],
        figure_types=["pie"] * 4,
        question_ids=[0, 0, 14, 14],
    )
    assert out.metrics["accuracy"] == 0.5 and out.metrics["num_unparseable"] == 1
    assert out.breakdowns["question_template"]["14"]["accuracy"] == 0.0
    withheld = FQ.figureqa_scores([1, 0], [-1, -1])
    assert withheld.metrics == {} and "no released answers" in withheld.unavailable["accuracy"]
