"""The benchmarks, one room (folder) each, and the machinery they share.

    catalog.py      every benchmark by name (`train.task`, `chartjax-infer --task`,
                    `chartjax-score --task`): the one place that lists the rooms
    core/           the contract (task.py: Task, InferenceSpec, FileScorer) and the halves the
                    benchmarks share: seq2seq.py (Pix2Struct / T5 text generation),
                    classification.py (yes/no), text_classification.py (DeBERTa, TAPAS),
                    report_views.py, free_form.py (inference-only caption and text)
    smoke/          synthetic tasks that need no corpus (train-loop tests, smoke runs)
    chartcheck/     ChartCheck: the seq2seq rows (__init__), classifier.py (DeBERTa, TAPAS),
                    test_sets.py (which test set 2 a score is on)
    chart_to_text/  Chart-to-Text: the T5 / BART / Pix2Struct rows (__init__), caption.py (image
                    captioning), records.py (Chart2text, Field-Infuse), ocr_boxes.py
    chart_info/     CHART-Info: the seq2seq tasks (__init__), text.py (tasks 2, 4, 5, 6a as
                    lines), lines.py (their grammar), tables.py (annotations -> tables)
    figureqa/       FigureQA
    chartqa/        ChartQA: prompts and scorer (__init__), task.py (fine-tuning), references.py
    plotqa/         PlotQA: scorer (__init__), references.py
    chartqapro/     ChartQAPro: prompt and scorer (__init__), references.py
    deplot/         DePlot: chart -> table
    matcha/         MatCha-style pretraining: the mixture (__init__), chart_code.py

A room's front module keeps the benchmark's name (`chartjax.tasks.chartcheck` is
chartcheck/__init__.py). Modules that moved into a room keep their old names as aliases
(chartjax/module_aliases.py), installed here.
"""

from chartjax import module_aliases

module_aliases.install()
