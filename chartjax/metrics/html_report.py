"""report.html: one evaluation to look at, written next to metrics.json.

The page holds the headline metrics (with their 95% confidence intervals where metrics.json has
``<name>_ci95_low``/``_high``), the breakdown tables and plots (inline, as the PNGs beside the report), and a table of
examples: chart thumbnail (where the row names an image), input,
prediction, target and whether they match, with DePlot's predicted and true tables side by
side. A text box and a match selector filter the rows (a few lines of vanilla JS). Nothing is
fetched from the network and nothing is linked by path, so a copy of the file elsewhere is
whole: styles, script and plots are inline, thumbnails are inline data: URIs (the first
``MAX_INLINE_THUMBNAILS`` rows with an image; later rows say so instead).

"match" is the row's own ``correct`` field where it has one, else an exact match of prediction
and target after collapsing whitespace and case (any of a list of targets); blank without a
target. It is a browsing aid, not one of the task's metrics.

A task's `RowView` (chartjax/tasks/core/report_views.py) says how its rows read: FigureQA's 0/1
answers as yes/no, its template ids as their text, its figure from the id's image index; and
which scores are vacuous (DePlot's RMS precision of a prediction without a table cell: 1 over
zero predicted cells), marked where the metric and the row are shown. Tables never break a word
inside a cell; a wide one scrolls sideways in its own box.

Plain Python (html, json, PIL for thumbnails): no jax or TensorFlow.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from chartjax.data import tables as table_format
from chartjax.metrics.report import atomic_write_text

__all__ = ["RowView", "find_image", "merge_rows", "row_matches", "write_report"]

MAX_ROWS = 5000
MAX_INLINE_THUMBNAILS = 500
THUMBNAIL_PX = 160
MAX_META_CHARS = 60  # longer extra fields (records, explanations) stay out of the id cell
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff")
_SHOWN_FIELDS = ("id", "input", "prediction", "target", "image", "correct", "table", "table_file")
CI_LOW, CI_HIGH = "_ci95_low", "_ci95_high"

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em} h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}
th{background:#f2f2f2;text-align:left} .num{text-align:right;font-variant-numeric:tabular-nums}
.ci{color:#666} .meta{color:#666;font-size:12px} .plots img{max-width:100%;border:1px solid #ddd}
#examples td{max-width:28em;overflow-wrap:anywhere;white-space:pre-wrap}
#examples td.thumb{width:164px;white-space:normal} td.thumb img{display:block}
tr.ok td.match{background:#e3f6e3} tr.wrong td.match{background:#fbe4e4}
#examples td.tables{max-width:64em;white-space:normal}
.side{display:flex;flex-wrap:wrap;gap:8px;align-items:flex-start}
.scroll{overflow-x:auto;max-width:100%;min-width:0}
table.tbl td,table.tbl th{font-size:12px;padding:1px 4px}
#examples table.tbl td,#examples table.tbl th{max-width:none;white-space:nowrap;
 overflow-wrap:normal;word-break:keep-all}
.vacuous{color:#8a4b00;background:#fff3d6;font-size:12px;padding:0 3px}
.note{background:#eef3fb;border-left:3px solid #5b7fbf;padding:4px 8px}
#filters{margin:.6em 0} #filters input{width:22em} .plots{margin-top:1em}
"""

