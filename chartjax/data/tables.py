"""The one home of DePlot's linearized-table format (pure Python: no tf/jax).

A linearized table is rows joined by newlines, cells joined by " | ", with an optional first
line "TITLE | <title>" (docs/models.md §2, docs/corpora.md §5.2). Generators, builders,
inference and metrics all go through these two functions so the format cannot drift.
"""

from __future__ import annotations

import dataclasses

CELL_SEP = " | "
ROW_SEP = "\n"
# SentencePiece decodes a newline as its byte-fallback piece when the piece is not detokenized.
BYTE_NEWLINE = "<0x0A>"
TITLE_PREFIX = "TITLE"
# DePlot's prompt (docs/models.md §2.1), rendered as the header above the chart.
DEPLOT_PROMPT = "Generate underlying data table of the figure below:"


@dataclasses.dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    title: str | None = None


def _clean_cell(cell: object) -> str:
    # A cell may not contain the separators, or the table would re-parse differently.
    text = str(cell).replace(BYTE_NEWLINE, " ").replace("\n", " ").replace("\r", " ")
    return text.replace(CELL_SEP, " / ").strip()


def linearize(header, rows, title: str | None = None) -> str:
    """Header + rows (+ optional title) -> "TITLE | t\\nh1 | h2\\nr1 | v1..."."""
    lines = []
    if title is not None:
        lines.append(f"{TITLE_PREFIX}{CELL_SEP}{_clean_cell(title)}")
    lines.append(CELL_SEP.join(_clean_cell(c) for c in header))
    lines.extend(CELL_SEP.join(_clean_cell(c) for c in row) for row in rows)
    return ROW_SEP.join(lines)


def parse(text: str) -> Table:
    """Inverse of `linearize`; also accepts `<0x0A>` row separators from raw decoder output.

    Case is kept (metrics lower-case themselves, as DePlot's parser does).
    """
    text = text.replace(BYTE_NEWLINE, ROW_SEP).strip()
    lines = [line for line in text.split(ROW_SEP) if line.strip()]
    title = None
    if lines and lines[0].lower().startswith(TITLE_PREFIX.lower() + " |"):
        title = lines[0].split("|", 1)[1].strip()
        lines = lines[1:]
    cells = [tuple(c.strip() for c in line.split(CELL_SEP)) for line in lines]
    if not cells:
        return Table(header=(), rows=(), title=title)
    return Table(header=cells[0], rows=tuple(cells[1:]), title=title)
