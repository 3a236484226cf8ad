"""report.html rendered by headless Chromium (Debian's `chromium`, installed by the Makefile):
a thumbnail box holds non-blank pixels in the screenshot, the DOM has one row per example, and
the filters hide rows."""

import json
import re
import shutil
import subprocess

import pytest
from PIL import Image, ImageDraw

from chartjax.data.tables import linearize
from chartjax.metrics import html_report, report

WINDOW = (1280, 2400)


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "Debian's chromium is needed (`make install` runs apt-get install chromium)"
    return path


def _run_chromium(tmp_path, html_path, *args) -> str:
    cmd = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        "--force-device-scale-factor=1",
        "--hide-scrollbars",
        "--virtual-time-budget=3000",  # let images decode and layout settle before the capture
        *args,
        html_path.resolve().as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _with_probe(path, script: str):
    """A copy of the report with a script appended (the layout is unchanged)."""
    probe = path.with_name("probe.html")
    probe.write_text(path.read_text().replace("</body>", f"<script>{script}</script></body>"))
    return probe


def _chart(path, colour):
    im = Image.new("RGB", (320, 240), "white")
    draw = ImageDraw.Draw(im)
    for i, h in enumerate((60, 140, 100)):
        draw.rectangle([40 + 90 * i, 220 - h, 100 + 90 * i, 220], fill=colour)
    draw.line([30, 220, 300, 220], fill="black", width=3)
    im.save(path)
    return str(path)


@pytest.fixture
def figureqa_report(tmp_path):
    charts = [_chart(tmp_path / f"c{i}.png", c) for i, c in enumerate(("red", "navy", "green"))]
    rows = [
        {
            "id": "0/0",
            "input": "Is Red the maximum?",
            "prediction": 1,
            "target": 1,
            "figure_type": "vbar_categorical",
            "image": charts[0],
        },
        {
            "id": "0/1",
            "input": "Is Navy the minimum?",
            "prediction": 0,
            "target": 1,
            "figure_type": "vbar_categorical",
            "image": charts[1],
        },
        {
            "id": "1/0",
            "input": "Does Green have the lowest value?",
            "prediction": 0,
            "target": 0,
            "figure_type": "pie",
            "image": charts[2],
        },
        {"id": "1/1", "input": "Is Green the smoothest?", "prediction": 1},
    ]
    breakdowns = {
        "figure_type": {
            "vbar_categorical": {
                "accuracy": 0.5,
                "accuracy_ci95_low": 0.09,
                "accuracy_ci95_high": 0.91,
                "n": 2,
            },
            "pie": {"accuracy": 1.0, "accuracy_ci95_low": 0.21, "accuracy_ci95_high": 1.0, "n": 1},
        }
    }
    obj = report.build_metrics(
        task="figureqa",
        split="validation2",
        step=12,
        num_examples=4,
        metrics={"accuracy": 2 / 3, "accuracy_ci95_low": 0.21, "accuracy_ci95_high": 0.94},
        breakdowns=breakdowns,
        provenance=report.provenance(checkpoint="runs/x/checkpoints/12"),
    )
    plot = tmp_path / "accuracy_by_group.png"
    report.plot_breakdown(breakdowns, plot)
    path = tmp_path / "report.html"
    html_report.write_report(path, obj, rows, plots=[plot])
    return path, rows


