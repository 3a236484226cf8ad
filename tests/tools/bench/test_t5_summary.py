"""bench/t5_summary.py's inputs: the chart_to_text task's own TAB-T5 records of the generated
tables, the in-memory record source, and the constant baseline chosen on training data."""

from __future__ import annotations

import itertools
import json

from chartjax.synth import table_summaries as ts
from chartjax.tools.bench import t5_summary as bench


def test_records_are_the_tasks_tab_t5_prompts():
    train, heldout = bench.corpus(4, 3, seed=0)
    assert train == ts.generate(4, 1) and heldout == ts.generate(3, 2)
    recs = bench.task_records(train)
    for ex, r in zip(train, recs):
        records = ts.statista_example(ex)["table.records"]
        assert r["prompt"] == f"translate Chart to Text: {ex['title']} <s> {records}"
        assert r["target"] == ex["summary"] and r["id"] == ex["id"]
        assert r["meta"]["cs_data"] == records and r["meta"]["complexity"] == "simple"


def test_record_source_streams_and_resumes():
    recs = bench.task_records(ts.generate(6, 3))
    src = bench.RecordSource(recs, recs[:2])

    def ids(start_step):
        ds = src.train_examples(
            seed=0, start_step=start_step, local_batch_size=2, process_index=0, process_count=1
        )
        return [x["id"] for x in itertools.islice(ds, 8)]

    full = ids(0)
    assert sorted(full[:6]) == sorted(r["id"] for r in recs)  # one epoch = each record once
    assert ids(1) == (full + ids(4))[2:10]  # resuming at step 1 skips one batch of 2
    held = list(src.eval_examples("validation", process_index=0, process_count=1))
    assert [json.loads(x["meta"])["title"] for x in held] == [r["meta"]["title"] for r in recs[:2]]


def test_constant_baseline_uses_training_summaries_only():
    recs = [{"target": f"t{i} a b c d"} for i in range(600)]
    recs[7]["target"] = "a b c d"  # the shared 4-gram alone: higher precision everywhere
    best, score = bench.constant_baseline(recs)
    assert best == "a b c d" and 0.0 < score < 1.0
    recs[150]["target"] = "zz"  # a reference, not a candidate: never chosen
    assert bench.constant_baseline(recs)[0] == "a b c d"
