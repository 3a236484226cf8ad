"""Which ChartCheck test set 2 a file holds: the paper's, or the 2024 re-annotation.

The paper (arXiv 2311.07453, Table 1) counts 981 test-2 claims, 503 supports / 478 refutes: the
file `data/claim_explanation_verification_pre_tasksets_test_two_V2.json` (and `.csv`) of
mubasharaak/ChartCheck at 276f08e ("Testsets earlier versions", 2023-12-24), which its scripts
of 2023 read (`table_based_classification.py` at f3c9343, line 18;
`explanation_generation_flanT5.py` at a904b10, line 22). The test_two published today
(`chartfc_dataset_wikicommons` 9fa228a `data/dataset/test_two.csv`, ChartCheck's
`data/ChartCheck_final/test_two.json`) is the re-annotation: the same 981 positions, 497
supports / 484 refutes; 352 claims were rewritten and 5 labels changed on unchanged claims.

A file is recognized by its content first (a digest of its claims, `content_digest`, equal to one
of the released files'), then by counts of a whole file, then by its layout: the paper-era files
are the MTurk-validation layout (JSON objects with `db_id` and the `*_rewritten` review fields,
no `id`; or a CSV of exactly the six columns with TRUE/FALSE labels), while every re-annotated
release adds `id`s (JSON), an `Unnamed: 6` column and True/False labels (9fa228a), or empty extra
columns after a BOM (the drafts of 2023-12-23 to 2024-01-08). Pure Python; no TensorFlow.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Sequence

PAPER = "paper_2023"
REANNOTATED = "reannotated_2024"
# An earlier file of 2023 (852 claims, 426 / 426): what matcha_test.py (6a74e95, lines 53-61)
# read as its unseen test set; neither the paper's Table 1 nor the release.
EARLIER = "earlier_2023"
VERSIONS = (PAPER, REANNOTATED, EARLIER)
# The names under which the paper-era file can sit in manual_dir (its name in the repository).
PAPER_FILES = (
    "claim_explanation_verification_pre_tasksets_test_two_V2.json",
    "claim_explanation_verification_pre_tasksets_test_two_V2.csv",
)
PAPER_COUNTS = (981, 503, 478)  # claims, supports, refutes (the paper's Table 1)
REANNOTATED_COUNTS = (981, 497, 484)
# content_digest of the released files (computed from the repositories' files).
KNOWN_DIGESTS = {
    "3d2c54abc57bc91663bc48e487a3d45c4910adcbbb33af4fdc9657c9f99305a5": (
        PAPER,
        "ChartCheck 276f08e data/claim_explanation_verification_pre_tasksets_test_two_V2.json "
        "(and .csv)",
    ),
    "565c57c7d64a1f34a8684937654da6c6a74de6d643d2f2b55171d7a2b31561bc": (
        REANNOTATED,
        "chartfc_dataset_wikicommons 9fa228a data/dataset/test_two.csv = ChartCheck "
        "data/ChartCheck_final/test_two.json (2024-02-16)",
    ),
    "9b93ccb05bda8a0f931103b76bb9deda5b7f5a3c39839203945d0ac3afa2ba70": (
        REANNOTATED,
        "chartfc_dataset_wikicommons 7521dab / 6e279e4 data/dataset/test_two.csv (draft of "
        "2023-12-23)",
    ),
    "7134d5d9073949004d650e55ae05163f110d9d3c3ea8920c68bcd2de339a1b42": (
        REANNOTATED,
        "ChartCheck ebcb007 / 124b83c data/testset_reannotation/...test_two_V2.json (draft)",
    ),
    "33c3a8b30d6bc0a6421fb3efbe56521386c4ebf3844e5d18dafff3d254793aac": (
        EARLIER,
        "ChartCheck 276f08e data/claim_explanation_verification_pre_tasksets_test_two.json",
    ),
}
DESCRIPTIONS = {
    PAPER: "the paper's test set 2 (Table 1: 981 claims, 503 supports / 478 refutes)",
    REANNOTATED: "the 2024 re-annotation of test set 2 (981 claims, 497 supports / 484 refutes)",
    EARLIER: "an earlier test set 2 file of 2023 (852 claims, 426 supports / 426 refutes)",
}


def content_digest(records: Sequence) -> str:
    """sha256 of the sorted lines `image basename \\t claim (whitespace collapsed) \\t label`:
    the same for a version's CSV and JSON forms, whatever their order, ids or extra columns."""
    lines = sorted(
        f"{r.chart_img.rsplit('/', 1)[-1]}\t{' '.join(r.claim.split())}\t{r.label}" for r in records
    )
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def _layout(path: str, records: Sequence) -> tuple[str, str] | None:
    """(version, why) from the file's layout, or None when it says nothing."""
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        first = next((x for x in data if isinstance(x, dict)), {}) if isinstance(data, list) else {}
        if "id" in first:
            return REANNOTATED, "JSON records with `id` (the re-annotated releases)"
        if "db_id" in first and "claim_rewritten" in first:
            return PAPER, "JSON records with `db_id` and the review fields, no `id` (276f08e)"
        return None
    with open(path, encoding="utf-8-sig", newline="") as f:
        header = next(csv.reader(f), [])
    if len(header) > 6:
        return (
            REANNOTATED,
            f"CSV columns beyond the six: {header[6:]!r} (the re-annotated releases)",
        )
    spellings = {r.label_raw.strip() for r in records}
    if spellings <= {"True", "False"} and spellings:
        return REANNOTATED, "True/False labels (9fa228a's spelling)"
    if spellings <= {"TRUE", "FALSE"} and spellings:
        return PAPER, "six columns, TRUE/FALSE labels (276f08e's CSV)"
    return None


def identify(records: Sequence, path: os.PathLike | str) -> dict:
    """What the build records of its test_two (`metadata.json`, key "test_two"): `version`
    (PAPER, REANNOTATED or "unknown"), `recognized_by`, `file`, the counts and the digest."""
    path = os.fspath(path)
    supports = sum(r.label == "supports" for r in records)
    counts = (len(records), supports, len(records) - supports)
    digest = content_digest(records)
    if digest in KNOWN_DIGESTS:
        version, source = KNOWN_DIGESTS[digest]
        why = f"content: the released file {source}"
    elif counts in (PAPER_COUNTS, REANNOTATED_COUNTS):
        version = PAPER if counts == PAPER_COUNTS else REANNOTATED
        why = f"counts of a whole file: {counts[0]} claims, {counts[1]} / {counts[2]}"
    else:
        found = _layout(path, records)
        version, why = found if found else ("unknown", "neither content, counts nor layout")
        why = f"layout: {why}" if found else why
    return {
        "version": version,
        "description": DESCRIPTIONS.get(version, "not a released test set 2"),
        "recognized_by": why,
        "file": os.path.basename(path),
        "claims": counts[0],
        "supports": counts[1],
        "refutes": counts[2],
        "content_sha256": digest,
    }
