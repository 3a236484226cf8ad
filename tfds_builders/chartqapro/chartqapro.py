"""ChartQAPro as TFDS: one example per row of the release as distributed (the HF dataset's files).

`manual_dir` is the dataset folder as downloaded (docs/design.md §8), e.g. `huggingface-cli
download ahmed-masry/ChartQAPro --repo-type dataset --local-dir DIR` (lmms-eval reads the copy
`lmms-lab/ChartQAPro`). The files on disk are [unverified]: the one split `test` is read from the
parquet shards of the first of these layouts present, shards in name order:

  `data/test-*.parquet`     the layout `push_to_hub` writes (`data/test-00000-of-00001.parquet`)
  `test-*.parquet`          the shards alone, unpacked flat
  `test/*.parquet`          the Hub's parquet conversion (`refs/convert/parquet`), one folder per
  `default/test/*.parquet`    split, with or without its config folder

Two layouts present at once is refused (two copies would count each question twice).

Columns (as lmms-eval `tasks/chartqapro` and third-party loaders read them): `image` (HF `datasets`
Image: a struct `{"bytes", "path"}`; a plain binary column is accepted), `Question` (a string,
or the list of a conversation's questions; the lists of one question are accepted too),
`Answer` (a list, the last one scored; a string is one answer), `Question Type` (Factoid,
Conversational, Hypothetical, Fact Checking, Multi Choice; `Question_Type` accepted
[unverified]), `Year` ("YES"/"NO" per answer item; absent or null -> no flags), `Paragraph`
(context; absent or null -> ""). Example id: `test/<row index>`, the row's position in the split
(shards concatenated in name order), as `datasets` and lmms-eval number them.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator
from typing import Any

import tensorflow_datasets as tfds
from etils import epath
from PIL import Image

from chartjax.data.images import to_rgb
from tfds_builders.common import input_fingerprint, record_format
from tfds_builders.common.bad_input import BadInputError, SkipBadMixin
from tfds_builders.common.images import PNG_COMPRESS_LEVEL, is_plain_rgb8_png

SPLIT = "test"
# Where the split's shards are, first match wins (the layouts above).
LAYOUTS = (
    f"data/{SPLIT}-*.parquet",
    f"{SPLIT}-*.parquet",
    f"{SPLIT}/*.parquet",
    f"default/{SPLIT}/*.parquet",
)
# column -> other spellings accepted; required columns first.
COLUMNS = {
    "image": (),
    "Question": (),
    "Answer": (),
    "Question Type": ("Question_Type",),
    "Year": (),
    "Paragraph": (),
}
OPTIONAL = ("Year", "Paragraph")
QUESTION_TYPES = ("Factoid", "Conversational", "Hypothetical", "Fact Checking", "Multi Choice")
EXTRA = "chartqapro"
_BATCH_ROWS = 64  # rows decoded at once: a shard's images are never all in memory

_DESCRIPTION = """\
ChartQAPro (Masry et al., 2025): 1,948 questions on 1,341 real-world charts from 157 sources;
factoid, multiple-choice, conversational, fact-checking and hypothetical questions, some with a
paragraph of context. One example per row of the release: the image, the question(s), the
answer(s) (the last one is scored), the question type, the Year flags and the paragraph.
"""
_CITATION = """\
@article{masry2025chartqapro,
  title={ChartQAPro: A More Diverse and Challenging Benchmark for Chart Question Answering},
  author={Masry, Ahmed and Islam, Mohammed Saidul and Ahmed, Mahir and Bajaj, Aayush and
          Kabir, Firoz and Kartha, Aaryaman and Laskar, Md Tahmid Rahman and Rahman, Mizanur and
          Rahman, Shadikur and Shahmohammadi, Mehrad and others},
  journal={arXiv preprint arXiv:2504.05506},
  year={2025}
}
"""


def _pyarrow_parquet():
    try:
        import pyarrow.parquet as pq
    except ImportError:  # one line, naming the extra that brings it
        raise ImportError(
            f"the ChartQAPro builder reads parquet with pyarrow: pip install 'chartjax[{EXTRA}]'"
        ) from None
    return pq


class Builder(
    input_fingerprint.InputFingerprintMixin,
    SkipBadMixin,
    record_format.ArrayRecordDefault,
    tfds.core.GeneratorBasedBuilder,
):
    """ChartQAPro from the HF dataset's parquet files."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "One example per row of the release; array_record files."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = """\
    Download the HF dataset (`huggingface-cli download ahmed-masry/ChartQAPro --repo-type
    dataset --local-dir DIR`, or lmms-lab/ChartQAPro) and pass DIR as --manual_dir: it holds
    data/test-*.parquet (or test-*.parquet, test/*.parquet, default/test/*.parquet). Needs
    pyarrow: pip install 'chartjax[chartqapro]'.
    Set CHARTJAX_SKIP_BAD=1 to skip (and count) rows whose image or fields are bad.
    """

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            description=_DESCRIPTION,
            features=tfds.features.FeaturesDict(
                {
                    "id": tfds.features.Text(doc="test/<row index>"),
                    # The release's bytes when they are an RGB JPEG or 8-bit RGB PNG (the
                    # build stays the release's size), else flattened to an RGB PNG.
                    "image": tfds.features.Image(shape=(None, None, 3)),
                    "question": tfds.features.Sequence(
                        tfds.features.Text(), doc="Question: one, or a conversation's turns"
                    ),
                    "answer": tfds.features.Sequence(
                        tfds.features.Text(), doc="Answer: one per question; the last is scored"
                    ),
                    "question_type": tfds.features.Text(doc="Question Type"),
                    "year": tfds.features.Sequence(
                        tfds.features.Text(), doc="Year: YES/NO per item of the scored answer"
                    ),
                    "paragraph": tfds.features.Text(doc="Paragraph (context); '' when none"),
                }
            ),
            supervised_keys=None,
            homepage="https://github.com/vis-nlp/ChartQAPro",
            citation=_CITATION,
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        _pyarrow_parquet()  # before anything is read: a missing reader is one line
        shards = find_shards(epath.Path(dl_manager.manual_dir))
        return {SPLIT: self._generate_examples(shards)}

    def _generate_examples(self, shards: list[epath.Path]):
        num = 0
        for key, example in read_rows(shards):
            if isinstance(example, BadInputError):
                self.skip_ledger.handle(SPLIT, example)
                continue
            num += 1
            yield key, example
        self.skip_ledger.end_split(SPLIT, num)
        if not num:  # TFDS would fail with "No examples were yielded", naming no file
            raise BadInputError(", ".join(map(str, shards)), "no rows")


def find_shards(root: epath.Path) -> list[epath.Path]:
    """The split's parquet shards under `root`, in name order (module docstring's layouts)."""
    found = {pattern: sorted(root.glob(pattern)) for pattern in LAYOUTS}
    present = [p for p, files in found.items() if files]
    if len(present) > 1:
        raise BadInputError(
            root,
            f"parquet shards in two layouts ({', '.join(present)}): keep one copy of the split",
        )
    if not present:
        listing = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
        raise BadInputError(
            root,
            f"no ChartQAPro parquet files ({', '.join(LAYOUTS)}); pass the downloaded dataset "
            f"folder as --manual_dir (found {listing})",
        )
    return found[present[0]]


def read_rows(shards: list[epath.Path]) -> Iterator[tuple[str, dict | BadInputError]]:
    """`(id, example)` per row, `test/<row index>` over the shards in order; a bad row gives a
    BadInputError naming the file, its row in that file and the field instead of an example."""
    pq = _pyarrow_parquet()
    index = 0
    for path in shards:
        with path.open("rb") as f:
            try:
                parquet = pq.ParquetFile(f)
            except (OSError, ValueError) as e:  # pyarrow.ArrowInvalid: not parquet, truncated
                raise BadInputError(path, f"cannot read parquet: {e}") from e
            names = _column_names(path, parquet.schema_arrow.names)
            row = 0
            for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, columns=list(names.values())):
                columns = {key: batch.column(name).to_pylist() for key, name in names.items()}
                for i in range(batch.num_rows):
                    key = f"{SPLIT}/{index}"
                    values = {k: v[i] for k, v in columns.items()}
                    try:
                        yield key, row_example(key, values)
                    except BadInputError as e:
                        yield key, BadInputError(path, f"{e.reason} (id {key})", row=row)
                    row, index = row + 1, index + 1


def _column_names(path: epath.Path, names: list[str]) -> dict[str, str]:
    """Our name -> the file's column name, for the columns present (required ones checked)."""
    out = {}
    for key, aliases in COLUMNS.items():
        name = next((n for n in (key, *aliases) if n in names), None)
        if name is not None:
            out[key] = name
        elif key not in OPTIONAL:
            raise BadInputError(path, f"no column {key!r} (columns: {names})")
    return out


class _FieldError(BadInputError):
    def __init__(self, field: str, reason: str):
        super().__init__("", f"field {field!r}: {reason}")


def row_example(key: str, values: dict[str, Any]) -> dict[str, Any]:
    """One row's example. Raises BadInputError (reason names the field) for a bad value."""
    questions = _texts(values["Question"], "Question")
    answers = _texts(values["Answer"], "Answer")
    qtype = values["Question Type"]
    if not isinstance(qtype, str) or not qtype.strip():
        raise _FieldError("Question Type", f"expected one of {QUESTION_TYPES}, got {qtype!r}")
    return {
        "id": key,
        "image": _image(values["image"]),
        "question": questions,
        "answer": answers,
        "question_type": qtype.strip(),
        "year": _flags(values.get("Year")),
        "paragraph": _paragraph(values.get("Paragraph")),
    }


def _texts(value, field: str) -> list[str]:
    """A string (one item) or a non-empty list of strings."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) for v in items):
        raise _FieldError(field, f"expected a string or a list of strings, got {value!r}")
    return items


def _flags(value) -> list[str]:
    """Year flags as text: null -> none, a string -> one, booleans -> YES/NO."""
    if value is None:
        return []
    items = [value] if isinstance(value, str | bool) else value
    if not isinstance(items, list) or not all(isinstance(v, str | bool) for v in items):
        raise _FieldError("Year", f'expected "YES"/"NO" flags, got {value!r}')
    return [("YES" if v else "NO") if isinstance(v, bool) else v for v in items]


def _paragraph(value) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _FieldError("Paragraph", f"expected a string or null, got {type(value).__name__}")
    return value


def _image(value) -> bytes:
    """The encoded image of an `image` cell (`{"bytes", "path"}` or bytes)."""
    data = value.get("bytes") if isinstance(value, dict) else value
    if not isinstance(data, bytes) or not data:
        path = value.get("path") if isinstance(value, dict) else None
        raise _FieldError(
            "image", f"no embedded image bytes (path {path!r}; only embedded images are read)"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                img.load()  # decode fully now, so truncated files fail here
                if is_plain_rgb8_png(img, data) or (img.format == "JPEG" and img.mode == "RGB"):
                    return data  # stored as distributed
                rgb = to_rgb(img, data)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise _FieldError("image", f"cannot decode image: {e}") from e
    buf = io.BytesIO()
    rgb.save(buf, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buf.getvalue()