def test_rendered_report_has_a_row_per_example_and_a_painted_thumbnail(tmp_path, figureqa_report):
    path, rows = figureqa_report
    text = path.read_text()
    assert "http://" not in text and "https://" not in text  # nothing from the network
    assert 'alt="breakdown plot"' in text and not re.search(r'src="(?!data:)', text)  # inline
    assert "0.6667" in text and "[0.2100, 0.9400]" in text  # headline metric with its CI

    dom = _run_chromium(tmp_path, path, "--dump-dom")
    body = dom.split('<table id="examples">')[1]
    assert len(re.findall(r"<tr class=\"(?:ok|wrong|none)\"", body)) == len(rows)
    assert [m for m in re.findall(r'data-match="(\w+)"', body)] == ["ok", "wrong", "ok", "none"]

    box_js = (
        "window.addEventListener('load',function(){"
        "var r=document.querySelector('td.thumb img').getBoundingClientRect();"
        "document.body.setAttribute('data-box',[r.left,r.top,r.width,r.height].join(','));});"
    )
    dom = _run_chromium(tmp_path, _with_probe(path, box_js), "--dump-dom")
    left, top, width, height = map(float, re.search(r'data-box="([^"]+)"', dom)[1].split(","))
    assert width >= 100 and height >= 70 and top + height < WINDOW[1]

    shot = tmp_path / "shot.png"
    _run_chromium(tmp_path, path, f"--screenshot={shot}")
    with Image.open(shot) as im:
        crop = im.convert("RGB").crop((left + 2, top + 2, left + width - 2, top + height - 2))
    colours = crop.getcolors(maxcolors=1 << 16)
    non_white = sum(n for n, c in colours if sum(c) < 3 * 235)
    assert len(colours) > 2 and non_white > 0.05 * crop.width * crop.height
    # the first chart's red bars, not just any ink
    assert any(r > 180 and g < 90 and b < 90 for _, (r, g, b) in colours)


def test_filters_hide_rows_in_the_browser(tmp_path, figureqa_report):
    path, rows = figureqa_report
    js = (
        "var t=document.getElementById('filter-text');t.value='navy';"
        "t.dispatchEvent(new Event('input'));"
        "document.body.setAttribute('data-shown-text',document.getElementById('shown').textContent);"
        "t.value='';t.dispatchEvent(new Event('input'));"
        "var m=document.getElementById('filter-match');m.value='wrong';"
        "m.dispatchEvent(new Event('change'));"
    )
    dom = _run_chromium(tmp_path, _with_probe(path, js), "--dump-dom")
    assert 'data-shown-text="1"' in dom
    body = dom.split('<table id="examples">')[1]
    visible = re.findall(r'<tr class="(\w+)" data-match="\w+"(?! style="display: none;")', body)
    assert visible == ["wrong"]


def test_deplot_tables_side_by_side_and_no_thumbnail_column(tmp_path):
    pred = linearize(["Year", "Sales"], [["2019", "40"], ["2020", "45"]], title="Sales")
    true = linearize(["Year", "Sales"], [["2019", "40"], ["2020", "47"]], title="Sales")
    rows = [
        {"id": "a", "prediction": pred, "target": true},
        {"id": "b", "prediction": true, "target": true},
    ]
    obj = report.build_metrics(
        task="deplot", split="test", step=None, num_examples=2, metrics={"rms_f1": 0.9}
    )
    path = html_report.write_report(tmp_path / "report.html", obj, rows)
    dom = _run_chromium(tmp_path, tmp_path / "report.html", "--dump-dom")
    body = dom.split('<table id="examples">')[1]
    assert body.count('<table class="tbl">') == 4  # predicted and true table per row
    assert '<span id="shown">2</span>' in dom  # the filter counts examples, not table rows
    assert "<td>47</td>" in body and 'class="thumb"' not in body
    assert re.findall(r'data-match="(\w+)"', body) == ["wrong", "ok"]
    assert path.endswith("report.html")


