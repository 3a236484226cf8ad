"""MatCha-style pretraining (Liu et al. 2023) as one task: a mixture of image -> text objectives
sampled by rate (chartjax/data/mixture.py), trained as every Pix2Struct task is (core/seq2seq.py:
prompt rendered as a header, patches, SentencePiece targets). docs/pretraining.md has the
objectives, the paper's mixture [unverified] and the recipes.

Components (`matcha_task.weights`; a weight of 0 leaves one out):
* `text_snippets`: the toy screenshot parsing's first step: 1-3 of a table's numbers (and maybe a row label) drawn
  large, one a line -> those lines (chartjax/synth/table_pages.py `make_snippet`). No prompt.
* `table_pages`: the toy screenshot parsing: a table drawn as plain text -> the table
  (chartjax/synth/table_pages.py). No prompt.
The generated components never repeat (record g of the stream is a function of (seed, g)).
* `math`: generated numerical-reasoning questions, with their small table, drawn as a page ->
  the answer (chartjax/synth/math_questions.py). No prompt; the question is in the image,
  as MatCha rendered MATH and DROP.
* `chart_table`: chart derendering to a table, DePlot's target and prompt, over the built
  CHART-Info dataset (chart_info/<config>: the 2019 release or `chartjax-synth chart_info`).
* `chart_code`: chart derendering to code: the same charts, the code of their table
  (chartjax/tasks/matcha/chart_code.py) behind its own prompt, so one chart is never asked for two
  targets by the same input.
Evaluation splits are the components' names (held-out generated examples, or
`chart_eval_split` of the built charts); each is scored as its objective is read: RMS/RNSS of
the table (`chart_code`: of the table its code draws), relaxed accuracy of the answer, ANLS
of the snippets; and exact match.

The MatCha room (tasks/matcha/): the mixture here; chart_code.py (the chart -> code
objective).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence

import gin

from chartjax.data import mixture, sources, tables
from chartjax.metrics.scores import Scores
from chartjax.tasks.chart_info.tables import CHART_INFO_KEYS, chart_info_record, table_scores
from chartjax.tasks.core import seq2seq
from chartjax.tasks.core.task import Task
from chartjax.tasks.matcha import chart_code

COMPONENTS = ("text_snippets", "table_pages", "math", "chart_table", "chart_code")
GENERATED = ("text_snippets", "table_pages", "math")


@dataclasses.dataclass(frozen=True)
class PageSettings:
    """What the generated pages look like. The sources give a page's id and target (cheap);
    `draw` makes its image in the loader's workers (the feature map), from the same draws."""

    size: tuple[int, int]
    types: tuple[str, ...]
    max_categories: int | None
    max_topics: int | None
    max_series: int | None

    def _table_text(self, name: str, seed: int, index: int, draw: bool):
        from chartjax.synth import table_pages

        make = table_pages.make_page if name == "table_pages" else table_pages.make_snippet
        table_options = (self.types, self.max_categories, self.max_topics, self.max_series)
        return make(seed, index, self.size, *table_options, draw=draw)

    def table_page(self, seed: int, index: int) -> dict:
        _, target, meta = self._table_text("table_pages", seed, index, False)
        return _page_record("table_pages", seed, index, target, meta)

    def snippet(self, seed: int, index: int) -> dict:
        _, target, meta = self._table_text("text_snippets", seed, index, False)
        return _page_record("text_snippets", seed, index, target, meta)

    def math_page(self, seed: int, index: int) -> dict:
        from chartjax.synth import math_questions

        q = math_questions.make_question(seed, index, max_topics=self.max_topics)
        meta = {"objective": "math", "kind": q.kind}
        return _page_record("math", seed, index, q.answer, meta)

    def draw(self, page: str) -> bytes:
        """The PNG of page `"<component> <seed> <index>"`."""
        import numpy as np

        from chartjax.synth import math_questions, text_render

        name, seed, index = page.split()
        seed, index = int(seed), int(index)
        if name != "math":
            rgba = self._table_text(name, seed, index, True)[0]
        else:
            q = math_questions.make_question(seed, index, max_topics=self.max_topics)
            rng = np.random.default_rng([seed, index, 1])
            rgba = text_render.draw_page(rng, q.lines(), self.size)
        return text_render.png(rgba)


def _page_record(name: str, seed: int, index: int, target: str, meta: dict) -> dict:
    return {
        "id": f"{name}/{index}",
        "prompt": "",
        "target": target,
        "meta": meta,
        "page": f"{name} {seed} {index}",
    }


def _featurize_pages(pages: PageSettings, inner, rec: dict) -> dict:
    """Draws a generated record's page, then the shared seq2seq feature map."""
    if "page" in rec:
        rec = {**rec, "image_bytes": pages.draw(rec["page"])}
    return inner(rec)


