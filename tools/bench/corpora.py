"""The synthetic corpora the benchmarks build: generated in the official layouts (chartjax.synth)
and built by the project's own TFDS builders, as a user would."""

from __future__ import annotations

import json
import os


def figureqa(tmp: str, images: int, val_images: int = 0) -> str:
    """Generates `images` FigureQA-style train1 images (with their questions), and `val_images`
    for each validation split, under `tmp` and builds them; returns the TFDS data_dir."""
    import tensorflow_datasets as tfds

    from chartjax.synth import figureqa
    from tfds_builders.figureqa import figureqa as builder_mod

    raw = os.path.join(tmp, "raw")
    figureqa.generate(raw, train_images=images, val_images=val_images, seed=0, workers=2)
    data_dir = os.path.join(tmp, "tfds")
    builder = builder_mod.Builder(data_dir=data_dir)
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=raw))
    return data_dir


def chart_info(
    raw: str,
    data_dir: str,
    num: int,
    seed: int,
    types,
    workers: int,
    size: tuple[int, int],
    max_categories: int | None,
    max_topics: int | None,
    max_series: int | None = None,
    value_labels: float | None = None,
    text_grid: int | None = None,
) -> str:
    """Generates `num` CHART-Info charts into `raw` and builds them (synthetic_2019) into
    `data_dir`; reuses an earlier identical build (its `corpus.json` stamp). Returns the
    builder folder (`<data_dir>/chart_info/synthetic_2019/<version>`)."""
    import tensorflow_datasets as tfds

    from chartjax.synth import chart_info as synth
    from tfds_builders.chart_info import chart_info as builder_mod

    builder = builder_mod.Builder(data_dir=data_dir, config="synthetic_2019")
    stamp = os.path.join(data_dir, "corpus.json")
    want = {
        "num": num,
        "seed": seed,
        "types": list(types),
        "size": list(size),
        "max_categories": max_categories,
        "max_topics": max_topics,
    }
    # Stamped only when set, so corpora built before these options stay reusable.
    extra = {"max_series": max_series, "value_labels": value_labels, "text_grid": text_grid}
    want.update({k: v for k, v in extra.items() if v is not None})
    if os.path.exists(stamp):
        with open(stamp) as f:
            if json.load(f) == want:
                return builder.data_dir
    for d in (raw, data_dir):
        if os.path.exists(d) and os.listdir(d):
            raise FileExistsError(f"{d} holds another corpus: remove it or choose another --out")
    synth.generate(
        raw,
        num,
        seed=seed,
        workers=workers,
        types=types,
        size=tuple(size),
        max_categories=max_categories,
        max_topics=max_topics,
        max_series=max_series,
        value_labels=value_labels,
        text_grid=text_grid or 0,
    )
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=raw))
    with open(stamp, "w") as f:
        json.dump(want, f)
    return builder.data_dir


def figureqa_builder_dir() -> str:
    """tfds_builders/figureqa: in a checkout, or the installed package's own folder."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    builder = os.path.join(root, "tfds_builders", "figureqa")
    if not os.path.isdir(builder):  # an installed wheel
        import tfds_builders.figureqa as b

        builder = os.path.dirname(b.__file__)
    return builder


def figureqa_stamped(
    raw: str,
    data_dir: str,
    stamp_path: str,
    stamp: dict,
    generate: dict,
    *,
    stale=(),
    log=None,
    before_build=None,
) -> bool:
    """Generates a FigureQA corpus (chartjax.synth.figureqa.generate(raw, **generate), its
    `options` a dict of synth.Options fields) and builds it with the `tfds build` CLI, as a user
    would, unless `stamp_path` records `stamp`; returns True when the earlier build is reused.
    `stale`: paths derived from an earlier corpus, removed with it. `log(line)`: progress;
    `before_build()`: called between generation and build."""
    import json
    import shutil
    import subprocess
    import sys
    import time

    from chartjax.synth import figureqa as synth

    log = log or (lambda line: None)
    stamp = json.loads(json.dumps(stamp))  # tuples -> lists, as read back
    if os.path.exists(stamp_path):
        with open(stamp_path) as f:
            try:
                if json.load(f) == stamp:
                    return True
            except json.JSONDecodeError:
                pass
        os.remove(stamp_path)
    for path in (raw, data_dir, *stale):  # another corpus (or a partial one) is replaced
        shutil.rmtree(path, ignore_errors=True)
    kwargs = dict(generate)
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.pop("options").items()}
    t = time.time()
    synth.generate(raw, **kwargs, options=synth.Options(**options))
    log(f"generated in {time.time() - t:.0f} s -> {raw}")
    if before_build:
        before_build()
    builder = figureqa_builder_dir()
    tfds_cli = os.path.join(os.path.dirname(sys.executable), "tfds")
    cmd = [tfds_cli, "build", builder, f"--manual_dir={raw}", f"--data_dir={data_dir}"]
    log(" ".join(cmd))
    t = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=os.path.dirname(builder))
    if proc.returncode:
        sys.stderr.write(proc.stdout[-5000:] + proc.stderr[-5000:])
        raise SystemExit(f"tfds build failed (exit {proc.returncode}): {' '.join(cmd)}")
    log(f"built in {time.time() - t:.0f} s")
    os.makedirs(os.path.dirname(stamp_path) or ".", exist_ok=True)
    with open(stamp_path, "w") as f:
        json.dump(stamp, f)
    return False