def test_row_helpers(tmp_path):
    assert html_report.row_matches({"prediction": " Yes ", "target": ["no", "yes"]}) is True
    assert html_report.row_matches({"prediction": "1", "target": 1}) is True
    assert html_report.row_matches({"prediction": "x", "target": "x", "correct": False}) is False
    assert html_report.row_matches({"prediction": "x"}) is None
    rows = html_report.merge_rows(
        {"a": {"id": "a", "prediction": "p", "target": "old"}},
        {"a": {"id": "a", "target": "new", "chart_type": "bar"}, "b": {"id": "b", "target": "t"}},
    )
    assert rows[0] == {"id": "a", "prediction": "p", "target": "new", "chart_type": "bar"}
    assert rows[1]["correct"] is False and rows[1]["missing"] is True
    (tmp_path / "sub").mkdir()
    _chart(tmp_path / "sub" / "x.png", "red")
    assert html_report.find_image({"id": "sub/x"}, [str(tmp_path)]) == str(tmp_path / "sub/x.png")
    assert html_report.find_image({"id": "nope"}, [str(tmp_path)]) is None


def test_long_splits_are_cut_with_a_note(tmp_path):
    obj = report.build_metrics(task="t", split="s", step=1, num_examples=5, metrics={})
    rows = [{"id": str(i), "prediction": "p"} for i in range(5)]
    text = open(html_report.write_report(tmp_path / "r.html", obj, rows, max_rows=2)).read()
    assert text.count('data-match="none"') == 2 and "the first 2 of 5" in text
    json.dumps(obj)  # the metrics object itself is untouched


def test_score_cli_report_with_thumbnails_from_images(tmp_path):
    from chartjax.metrics import prediction_files
    from chartjax.tools import score

    (tmp_path / "img" / "3").mkdir(parents=True)
    _chart(tmp_path / "img" / "3" / "0.png", "red")
    preds = tmp_path / "p.jsonl"
    refs = tmp_path / "r.jsonl"
    prediction_files.write_jsonl(preds, [{"id": "3/0", "prediction": 1}])
    prediction_files.write_jsonl(
        refs,
        [
            {"id": "3/0", "target": 1, "figure_type": "pie"},
            {"id": "3/1", "target": 0, "figure_type": "pie"},
        ],
    )
    out = tmp_path / "out" / "metrics.json"
    out.parent.mkdir()
    args = ["--task", "figureqa", "--predictions", str(preds), "--references", str(refs)]
    args += ["--out", str(out), "--allow_missing", "--images", str(tmp_path / "img"), "--report"]
    assert score.main(args) == 0
    text = (out.parent / "report.html").read_text()
    assert re.findall(r'data-match="(\w+)"', text) == ["ok", "wrong"]  # the missing one is wrong
    # the one thumbnail and the breakdown plot (metrics.png), both inline
    assert text.count("data:image/png;base64,") == 2 and 'src="metrics.png"' not in text
    assert score.main([*args[:-1], "--report", str(tmp_path / "elsewhere.html")]) == 0
    assert (tmp_path / "elsewhere.html").exists()


# ---------------------------------------------------------------- task views (issue 27 item 9)


def _figureqa_rows():
    return [
        {"id": "6/0", "input": "Is Red the maximum?", "prediction": 1, "target": 1},
        {"id": "6/1", "input": "Is Navy less than Red?", "prediction": "No.", "target": 1},
        {"id": "7/0", "input": "Is Teal the roughest?", "prediction": 0},
    ]