def _chart_source(data_dir: str, config: str, train_split: str, expand) -> sources.TfdsSource:
    return sources.TfdsSource(
        f"chart_info/{config}",
        data_dir,
        train_split=train_split,
        expand=lambda ex: [r for r in [expand(ex)] if r],
        field_keys=CHART_INFO_KEYS,
    )


def score(texts: list[str], records: list[dict], split: str):
    """Scores of one component's split (its name says which objective)."""
    from chartjax.metrics import chartqa

    targets = [r["target"] for r in records]
    exact = sum(t.strip() == p.strip() for t, p in zip(targets, texts)) / max(len(texts), 1)
    if split == "math":
        scores = chartqa.relaxed_accuracy(texts, targets, strip=True)
        scores.metrics["exact_match"] = exact
        return scores, None
    if split == "text_snippets":  # a few lines, not a table: how close each is, and exact
        from chartjax.metrics.tables import anls

        per = [anls(t.strip(), p.strip()) for t, p in zip(targets, texts)]
        metrics = {"anls": sum(per) / max(len(per), 1), "exact_match": exact}
        return Scores(metrics=metrics), [{"anls": a} for a in per]
    if split == "chart_code":
        drawn = [chart_code.code_table_text(t) for t in texts]
        table_records = [{**r, "target": r["meta"]["table"]} for r in records]
        scores, extra = table_scores(drawn, table_records)
    else:
        scores, extra = table_scores(texts, records)
    scores.metrics["exact_match"] = exact
    return scores, extra


@gin.configurable("matcha_task")
def make_task(
    weights: Mapping[str, float] = gin.REQUIRED,
    data_dir: str = "~/tensorflow_datasets",
    chart_config: str = "synthetic_2019",
    chart_train_split: str = "train[:95%]",
    chart_eval_split: str = "train[95%:]",
    page_size: tuple[int, int] = (640, 480),
    page_types: Sequence[str] = ("Grouped vertical bar", "Stacked vertical bar"),
    max_categories: int | None = None,
    max_topics: int | None = None,
    max_series: int | None = None,
    eval_examples: int = 200,
    eval_splits: Sequence[str] | None = None,
    features: seq2seq.Features | None = None,
    decoding: seq2seq.Decoding | None = None,
) -> Task:
    """The mixture task. `weights`: component -> rate (normalized; see module docstring).

    page_*, max_*: the generated pages (size in pixels, the chart generator's table options).
    eval_examples: held-out generated examples per generated component.
    eval_splits: the components evaluated (default: every one with a positive weight).
    """
    unknown = set(weights) - set(COMPONENTS)
    if unknown:
        raise ValueError(
            f"matcha_task.weights: unknown components {sorted(unknown)}; known: {COMPONENTS}"
        )
    features = features or seq2seq.Features()
    decoding = decoding or seq2seq.Decoding()
    pages = PageSettings(
        tuple(page_size), tuple(page_types), max_categories, max_topics, max_series
    )
    held_out = {"validation": (0, eval_examples)}
    components: dict[str, object] = {
        "text_snippets": mixture.GeneratedSource(pages.snippet, held_out),
        "table_pages": mixture.GeneratedSource(pages.table_page, held_out),
        "math": mixture.GeneratedSource(pages.math_page, held_out),
        "chart_table": _chart_source(
            data_dir,
            chart_config,
            chart_train_split,
            lambda ex: chart_info_record(ex, tables.DEPLOT_PROMPT),
        ),
        "chart_code": _chart_source(
            data_dir, chart_config, chart_train_split, chart_code.chart_code_record
        ),
    }
    used = {k: v for k, v in weights.items() if v > 0}
    splits = tuple(eval_splits or [c for c in COMPONENTS if c in used])
    source = mixture.MixtureSource(
        {k: components[k] for k in COMPONENTS if k in weights},
        dict(weights),
        eval_splits={s: (s, "validation" if s in GENERATED else chart_eval_split) for s in splits},
    )
    # seq2seq builds the featurizing, decoding and scoring every Pix2Struct task shares; its
    # TFDS source (never opened) is replaced by the mixture.
    task = seq2seq.make_task(
        name="matcha",
        dataset=f"chart_info/{chart_config}",
        data_dir=data_dir,
        train_split=chart_train_split,
        eval_splits=splits,
        field_keys=(),
        expand=lambda ex: [],
        score_fn=score,
        features=features,
        decoding=decoding,
    )
    return dataclasses.replace(
        task,
        source=source,
        features=lambda keep_host: functools.partial(
            _featurize_pages, pages, task.features(keep_host)
        ),
    )