_SCRIPT = """
(function(){
  var text=document.getElementById('filter-text'), match=document.getElementById('filter-match');
  var rows=Array.prototype.slice.call(document.querySelectorAll('#examples > tbody > tr'));
  var count=document.getElementById('shown');
  function apply(){
    var q=text.value.toLowerCase(), m=match.value, n=0;
    rows.forEach(function(r){
      var ok=(!q||r.textContent.toLowerCase().indexOf(q)>=0)&&(m==='all'||r.dataset.match===m);
      r.style.display=ok?'':'none'; if(ok){n++;}
    });
    count.textContent=n;
  }
  text.addEventListener('input',apply); match.addEventListener('change',apply); apply();
})();
"""


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _text(value: Any) -> str:
    """A cell value as text: strings as they are, other JSON values compactly."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _normalized(value: Any) -> str:
    return " ".join(_text(value).split()).casefold()


@dataclasses.dataclass(frozen=True)
class RowView:
    """How one task's rows read in the report.

    answer: a prediction or target value -> the text shown (FigureQA: 0/1 -> "no"/"yes");
      the match compares these texts.
    details: row -> a line under the input, or None (FigureQA: the question's template).
    group_label: (breakdown name, group) -> the label of a breakdown row.
    image_stem: row -> the file stem of its chart in an image folder, tried after the id
      (FigureQA: the figure's image index, the id's first part).
    vacuous: row -> why its score is vacuous (nothing predicted that could be wrong), or None.
    vacuous_metrics: the headline metrics such rows inflate; marked with how many there are.
    hidden: row fields left out of the line under the id (shown otherwise, or redundant).
    """

    answer: Callable[[Any], str] | None = None
    details: Callable[[Mapping[str, Any]], str | None] | None = None
    group_label: Callable[[str, str], str] | None = None
    image_stem: Callable[[Mapping[str, Any]], str | None] | None = None
    vacuous: Callable[[Mapping[str, Any]], str | None] | None = None
    vacuous_metrics: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()


def row_matches(row: Mapping[str, Any], answer: Callable[[Any], str] | None = None) -> bool | None:
    """The row's ``correct`` field, else whether prediction equals (one of) the target(s)
    after collapsing whitespace and case (as `answer` texts, when given); None when the row
    has no target."""
    if "correct" in row and row["correct"] is not None:
        return bool(row["correct"])
    if "target" not in row or row["target"] is None:
        return None
    show = answer or (lambda v: v)
    targets = row["target"] if isinstance(row["target"], list) else [row["target"]]
    prediction = _normalized(show(row.get("prediction", "")))
    return any(prediction == _normalized(show(t)) for t in targets)


def merge_rows(
    predictions: Mapping[str, Mapping],
    references: Mapping[str, Mapping],
    *,
    whole_objects: bool = False,
) -> list[dict]:
    """Report rows in the references' order: the prediction row with the reference's fields
    added (its target wins, as in scoring); a missing prediction is an empty one, wrong.
    With ``whole_objects`` (CHART-Info's per-image JSON) the objects themselves are the
    prediction and the target."""
    rows = []
    for key, ref in references.items():
        pred = predictions.get(key)
        if whole_objects:
            rows.append({"id": key, "prediction": "" if pred is None else pred, "target": ref})
            if pred is None:
                rows[-1].update(correct=False, missing=True)
            continue
        row = {**dict(ref), **(dict(pred) if pred is not None else {})}
        if "target" in ref:
            row["target"] = ref["target"]
        if pred is None:
            row.update(prediction="", correct=False, missing=True)
        rows.append(row)
    return rows


def find_image(
    row: Mapping[str, Any], image_dirs: Sequence[str] = (), view: RowView | None = None
) -> str | None:
    """The chart image of a row: its ``image`` field when that is an existing file path, else
    ``<dir>/<id><ext>``, then ``<dir>/<view.image_stem(row)><ext>`` (FigureQA's
    ``png/<image_index>.png``), in the first of ``image_dirs`` that has one."""
    image = row.get("image")
    if isinstance(image, str) and os.path.isfile(image):
        return image
    stems = [str(row.get("id", ""))]
    if view is not None and view.image_stem is not None:
        stems.append(view.image_stem(row) or "")
    for folder in image_dirs:
        for stem in filter(None, stems):
            for ext in IMAGE_EXTENSIONS:
                path = os.path.join(folder, stem + ext)
                if os.path.isfile(path):
                    return path
    return None


def _png_uri(path: str) -> str:
    """A PNG file as a data: URI, so the report stays whole wherever it is copied."""
    with open(path, "rb") as f:
        return "data:image/png;base64," + base64.b64encode(f.read()).decode("ascii")


def _thumbnail(path: str) -> tuple[str, int, int] | None:
    """(data: URI, width, height) of a PNG thumbnail, or None if the image cannot be read.
    A figure smaller than the box is shown enlarged to it (the size given is the display's)."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            im.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
            buf = io.BytesIO()
            im.save(buf, format="PNG", optimize=True)
    except (OSError, ValueError):
        return None
    uri = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
    scale = max(1.0, THUMBNAIL_PX / max(im.width, im.height))
    return uri, round(im.width * scale), round(im.height * scale)


def _format(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _esc(_text(value))
    return _esc(f"{value:,}" if isinstance(value, int) else f"{value:.4f}")


def _metric_cells(name: str, values: Mapping[str, Any]) -> str:
    cell = _format(values[name])
    low, high = values.get(name + CI_LOW), values.get(name + CI_HIGH)
    if low is not None and high is not None:
        cell += f' <span class="ci">[{_format(low)}, {_format(high)}]</span>'
    return cell


def _names(values: Mapping[str, Any]) -> list[str]:
    return [k for k in values if not k.endswith((CI_LOW, CI_HIGH))]


def _vacuous_notes(rows: Sequence[Mapping[str, Any]], view: RowView | None) -> dict[str, str]:
    """metric -> the mark of the vacuous rows it averages over (empty when there are none)."""
    if view is None or view.vacuous is None or not view.vacuous_metrics:
        return {}
    reasons = [r for r in map(view.vacuous, rows) if r]
    if not reasons:
        return {}
    mark = f"vacuous for {len(reasons):,} of {len(rows):,} examples: {reasons[0]}"
    return {name: mark for name in view.vacuous_metrics}


def _metrics_section(
    obj: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], view: RowView | None
) -> str:
    metrics = obj.get("metrics", {})
    vacuous = _vacuous_notes(rows, view)
    out = ["<h2>Metrics</h2>"]
    if not metrics and rows and all(r.get("target") is None for r in rows):
        out.append(
            "<p class='note' id='predictions-only'>Predictions only: no example has a target, "
            "so nothing is scored. predictions.jsonl holds the predictions, to submit or to "
            "score against a key with chartjax-score.</p>"
        )
    out.append('<table id="metrics"><tr><th>metric</th><th>value [95% CI]</th></tr>')
    for name in _names(metrics):
        mark = vacuous.get(name)
        cell = _metric_cells(name, metrics)
        if mark:
            cell += f' <span class="vacuous" title="{_esc(mark)}">&#9888; {_esc(mark)}</span>'
        out.append(f'<tr><td>{_esc(name)}</td><td class="num">{cell}</td></tr>')
    out.append("</table>")
    unavailable = obj.get("unavailable") or {}
    if unavailable:
        out.append("<h2>Not computed</h2><ul>")
        out += [f"<li><b>{_esc(k)}</b>: {_esc(v)}</li>" for k, v in unavailable.items()]
        out.append("</ul>")
    return "".join(out)


def _breakdowns_section(
    breakdowns: Mapping[str, Mapping[str, Mapping[str, Any]]], view: RowView | None
) -> str:
    label = view.group_label if view is not None and view.group_label else lambda _, g: g
    out = []
    for name, groups in breakdowns.items():
        columns: list[str] = []
        for values in groups.values():
            columns += [c for c in _names(values) if c not in columns]
        columns.sort(key=lambda c: c != "n")
        out.append(f"<h3>{_esc(name)}</h3><table class='breakdown'><tr><th>group</th>")
        out += [f"<th>{_esc(c)}</th>" for c in columns]
        out.append("</tr>")
        for group, values in groups.items():
            cells = "".join(
                f'<td class="num">{_metric_cells(c, values) if c in values else ""}</td>'
                for c in columns
            )
            out.append(f"<tr><td>{_esc(label(name, group))}</td>{cells}</tr>")
        out.append("</table>")
    return "<h2>Breakdowns</h2>" + "".join(out) if out else ""


def _table_html(text: Any) -> str:
    """A linearized table as an HTML table (title above) in a box that scrolls sideways, so
    cells keep their words whole; unparseable text as it is."""
    if not isinstance(text, str):
        return f"<pre>{_esc(_text(text))}</pre>"
    if not text.strip():
        return "<span class='meta'>(empty)</span>"
    try:
        table = table_format.parse(text)
    except ValueError:
        return _esc(text)
    if not table.header and not table.rows:
        return _esc(text)
    out = [f"<div class='meta'>{_esc(table.title)}</div>" if table.title else ""]
    out.append("<div class='scroll'><table class='tbl'><tr>")
    out += [f"<th>{_esc(c)}</th>" for c in table.header]
    out.append("</tr>")
    for row in table.rows:
        out.append("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>")
    out.append("</table></div>")
    return "".join(out)


def _example_rows(
    rows: Sequence[Mapping[str, Any]],
    *,
    image_for: Callable[[Mapping[str, Any]], str | None] | None,
    tables: bool,
    view: RowView | None,
) -> tuple[str, bool]:
    images = [image_for(r) if image_for else None for r in rows]
    with_thumbs = any(images)
    answer = view.answer if view is not None else None
    hidden = set(_SHOWN_FIELDS) | set(view.hidden if view is not None else ())
    out = []
    inline = 0
    for i, (row, image) in enumerate(zip(rows, images)):
        match = row_matches(row, answer)
        state = {True: "ok", False: "wrong", None: "none"}[match]
        meta = " ".join(
            f"{k}={_text(v)}"
            for k, v in row.items()
            if k not in hidden
            and isinstance(v, str | int | float | bool)
            and len(_text(v)) <= MAX_META_CHARS
        )
        cells = [
            f'<td class="num">{i + 1}</td>',
            f"<td>{_esc(row.get('id', ''))}<div class='meta'>{_esc(meta)}</div></td>",
        ]
        if with_thumbs:
            img, alt = "", _esc(f"chart {row.get('id', '')}")
            thumb = _thumbnail(image) if image and inline < MAX_INLINE_THUMBNAILS else None
            if thumb:
                inline += 1
                uri, width, height = thumb
                img = f'<img src="{uri}" width="{width}" height="{height}" alt="{alt}">'
            elif image:  # a link would break once the report is copied: self-contained or nothing
                img = (
                    f"<span class='meta'>(thumbnails for the first {MAX_INLINE_THUMBNAILS} rows "
                    "with an image)</span>"
                )
            cells.append(f'<td class="thumb">{img}</td>')
        details = view.details(row) if view is not None and view.details else None
        detail = f"<div class='meta details'>{_esc(details)}</div>" if details else ""
        cells.append(f"<td>{_esc(_text(row.get('input', '')))}{detail}</td>")
        prediction, target = row.get("prediction", ""), row.get("target")
        why = view.vacuous(row) if view is not None and view.vacuous else None
        mark = f"<div class='vacuous'>&#9888; vacuous: {_esc(why)}</div>" if why else ""
        if tables:
            cells.append(
                f"<td class='tables'><div class='side'><div class='scroll'>"
                f"{_table_html(prediction)}{mark}</div><div class='scroll'>"
                f"{_table_html(target) if target is not None else ''}</div></div></td>"
            )
        else:
            shown = answer(prediction) if answer else prediction
            cells.append(f"<td>{_esc(_text(shown))}{mark}</td>")
            if target is not None and answer:
                target = [answer(t) for t in target] if isinstance(target, list) else answer(target)
            cells.append(f"<td>{_esc(_text(target)) if target is not None else ''}</td>")
        tick = {True: "&#10003;", False: "&#10007;", None: ""}[match]
        cells.append(f'<td class="match">{tick}</td>')
        out.append(f'<tr class="{state}" data-match="{state}">{"".join(cells)}</tr>')
    return "".join(out), with_thumbs


def _about(obj: Mapping[str, Any], n_rows: int) -> str:
    provenance = obj.get("provenance") or {}
    parts = [f"{obj.get('num_examples', n_rows)} examples"]
    if provenance.get("checkpoint"):
        parts.append(f"checkpoint {provenance['checkpoint']}")
    if provenance.get("chartjax"):
        git = f" ({provenance['git']})" if provenance.get("git") else ""
        parts.append(f"chartjax {provenance['chartjax']}{git}")
    return "; ".join(parts)


def write_report(
    path: str | os.PathLike,
    metrics_obj: Mapping[str, Any],
    rows: Iterable[Mapping[str, Any]],
    *,
    plots: Sequence[str | os.PathLike] = (),
    image_for: Callable[[Mapping[str, Any]], str | None] | None = find_image,
    tables: bool | None = None,
    max_rows: int = MAX_ROWS,
    view: RowView | None = None,
) -> str:
    """Writes report.html for one metrics.json object and its prediction rows; returns the path.

    Args:
      path: the HTML file (``report.html`` next to ``metrics.json``).
      metrics_obj: the metrics.json object (docs/design.md §5).
      rows: prediction rows ``{"id", "prediction", "target"?, "input"?, "image"?, ...}``; other
        short scalar fields (figure_type, chart_type, ...) are shown under the id and can be
        filtered.
      plots: PNG files to show (existing ones only, linked relative to the report).
      image_for: row -> chart image path or None; without any image the thumbnail column is
        left out.
      tables: render prediction and target as linearized tables side by side (default: when
        the task's name starts with "deplot").
      max_rows: rows beyond this many are left out of the page (the report says so;
        predictions.jsonl has them all).
      view: how the task's rows read (answers, templates, vacuous scores); None shows them as
        they are.
    """
    path = os.fspath(path)
    rows = list(rows)
    shown = rows[:max_rows]
    task = str(metrics_obj.get("task", ""))
    if tables is None:
        tables = task.startswith("deplot")
    body, with_thumbs = _example_rows(shown, image_for=image_for, tables=tables, view=view)
    title = f"{task} {metrics_obj.get('split', '')}"
    if metrics_obj.get("step") is not None:
        title += f" @ step {metrics_obj['step']}"
    plot_imgs = [
        f'<img src="{_png_uri(p)}" alt="breakdown plot">'
        for p in map(os.fspath, plots)
        if os.path.isfile(p)
    ]
    header = ["#", "id", *(["chart"] if with_thumbs else []), "input"]
    header += ["prediction | target"] if tables else ["prediction", "target"]
    header.append("match")
    note = (
        f" (the first {len(shown):,} of {len(rows):,}; predictions.jsonl has them all)"
        if len(shown) < len(rows)
        else ""
    )
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{_esc(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_esc(title)}</h1>",
        f"<p class='meta'>{_esc(_about(metrics_obj, len(rows)))}</p>",
        _metrics_section(metrics_obj, rows, view),
        _breakdowns_section(metrics_obj.get("breakdowns") or {}, view),
        f"<div class='plots'>{''.join(plot_imgs)}</div>" if plot_imgs else "",
        f"<h2>Examples{_esc(note)}</h2>",
        "<div id='filters'><input id='filter-text' type='search' placeholder='filter: any text "
        "in the row'> <select id='filter-match'><option value='all'>all</option>"
        "<option value='ok'>match</option><option value='wrong'>no match</option>"
        "<option value='none'>no target</option></select> "
        f"<span id='shown'>{len(shown)}</span> of {len(shown)} shown</div>",
        "<table id='examples'><thead><tr>",
        "".join(f"<th>{_esc(h)}</th>" for h in header),
        f"</tr></thead><tbody>{body}</tbody></table>",
        f"<script>{_SCRIPT}</script></body></html>\n",
    ]
    atomic_write_text(path, "".join(parts))
    return path