def test_figureqa_report_shows_figures_templates_and_yes_no(tmp_path):
    from chartjax.tasks.core import report_views
    from chartjax.tasks.figureqa import TEMPLATES

    figures = tmp_path / "png"
    figures.mkdir()
    _chart(figures / "6.png", "red")  # the release's png/<image_index>.png
    rows = _figureqa_rows()
    for row, qid in zip(rows, (1, 2, 9)):
        row.update(question_id=qid, figure_type="vbar_categorical")
    obj = report.build_metrics(
        task="figureqa",
        split="validation1",
        step=3,
        num_examples=2,
        metrics={"accuracy": 0.5},
        breakdowns={"question_template": {"1": {"accuracy": 1.0, "n": 1}}},
    )
    view = report_views.for_task("figureqa")
    path = html_report.write_report(
        tmp_path / "report.html",
        obj,
        rows,
        view=view,
        image_for=lambda row: html_report.find_image(row, [str(figures)], view),
    )
    text = open(path).read()
    body = text.split("<table id='examples'>")[1]
    # The figure of 6/0 and 6/1 (image 6), inlined; 7 has no file here.
    assert body.count("data:image/png;base64,") == 2 and 'alt="chart 7/0"' not in body
    # Answers as yes/no, compared as answers ("No." is no; 1 is yes).
    cells = re.findall(r"<td>(yes|no)</td>", body)
    assert cells == ["yes", "yes", "no", "yes", "no"]
    assert re.findall(r'data-match="(\w+)"', body) == ["ok", "wrong", "none"]
    # The template's text, under the question and in the breakdown.
    assert "template 2: Is X less than Y?" in body
    assert f"<td>1: {TEMPLATES[1].format(c1='X', c2='Y')}</td>" in text
    assert "question_id=" not in body and "figure_type=vbar_categorical" in body


def test_figureqa_view_reads_ids_and_answers():
    from chartjax.tasks.core import report_views

    view = report_views.FIGUREQA
    assert view.image_stem({"id": "6/27"}) == "6" and view.image_stem({"id": "x"}) is None
    assert [view.answer(v) for v in (0, 1, True, "Yes.", "maybe")] == [
        "no",
        "yes",
        "yes",
        "yes",
        "maybe",
    ]
    assert view.group_label("question_template", "14") == "14: Does X intersect Y?"
    assert view.group_label("figure_type", "pie") == "pie"
    assert view.details({"question_id": 99}) is None


def test_a_split_without_answers_is_reported_as_predictions_only(tmp_path):
    from chartjax.tasks.core import report_views

    obj = report.build_metrics(
        task="figureqa",
        split="no_annot_test1",
        step=2,
        num_examples=1,
        metrics={},
        unavailable={"accuracy": "split 'no_annot_test1' has no answers (stored as -1)"},
    )
    rows = [{"id": "0/0", "input": "Is Red the maximum?", "prediction": 1}]
    text = open(
        html_report.write_report(
            tmp_path / "r.html", obj, rows, view=report_views.for_task("figureqa")
        )
    ).read()
    assert "id='predictions-only'" in text and "no example has a target" in text
    assert "has no answers (stored as -1)" in text
    assert 'data-match="none"' in text and "<td>yes</td>" in text


def _wide_deplot_rows():
    header = ["Characteristic"] + [f"Share of respondents {y}" for y in range(2003, 2015)]
    target = linearize(header, [["United States of America", *map(str, range(12))]], title="T")
    small = linearize(["Year", "Sales"], [["2003", "40"]], title="Sales")
    return [
        {"id": "wide", "prediction": small, "target": target},
        {"id": "empty", "prediction": "", "target": small},
    ]


def test_deplot_tables_keep_words_whole_and_scroll_sideways(tmp_path):
    from chartjax.tasks.core import report_views

    obj = report.build_metrics(
        task="deplot", split="test", step=None, num_examples=2, metrics={"rms_f1": 0.5}
    )
    rows = _wide_deplot_rows()
    path = tmp_path / "report.html"
    html_report.write_report(path, obj, rows, view=report_views.for_task("deplot"))
    text = path.read_text()
    # The cells' style: never broken inside a word; each table in a box of its own that scrolls.
    # (#examples td's own rule, which let "2003" break into "20 03", is less specific.)
    cells = r"#examples table\.tbl td,#examples table\.tbl th\{[^}]*"
    assert re.search(cells + "white-space:nowrap", text)
    assert re.search(cells + "overflow-wrap:normal", text)
    assert re.search(r"\.scroll\{overflow-x:auto", text)
    assert text.count("<div class='scroll'><table class='tbl'>") == 3  # "" is no table
    probe = (
        "window.addEventListener('load',function(){"
        "var cells=document.querySelectorAll('table.tbl td, table.tbl th'), hi=0, lo=1e9;"
        "cells.forEach(function(c){var h=c.getBoundingClientRect().height;"
        "hi=Math.max(hi,h);lo=Math.min(lo,h);});"
        "var boxes=document.querySelectorAll('td.tables .scroll .scroll'), wide=0;"
        "boxes.forEach(function(b){if(b.scrollWidth>b.clientWidth+10){wide++;}});"
        "var td=document.querySelector('td.tables').getBoundingClientRect().width;"
        "document.body.setAttribute('data-probe',[hi,lo,wide,td,window.innerWidth].join(','));});"
    )
    dom = _run_chromium(tmp_path, _with_probe(path, probe), "--dump-dom")
    hi, lo, wide, td, window = map(float, re.search(r'data-probe="([^"]+)"', dom)[1].split(","))
    assert hi < 1.5 * lo  # every cell one line high: no word broken or wrapped
    assert wide >= 1  # the wide target table scrolls in its box
    assert td < window  # the examples table stays inside the page


