"""The old names of modules that moved, kept importable as the modules they became.

chartjax/tasks/ and chartjax/models/ are grouped in rooms, one folder per benchmark and per
model family (docs/design.md §2). Gin files, the `config.gin` an earlier run saved (`import
chartjax.tasks.chartqa_task`) and pickles name modules by their old paths, so each old name in
`MOVED` stays importable: `import chartjax.tasks.chartqa_task` and `from
chartjax.tasks.chartqa_task import make_task` give the module `chartjax.tasks.chartqa.task`
itself (the same object, registered in `sys.modules` under both names; nothing is copied), and
`python -m chartjax.tasks.chart_info_text` runs `chartjax.tasks.chart_info.text`.

A room whose front module kept its name became that module's package (`chartjax.tasks.chartcheck`
is `tasks/chartcheck/__init__.py`), so only the modules that changed name are listed. The gin
names of the configurables in moved modules are unchanged too: those modules register them under
their old module (`@gin.configurable("chartqa_task", module="chartjax.tasks.chartqa_task")`), so
a saved config.gin that qualifies a name by module still binds it.

`install()` (run by `chartjax/tasks/__init__.py` and `chartjax/models/__init__.py`, so before any
module below them is looked up) puts one finder at the front of `sys.meta_path`. It imports
nothing until an old name is asked for. New code uses the new names (tests/test_module_aliases.py
checks that none of chartjax, tools, tests, gin_configs or tfds_builders uses an old one).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

# old module name -> the module it is now
MOVED = {
    # tasks: the shared machinery, the smoke tasks, and each benchmark's companions
    "chartjax.tasks.task": "chartjax.tasks.core.task",
    "chartjax.tasks.seq2seq": "chartjax.tasks.core.seq2seq",
    "chartjax.tasks.classification": "chartjax.tasks.core.classification",
    "chartjax.tasks.text_classification": "chartjax.tasks.core.text_classification",
    "chartjax.tasks.report_views": "chartjax.tasks.core.report_views",
    "chartjax.tasks.free_form": "chartjax.tasks.core.free_form",
    "chartjax.tasks.prefix_lm": "chartjax.tasks.core.prefix_lm",
    "chartjax.tasks.synthetic": "chartjax.tasks.smoke.synthetic",
    "chartjax.tasks.seq2seq_synthetic": "chartjax.tasks.smoke.seq2seq_synthetic",
    "chartjax.tasks.chartcheck_classifier": "chartjax.tasks.chartcheck.classifier",
    "chartjax.tasks.chartcheck_test_sets": "chartjax.tasks.chartcheck.test_sets",
    "chartjax.tasks.chart_to_text_caption": "chartjax.tasks.chart_to_text.caption",
    "chartjax.tasks.chart_to_text_records": "chartjax.tasks.chart_to_text.records",
    "chartjax.tasks.ocr_boxes": "chartjax.tasks.chart_to_text.ocr_boxes",
    "chartjax.tasks.chart_info_lines": "chartjax.tasks.chart_info.lines",
    "chartjax.tasks.chart_info_tables": "chartjax.tasks.chart_info.tables",
    "chartjax.tasks.chart_info_text": "chartjax.tasks.chart_info.text",
    "chartjax.tasks.chartqa_task": "chartjax.tasks.chartqa.task",
    "chartjax.tasks.chartqa_references": "chartjax.tasks.chartqa.references",
    "chartjax.tasks.plotqa_references": "chartjax.tasks.plotqa.references",
    "chartjax.tasks.plotqa_task": "chartjax.tasks.plotqa.task",
    "chartjax.tasks.chartqapro_references": "chartjax.tasks.chartqapro.references",
    "chartjax.tasks.chart_code": "chartjax.tasks.matcha.chart_code",
    # models: one folder per family
    "chartjax.models.pix2struct": "chartjax.models.t5.pix2struct",
    "chartjax.models.bert_blocks": "chartjax.models.post_ln.blocks",
    "chartjax.models.bart": "chartjax.models.post_ln.bart",
    "chartjax.models.deberta": "chartjax.models.post_ln.deberta",
    "chartjax.models.tapas": "chartjax.models.post_ln.tapas",
    "chartjax.models.siglip": "chartjax.models.paligemma.siglip",
    "chartjax.models.gemma": "chartjax.models.paligemma.gemma",
    "chartjax.models.paligemma_decoding": "chartjax.models.paligemma.decoding",
    "chartjax.models.vgg16": "chartjax.models.relation_network.vgg16",
    "chartjax.models.resnet": "chartjax.models.captioning.resnet",
    "chartjax.models.barlow_twins": "chartjax.models.captioning.barlow_twins",
    "chartjax.models.show_attend_tell": "chartjax.models.captioning.show_attend_tell",
    "chartjax.models.chart2text": "chartjax.models.data_to_text.chart2text",
    "chartjax.models.field_infuse": "chartjax.models.data_to_text.field_infuse",
    "chartjax.models.record_seq2seq": "chartjax.models.data_to_text.record_seq2seq",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old name and loads it as the module it moved to."""

    def __init__(self):
        self._specs = {}  # old name -> the new module's own spec, while the import runs

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        # origin: the new module's file (`python -m <old name>` names it in sys.argv[0])
        origin = importlib.util.find_spec(MOVED[fullname]).origin
        return importlib.util.spec_from_loader(fullname, self, origin=origin)

    def create_module(self, spec):
        module = importlib.import_module(MOVED[spec.name])
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module):
        # The import system has just given the module the old name's spec; it keeps its own
        # (importlib.reload, pickle and tracebacks read __spec__ and __name__: the new name).
        module.__spec__ = self._specs.pop(module.__spec__.name)

    def get_code(self, fullname):
        """`python -m <old name>` (runpy) runs the new module's code as __main__."""
        new = MOVED[fullname]
        return importlib.util.find_spec(new).loader.get_code(new)


_FINDER = _Alias()


def install() -> None:
    """Make every old name importable (idempotent)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
