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
    assert 'src="accuracy_by_group.png"' in text  # the plot beside it, by relative path
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
    assert text.count("data:image/png;base64,") == 1 and 'src="metrics.png"' in text
    assert score.main([*args[:-1], "--report", str(tmp_path / "elsewhere.html")]) == 0
    assert (tmp_path / "elsewhere.html").exists()