def test_vacuous_rms_precision_is_marked_on_the_metric_and_the_row(tmp_path):
    from chartjax.tasks.core import report_views

    rows = _wide_deplot_rows()
    rows.append({"id": "gone", "prediction": "", "target": "a | b", "missing": True})
    obj = report.build_metrics(
        task="deplot",
        split="test",
        step=None,
        num_examples=3,
        metrics={"rms_precision": 0.6, "rms_recall": 0.1, "rms_f1": 0.1},
    )
    path = html_report.write_report(
        tmp_path / "r.html", obj, rows, view=report_views.for_task("deplot")
    )
    text = open(path).read()
    metrics = text.split('<table id="metrics">')[1].split("</table>")[0]
    precision = re.search(r"<td>rms_precision</td>(.*?)</tr>", metrics)[1]
    assert "vacuous for 1 of 3 examples" in precision and "zero predicted cells" in precision
    assert "vacuous" not in re.search(r"<td>rms_recall</td>(.*?)</tr>", metrics)[1]
    body = text.split("<table id='examples'>")[1]
    marked = [row for row in body.split("<tr ")[1:] if "vacuous:" in row]
    assert len(marked) == 1 and ">empty<" in marked[0]  # the missing one scores 0, not 1
    # Without the view (another task) nothing is marked.
    plain = open(html_report.write_report(tmp_path / "p.html", obj, rows)).read()
    assert "vacuous" not in plain.split("</style>")[1]


def test_a_copy_in_another_folder_is_whole(tmp_path, figureqa_report, monkeypatch):
    """The breakdown plot and the thumbnails past the inline cap were relative links, broken in
    a copy elsewhere (issue 44 item 19): every image of the copy paints in the browser."""
    path, rows = figureqa_report
    monkeypatch.setattr(html_report, "MAX_INLINE_THUMBNAILS", 2)  # the third row is past it
    obj = json.loads(json.dumps(report.build_metrics(task="figureqa", split="v", step=1,
                                                     num_examples=4, metrics={"accuracy": 0.5})))  # fmt: skip
    html_report.write_report(path, obj, rows, plots=[path.parent / "accuracy_by_group.png"])
    copy = tmp_path / "elsewhere" / "report.html"
    copy.parent.mkdir()
    shutil.copyfile(path, copy)
    text = copy.read_text()
    assert "(thumbnails for the first 2 rows with an image)" in text
    assert not re.search(r'src="(?!data:)', text)
    js = (
        "window.addEventListener('load',function(){var im=Array.from(document.images);"
        "document.body.setAttribute('data-painted',im.filter(function(i){"
        "return i.complete&&i.naturalWidth>0;}).length+'/'+im.length);});"
    )
    dom = _run_chromium(tmp_path, _with_probe(copy, js), "--dump-dom")
    assert re.search(r'data-painted="(\d+)/(\d+)"', dom).groups() == ("3", "3")  # plot + 2
