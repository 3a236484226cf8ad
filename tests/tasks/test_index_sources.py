"""Index-based input (chartjax/data/sources.py): the training stream is a pure function of
(seed, position), so a resumed stream equals the tail of an uninterrupted one; each process reads
its own records, and FigureQA's processes split the figures (and so their image caches)."""

from chartjax.data import pipeline, sources
from chartjax.tasks import figureqa
from tests.tasks.hide_tf import HIDE_TF


def test_a_stream_started_anywhere_is_the_tail_of_the_whole_stream():
    whole = sources.stream_positions(7, seed=3, start=0)
    first = [next(whole) for _ in range(40)]
    assert sorted(first[:7]) == list(range(7)) and sorted(first[7:14]) == list(range(7))
    assert first[:7] != first[7:14]  # a new permutation each epoch
    for start in (0, 3, 7, 20, 33):
        resumed = sources.stream_positions(7, seed=3, start=start)
        assert [next(resumed) for _ in range(40 - start)] == first[start:]


def test_process_shares_cover_every_record_once():
    for n, p in ((10, 3), (2, 4), (100, 8)):
        shares = [sources.process_records(n, i, p) for i in range(p)]
        assert [r for s in shares for r in s] == list(range(n))
        assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_figureqa_processes_split_the_figures_and_resume_exactly(tfds_dir):
    data_dir = tfds_dir("figureqa")
    task = figureqa.make_task(data_dir=data_dir, image_size=16)
    one = task.source.examples("train1", 0, 1)
    parts = [task.source.examples("train1", i, 2) for i in range(2)]
    ids = [[q["id"] for q in part] for part in parts]
    assert sorted(ids[0] + ids[1]) == sorted(q["id"] for q in one)
    figures = [{i.split(b"/")[0] for i in part} for part in ids]
    assert figures[0].isdisjoint(figures[1])  # a figure and its questions in one share
    # Each process cached its own figures only: 2 of the fixture's figures, one each.
    assert [len(block) for block in task.source._blocks[1:]] == [1, 1]

    def labels(start):
        batches = pipeline.train_batches(task, 2, 5, start, 0, 1)
        return [next(batches)["question_tokens"].tolist() for _ in range(6 - start)]

    whole = labels(0)
    assert labels(4) == whole[4:]  # started at step 4: the batches an uninterrupted run sees
    assert labels(0) == whole


_WITHOUT_TF = (
    HIDE_TF
    + """
from chartjax.data import sources, tfds_records
ids = [e["id"].decode() for e in tfds_records.split_examples(sys.argv[1], "train1")]
print(sorted(ids), "tensorflow" in sys.modules)
"""
)


def test_builds_are_read_by_random_access_without_tensorflow(tfds_dir):
    import subprocess
    import sys

    builder_dir = sources.tfds_builder_dir("figureqa", tfds_dir("figureqa"))
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TF, builder_dir],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[-2] == "['0/0', '0/1', '0/2', '1/3', '1/4'] False"
