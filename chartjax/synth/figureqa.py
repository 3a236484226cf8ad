"""Generate a FigureQA-style corpus in the official release layout (Kahou et al., 2017).

Layout written under `out_dir` (docs/corpora.md §4.2-4.5):

    train1/            png/<i>.png  qa_pairs.json  annotations.json   (colour scheme 1)
    validation1/       same, scheme 1             validation2/  same, scheme 2 (alternated)
    no_annot_test1/    png/  qa_pairs.json without "answer", no annotations.json (scheme 1)
    no_annot_test2/    same, scheme 2
    testset_with_answers/no_annot_test{1,2}/  qa_pairs.json (with answers)  annotations.json

Determinism: image i of split s draws everything from numpy's SeedSequence([seed, split id, i]),
figure types are a seeded balanced permutation per split, and yes/no balancing runs after all
images of a split, in image order, with the split's own generator. So PNG and JSON bytes depend
only on the seed, never on the number of worker processes. The splits are written into
`<out_dir>.incomplete-*` beside `out_dir` and moved into it when all are complete.

`Options` (`--figure-types`, `--max-elements`, `--templates`, `--colors-per-set`) narrow the
corpus for quick learning checks (one figure type, 2-3 elements, a template or two, a handful of
colours); they depart from the release, and without them the output is unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from chartjax.synth.figureqa_data import (
    CATEGORICAL_TYPES,
    FIGURE_TYPES,
    color_set,
    element_range,
    palette_subset,
    sample_source_data,
    scheme_set,
)
from chartjax.synth.figureqa_questions import (
    NUM_TEMPLATES,
    balance,
    candidate_questions,
    qa_pair,
    to_color_ids,
)

# Stable ids that enter the seeds; never renumber (changes every generated corpus).
SPLIT_IDS = {
    "train1": 1,
    "validation1": 2,
    "validation2": 3,
    "no_annot_test1": 4,
    "no_annot_test2": 5,
}
ANSWERS_DIR = "testset_with_answers"  # the official internal name for the test answer keys
NUM_COLORS = 100
CATEGORICAL_TEMPLATES = frozenset(range(6))  # Table 2: 0-5 bar and pie, 6-14 line and dot-line


@dataclasses.dataclass(frozen=True)
class Options:
    """Departures from the release for quick learning checks; the defaults are the release.

    figure_types: the types drawn (balanced among themselves); max_elements: caps bars, slices
    and curves per figure (>= 2); templates: the question ids kept (others are dropped before
    yes/no balancing); colors_per_set: each colour set shrinks to this many colours, spread over
    the hue circle (figureqa_data.palette_subset).
    """

    figure_types: tuple[str, ...] = FIGURE_TYPES
    max_elements: int | None = None
    templates: tuple[int, ...] | None = None
    colors_per_set: int | None = None

    def check(self) -> None:
        """Raises ValueError, naming the option, for a corpus these options cannot make."""
        if not self.figure_types or any(t not in FIGURE_TYPES for t in self.figure_types):
            raise ValueError(f"figure_types must be among {FIGURE_TYPES}, got {self.figure_types}")
        if self.max_elements is not None and self.max_elements < 2:
            raise ValueError(f"max_elements must be >= 2, got {self.max_elements}")
        if self.templates is not None:
            if not self.templates or any(not 0 <= q < NUM_TEMPLATES for q in self.templates):
                raise ValueError(
                    f"templates must be ids in [0, {NUM_TEMPLATES}), got {self.templates}"
                )
            for t in self.figure_types:
                applicable = (
                    CATEGORICAL_TEMPLATES
                    if t in CATEGORICAL_TYPES
                    else (set(range(NUM_TEMPLATES)) - CATEGORICAL_TEMPLATES)
                )
                if not applicable & set(self.templates):
                    raise ValueError(f"none of templates {self.templates} applies to {t}")
        if self.colors_per_set is not None:
            most = max(
                min(element_range(t)[1] - 1, self.max_elements or NUM_COLORS)
                for t in self.figure_types
            )
            if not most <= self.colors_per_set <= NUM_COLORS // 2:
                raise ValueError(
                    f"colors_per_set must be in [{most}, {NUM_COLORS // 2}] (the most elements "
                    f"a figure can have), got {self.colors_per_set}"
                )


@dataclasses.dataclass(frozen=True)
class SplitSpec:
    name: str
    num_images: int
    scheme: int  # 1 = training colours, 2 = alternated
    public_answers: bool  # False for the no_annot test splits

    @property
    def split_id(self) -> int:
        return SPLIT_IDS[self.name]


def split_specs(train_images: int, val_images: int, test_images: int) -> list[SplitSpec]:
    """The release's splits for the requested sizes; splits with 0 images are left out."""
    specs = [
        SplitSpec("train1", train_images, 1, True),
        SplitSpec("validation1", val_images, 1, True),
        SplitSpec("validation2", val_images, 2, True),
        SplitSpec("no_annot_test1", test_images, 1, False),
        SplitSpec("no_annot_test2", test_images, 2, False),
    ]
    for s in specs:
        if s.num_images < 0:
            raise ValueError(f"{s.name}: number of images must be >= 0, got {s.num_images}")
    return [s for s in specs if s.num_images > 0]


