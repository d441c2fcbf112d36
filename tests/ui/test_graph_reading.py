"""Can a newcomer read the graph view? Checked in headless Chromium on a real export without
name scopes (Paddle's PicoDet: ``p2o.*`` names, 878 Constant nodes) and on a 10,000-node chain
whose every node reads one broadcast tensor:

- the first picture: no item holds more than a quarter of the model, at most ~60 items, and
  the browser draws exactly the items ``overview()`` lists;
- Constant nodes are folded into their consumers (typed in the consumer's details);
- labels at the first fit are drawn at 10 px or more (hidden, never shrunk);
- a click opens a details panel with the node's attributes, inputs with shapes, EP and why;
- a node selected from Python inside a collapsed group is opened, centred and detailed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import ortlab
from tests import corpus, models

pytestmark = pytest.mark.ui


def _open(page: Any, path: Path) -> str:
    page.goto(path.as_uri())
    status = page.locator(".ortlab-status", has_text="layout")
    status.wait_for(timeout=60_000)
    return str(status.text_content())


def _shown(status: str) -> int:
    return int(status.split(" shown", maxsplit=1)[0].rsplit("· ", 1)[1])


def _check_first_picture(page: Any, view: Any, path: Path) -> None:
    ov = view.overview()
    total = len(view.graph_data.nodes)
    assert ov["nodes"].sum() == total
    assert ov["nodes"].max() <= total / 4, ov.sort_values("nodes").tail(3)
    assert len(ov[ov["kind"].isin(["group", "node"])]) <= 66, len(ov)
    status = _open(page, path)
    assert _shown(status) == len(ov), (status, len(ov))
    el = page.locator(".ortlab-graph")
    assert int(el.get_attribute("data-labels") or 0) > 0, "labels are drawn at the first fit"
    assert float(el.get_attribute("data-min-label-px") or 0) >= 10
    assert page.errors == []


def test_paddle_export_without_scopes_reads(page: Any, tmp_path: Path, artifacts: Path) -> None:
    m = corpus.load("picodet_layout")
    view = ortlab.graph(m)
    g = view.graph_data
    assert not any(n.op_type == "Constant" for n in g.nodes), "constants folded"
    folded = [t for t, ty in g.tensors.items() if ty.endswith("(constant)")]
    assert len(folded) == sum(1 for n in m.proto.graph.node if n.op_type == "Constant")
    _check_first_picture(page, view, view.to_html(tmp_path / "picodet.html"))
    page.screenshot(path=str(artifacts / "graph_picodet_first_picture.png"))


def test_a_tall_chain_of_blocks_is_folded_into_columns_that_fit(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    """The PP-OCRv4 recognizer without scopes is a chain of ~24 blocks: drawn as one column,
    "fit" showed its top third at 1280x800. Folded into columns where the chain is narrow,
    every item of the first picture is wholly on the canvas with its label at 10 px or more,
    and every edge still joins its two items (folds move nodes, not the graph)."""
    view = ortlab.graph(corpus.load("ppocrv4_rec"))
    path = view.to_html(tmp_path / "rec.html")
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        status = _open(page, path)
        el = page.locator(".ortlab-graph")
        shown = _shown(status)
        assert shown >= 20, status
        assert int(el.get_attribute("data-columns") or 1) >= 2
        assert int(el.get_attribute("data-on-screen") or 0) == shown, status
        assert int(el.get_attribute("data-labels") or 0) == shown
        assert float(el.get_attribute("data-min-label-px") or 0) >= 10
        page.screenshot(path=str(artifacts / "graph_ocr_chain_folded_1280x800.png"))
    finally:
        context.close()


def test_broadcast_chain_is_cut_into_blocks(page: Any, tmp_path: Path) -> None:
    view = ortlab.graph(ortlab.load(models.broadcast_chain()))
    _check_first_picture(page, view, view.to_html(tmp_path / "chain.html"))


_ROWS = """(panel) => {
    const out = {}; let title = "";
    for (const el of panel.children) {
        if (el.tagName === "DIV") { title = el.textContent; out[title] = out[title] || []; }
        else out[title].push(...[...el.rows].map((r) => [...r.cells].map((c) => c.textContent)));
    }
    return out;
}"""


def test_click_opens_details_with_attributes(page: Any, tmp_path: Path) -> None:
    from tests.test_placement import _replay

    m = ortlab.examples.load("nan_guard_cnn")
    pl = _replay({"/sanitize/IsNaN": "refused"})
    _open(page, ortlab.graph(m, placement=pl).to_html(tmp_path / "g.html"))
    cases = (
        ("/features/0/Conv", ("pads", "[1, 1, 1, 1]")),
        ("/sanitize/IsNaN", ("why here", "op not supported: IsNaN")),
    )
    for name, expected in cases:
        page.fill(".ortlab-search", name)
        page.press(".ortlab-search", "Enter")  # centres it
        box = page.locator(".ortlab-canvas").bounding_box()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        details = page.locator(".ortlab-details")
        details.wait_for(state="visible", timeout=5_000)
        assert details.get_attribute("data-node") == name
        rows = details.evaluate(_ROWS)  # the panel's tables: section -> [[key, value]]
        key, value = expected
        assert any(
            k == key and v.startswith(value)
            for k, v in rows.get("attributes", []) + rows["placement"]
        ), rows
        assert rows["placement"][0][0] == "EP" and rows["placement"][0][1].endswith("Provider")
        assert any(re.fullmatch(r"float\[.*\]", v) for _, v in rows["inputs"]), rows["inputs"]
    page.locator(".ortlab-graph").press("Escape")
    page.locator(".ortlab-details").wait_for(state="hidden", timeout=5_000)
    assert page.errors == []


def test_selected_from_python_opens_its_group(page: Any, tmp_path: Path) -> None:
    view = ortlab.graph(ortlab.load(models.broadcast_chain(2_000)))
    target = "add_1234"
    assert target not in set(view.overview()["name"]), "starts inside a collapsed block"
    view.select(target)
    with pytest.raises(KeyError, match="did you mean"):
        view.select("add_12345")
    first = len(view.overview())
    _open(page, view.to_html(tmp_path / "sel.html"))
    details = page.locator(".ortlab-details")
    details.wait_for(state="visible", timeout=10_000)
    assert details.get_attribute("data-node") == target
    page.wait_for_function(  # its block was opened: more items than the first picture
        """(n) => { const m = /· (\\d+) shown/.exec(
                      document.querySelector('.ortlab-status').textContent);
                    return m && +m[1] > n; }""",
        arg=first,
        timeout=30_000,
    )
    assert page.errors == []
