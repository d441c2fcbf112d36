"""The HTML report in headless Chromium, with its own Content-Security-Policy in force: the page
renders, the plotly charts draw, model strings show as text and no script from them runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ortlab
from tests import models

pytestmark = pytest.mark.ui

HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


def test_report_renders_charts_and_keeps_model_strings_inert(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    proto = models.add([1, 4])
    proto.graph.node[0].name = HOSTILE
    m = ortlab.load(proto, name="hostile</title><script>alert(3)</script>")
    d = ortlab.doctor(m, {"level": "basic"}, budget_s=6, quantize=False, progress=False)
    path = ortlab.report(m, d, path=tmp_path / "report.html")

    context = browser.new_context(viewport={"width": 1200, "height": 900})  # CSP enforced
    page = context.new_page()
    dialogs: list[str] = []
    errors: list[str] = []
    requests: list[str] = []
    page.on("dialog", lambda dlg: (dialogs.append(dlg.message), dlg.dismiss()))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_function(
        "document.querySelectorAll('.js-plotly-plot .main-svg').length >= 6", timeout=60_000
    )
    charts = page.locator(".js-plotly-plot").count()
    graph = page.locator(".ortlab-status", has_text="layout")  # the embedded graph view, laid
    graph.wait_for(timeout=60_000)  # out under the report's own CSP (blob: modules and worker)
    assert "1 nodes" in str(graph.text_content())
    assert page.locator(".ortlab-graph").get_attribute("data-labels") not in (None, "0")
    page.screenshot(path=str(artifacts / "report_top.png"))
    page.locator("h2", has_text="Profile").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "report_profile.png"))
    context.close()

    assert charts >= 6  # doctor x3, levels, op types, sunburst, timeline
    assert dialogs == [] and errors == []
    assert [u for u in requests if not u.startswith(("file:", "blob:"))] == [], "no network"
    text = path.read_text()
    assert "graph optimization level is &#x27;basic&#x27;" in text  # the doctor's finding
    assert HOSTILE not in text and "<script>alert(3)" not in text


# JupyterLab's rules for a rendered output's tables (its jp-RenderedHTMLCommon), which the Lab's
# tabs render ortlab's tables under: fixed layout, 13 px, half an em of padding
_JUPYTERLAB_TABLES = (
    ".jp-RenderedHTMLCommon table{border-collapse:collapse;font-size:13px;table-layout:fixed}"
    ".jp-RenderedHTMLCommon td,.jp-RenderedHTMLCommon th{padding:.5em;white-space:normal;"
    "max-width:none;text-align:right}"
)


def test_a_table_never_widens_the_box_it_is_shown_in(page: Any, tmp_path: Path) -> None:
    """A roofline's slowest nodes with long names and a raised ceiling's note (the Lab's
    Limits tab at 1280x800 once showed a sideways scrollbar when a busy moment raised a
    ceiling): in a box narrower than the table's words, cells break where they must and the
    table stays inside the box, at ortlab's rules and under JupyterLab's."""
    from ortlab.views.html import STYLE, table_html

    name = "/model.22/cv3.2/cv3.2.0/conv/Conv_output_0_nchwc_MatmulTransposeFusion"
    rows = [
        [name + str(k), "FusedMatMulNBitsQuantized", 12.5 * k, "45.1 GFLOP/s"] for k in range(8)
    ]
    rows.append(["fp32 ceiling", f"reached by node {name}_Unbreakable0123456789", 1.0, ""])
    table = table_html(["node", "op", "time µs", "achieved"], rows)
    for rules in ("", _JUPYTERLAB_TABLES):
        html = f"<style>{rules}</style>{STYLE}<div id=box class=jp-RenderedHTMLCommon "
        html += f'style="width:320px;overflow-x:auto">{table}</div>'
        (tmp_path / "t.html").write_text(html, encoding="utf-8")
        page.goto((tmp_path / "t.html").as_uri())
        wide, room = page.evaluate(
            "() => { const b = document.getElementById('box');"
            " return [b.scrollWidth, b.clientWidth]; }"
        )
        assert wide <= room + 1, (rules[:20] or "ortlab's rules", wide, room)