def figure_types(seed: int, spec: SplitSpec, types: tuple[str, ...] = FIGURE_TYPES) -> list[str]:
    """Balanced figure types (counts differ by at most one) in a seeded order."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, spec.split_id]).spawn(2)[0])
    base = np.arange(spec.num_images) % len(types)
    return [types[i] for i in rng.permutation(base)]


@dataclasses.dataclass(frozen=True)
class ImageJob:
    seed: int
    split: str
    scheme: int
    index: int
    figure_type: str
    png_path: str
    options: Options = Options()


def make_image(job: ImageJob) -> tuple[str, list[tuple[int, int, int, int]]]:
    """Sample, question and render one figure; writes its PNG. Returns (annotation JSON text,
    candidate questions as (question_id, color1_id, color2_id, answer))."""
    from chartjax.synth.figureqa_render import render  # matplotlib only where rendering
    from chartjax.synth.figureqa_style import sample_style

    rng = np.random.default_rng(np.random.SeedSequence([job.seed, SPLIT_IDS[job.split], job.index]))
    opts = job.options
    palette = palette_subset(
        color_set(scheme_set(job.figure_type, job.scheme)), opts.colors_per_set
    )
    data = sample_source_data(rng, job.figure_type, palette, opts.max_elements)
    style = sample_style(rng, data)
    candidates = to_color_ids(candidate_questions(rng, data), data)
    if opts.templates is not None:  # after every draw: the kept questions are the release's
        candidates = [c for c in candidates if c[0] in opts.templates]
    png, models, info = render(data, style)
    with open(job.png_path, "wb") as f:
        f.write(png)
    annotation = {
        "type": job.figure_type,
        "image_index": job.index,
        "models": models,
        "general_figure_info": info,
    }
    return json.dumps(annotation), candidates


def _split_folders(spec: SplitSpec) -> list[str]:
    """The folders a split owns, relative to the output root."""
    return [spec.name] + ([] if spec.public_answers else [f"{ANSWERS_DIR}/{spec.name}"])


def _check_free(out: Path, specs: list[SplitSpec], overwrite: bool) -> None:
    """Refuses, before anything is drawn, to replace a split folder that holds files."""
    if overwrite:
        return
    for spec in specs:
        for rel in _split_folders(spec):
            path = out / rel
            if path.exists() and any(path.iterdir()):
                raise FileExistsError(
                    f"{path} exists and is not empty (pass overwrite=True / --overwrite)"
                )


def _move_into_place(tmp: Path, out: Path, specs: list[SplitSpec]) -> None:
    """Moves the finished split folders from `tmp` into `out`, replacing the same splits there."""
    if not out.exists():
        os.rename(tmp, out)
        return
    for spec in specs:
        for rel in _split_folders(spec):
            target = out / rel
            if target.exists():
                shutil.rmtree(target)  # checked free or overwrite=True: only now, all is done
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(tmp / rel, target)


def _write_qa_pairs(path: Path, records: np.ndarray, with_answers: bool) -> None:
    """Stream qa_pairs.json: {"qa_pairs": [...], "total_distinct_questions", "total_distinct_colors"}."""
    with open(path, "w") as f:
        f.write('{"qa_pairs": [')
        for k, (image_index, qid, c1, c2, answer) in enumerate(records.tolist()):
            if k:
                f.write(", ")
            f.write(json.dumps(qa_pair(image_index, qid, c1, c2, answer, with_answers)))
        f.write(f'], "total_distinct_questions": {NUM_TEMPLATES}, ')
        f.write(f'"total_distinct_colors": {NUM_COLORS}}}')


def _results(jobs: list[ImageJob], workers: int) -> Iterator[tuple[str, list]]:
    if workers <= 1:
        yield from map(make_image, jobs)
        return
    # forkserver: workers do not inherit the parent's threads (jax/tf may be loaded there).
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["chartjax.synth.figureqa_render"])
    with ctx.Pool(workers) as pool:
        yield from pool.imap(make_image, jobs, chunksize=4)


def generate_split(
    out_dir: Path,
    spec: SplitSpec,
    seed: int,
    workers: int,
    log=None,
    options: Options = Options(),
) -> dict:
    """Writes one split under `out_dir`, whose folders for it must not exist yet."""
    split_dir = out_dir / spec.name
    (split_dir / "png").mkdir(parents=True)
    answers_dir = out_dir / ANSWERS_DIR / spec.name
    if not spec.public_answers:
        answers_dir.mkdir(parents=True)
    annotations_path = (split_dir if spec.public_answers else answers_dir) / "annotations.json"

    types = figure_types(seed, spec, options.figure_types)
    jobs = [
        ImageJob(
            seed, spec.name, spec.scheme, i, types[i], str(split_dir / "png" / f"{i}.png"), options
        )
        for i in range(spec.num_images)
    ]
    rows: list[tuple[int, int, int, int, int]] = []
    start = time.perf_counter()
    with open(annotations_path, "w") as ann:
        ann.write("[")
        for i, (annotation, candidates) in enumerate(_results(jobs, workers)):
            ann.write(", " if i else "")
            ann.write(annotation)
            rows.extend((i, *c) for c in candidates)
            if log and (i + 1) % 1000 == 0:
                rate = (i + 1) / (time.perf_counter() - start)
                log(f"{spec.name}: {i + 1}/{spec.num_images} figures ({rate:.1f}/s)")
        ann.write("]")
    records = np.asarray(rows, dtype=np.int64).reshape(-1, 5)
    balance_rng = np.random.default_rng(np.random.SeedSequence([seed, spec.split_id]).spawn(2)[1])
    records = records[balance(records[:, 1], records[:, 4], balance_rng)]

    _write_qa_pairs(split_dir / "qa_pairs.json", records, with_answers=spec.public_answers)
    if not spec.public_answers:
        _write_qa_pairs(answers_dir / "qa_pairs.json", records, with_answers=True)
    elapsed = time.perf_counter() - start
    return {
        "split": spec.name,
        "images": spec.num_images,
        "questions": int(len(records)),
        "seconds": round(elapsed, 2),
        "figures_per_s": round(spec.num_images / elapsed, 2),
    }


def generate(
    out_dir: str | os.PathLike,
    train_images: int = 0,
    val_images: int = 0,
    test_images: int = 0,
    seed: int = 0,
    workers: int = 1,
    overwrite: bool = False,
    log=None,
    options: Options = Options(),
) -> list[dict]:
    """Write the requested splits under `out_dir`; returns one summary dict per split.

    The splits are written into a temporary sibling of `out_dir` and moved into it once all are
    done: a run that fails or is killed leaves no partial split for a builder to read as whole.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    options.check()  # before any folder or worker
    specs = split_specs(train_images, val_images, test_images)
    if not specs:
        raise ValueError("no images requested (train, validation and test sizes are all 0)")
    out = Path(out_dir).absolute()
    _check_free(out, specs, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Beside `out` (same file system, so the move is a rename); mkdir leaves its permissions to
    # the umask, as for `out` itself.
    tmp = out.with_name(f"{out.name}.incomplete-{os.getpid()}-{secrets.token_hex(4)}")
    tmp.mkdir()
    try:
        summaries = []
        for spec in specs:
            summary = generate_split(tmp, spec, seed, workers, log, options)
            if log:
                log(json.dumps(summary))
            summaries.append(summary)
        _move_into_place(tmp, out, specs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summaries
