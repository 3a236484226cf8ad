"""How report.html shows each task's rows (`html_report.RowView`): each `Task` carries its view
(`Task.report_view`, set by the task's factory); `for_task` finds one by name for
`chartjax-score`, which scores files without a `Task`.

* figureqa: answers 0/1 as "no"/"yes" (what the question asks), the template id (`question_id`,
  which also names the `question_template` breakdown's groups) as its text, and the figure of a
  question `<image_index>/<question_index>` as `<image_index>.png` of an image folder (the
  release's `png/`, or the figures chartjax-eval writes beside the report).
* deplot and chart_info_task6b: a prediction with no table cell has RMS precision 1 (DePlot's definition: no
  predicted datapoint, none wrong); the report marks it and the headline precision it inflates.
  Each row's chart is the example's own image (`report_figures.figure_stem` of its id, written
  from the split's records by chartjax/report_figures.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chartjax.metrics import figureqa as figureqa_metrics
from chartjax.metrics import tables as table_metrics
from chartjax.metrics.html_report import RowView
from chartjax.report_figures import figure_stem
from chartjax.synth.figureqa_questions import TEMPLATES


def _yes_no(value: Any) -> str:
    answer = figureqa_metrics.parse_answer(value)
    return str(value) if answer is None else ("no", "yes")[answer]


def _template(question_id: Any) -> str | None:
    try:
        i = int(question_id)
    except (TypeError, ValueError):
        return None
    if not 0 <= i < len(TEMPLATES):
        return None
    return TEMPLATES[i].format(c1="X", c2="Y")


def _figureqa_details(row: Mapping[str, Any]) -> str | None:
    text = _template(row.get("question_id"))
    return None if text is None else f"template {int(row['question_id'])}: {text}"


def _figureqa_group(breakdown: str, group: str) -> str:
    text = _template(group) if breakdown == "question_template" else None
    return group if text is None else f"{group}: {text}"


def _figure_index(row: Mapping[str, Any]) -> str | None:
    key = str(row.get("id", ""))
    return key.split("/", 1)[0] if "/" in key else None


def _empty_table(row: Mapping[str, Any]) -> str | None:
    prediction = row.get("prediction")
    if row.get("missing") or not isinstance(prediction, str):
        return None  # a missing prediction scores 0, not vacuously 1
    for transposed in (False, True):
        if table_metrics.table_datapoints(*table_metrics.parse_table(prediction, transposed)):
            return None
    return "no table cell predicted: RMS precision over zero predicted cells counts as 1"


FIGUREQA = RowView(
    answer=_yes_no,
    details=_figureqa_details,
    group_label=_figureqa_group,
    image_stem=_figure_index,
    hidden=("question_id", "prediction_text"),
)


def _own_chart(row: Mapping[str, Any]) -> str | None:
    return figure_stem(row["id"]) if "id" in row else None


DEPLOT = RowView(image_stem=_own_chart, vacuous=_empty_table, vacuous_metrics=("rms_precision",))
# CHART-Info task 6b is scored with DePlot's table metrics too (chartjax/tasks/chart_info).
VIEWS = {"figureqa": FIGUREQA, "deplot": DEPLOT, "chart_info_task6b": DEPLOT}


def for_task(name: str) -> RowView | None:
    """The view of a task (chartjax-eval's or chartjax-score's name); None: rows as they are."""
    return VIEWS.get(name)
