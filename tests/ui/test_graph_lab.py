"""The graph widget inside a real JupyterLab: it renders, a click in the page reaches Python
(g.selected), Python drives the view (colour mode), hostile names stay text."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.ui.lab import jupyterlab, run_all, wait_idle, write_notebook

pytestmark = [pytest.mark.ui, pytest.mark.slow]

CELLS = [
    "import os, ortlab\n"
    f"os.environ['ORTLAB_CACHE_DIR'] = {os.environ['ORTLAB_CACHE_DIR']!r}\n"
    "m = ortlab.examples.load('nan_guard_cnn')\n"
    "m.proto.graph.node[2].name  # a name we will look for",
    "import onnx\n"
    "p = onnx.load(str(m.path)); p.graph.node[4].name = '<img src=x onerror=alert(1)>'\n"
    "h = ortlab.load(p)\n"
    "g = ortlab.graph(h)\n"
    "g",
    "print('SELECTED=' + g.selected.get('name', 'NONE'))",
    "print('COLOR=' + g.color_by)",
    "g.color_by = 'op_type'",
]


def test_widget_in_jupyterlab(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    write_notebook(root / "graph.ipynb", CELLS)
    with jupyterlab(root, tmp_path / "home") as handle:
        base, token = handle.split("|")
        context = browser.new_context(viewport={"width": 1300, "height": 900})
        page = context.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(f"{base}/lab/tree/graph.ipynb?token={token}")
        run_all(page)
        status = page.locator(".ortlab-status", has_text="layout")
        status.wait_for(timeout=90_000)
        assert "9 nodes" in status.text_content()
        canvas = page.locator(".ortlab-canvas")
        canvas.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "lab_graph_widget.png"))
        # hover the hostile node: its name is shown as text, no image element appears
        box = canvas.bounding_box()
        hit = None
        for dy in range(10, int(box["height"]) - 10, 12):
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + dy)
            tip = page.locator(".ortlab-tooltip")
            if tip.is_visible() and "<img src=x" in (tip.text_content() or ""):
                hit = (box["x"] + box["width"] / 2, box["y"] + dy)
                break
        assert hit is not None, "the hostile node is shown, by name, in the tooltip"
        assert page.locator(".ortlab-tooltip img").count() == 0
        page.mouse.click(*hit)
        wait_idle(page)
        # Python sees the click: re-run the cell that prints g.selected
        page.locator(".jp-Notebook .jp-Cell").nth(2).locator(".jp-InputPrompt").click()
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-cell')")
        wait_idle(page)
        out = page.locator(".jp-OutputArea-output", has_text="SELECTED=<img")
        out.wait_for(timeout=30_000)
        assert "SELECTED=<img src=x onerror=alert(1)>" in out.last.text_content()
        # the colour menu in the page changes the trait in Python ...
        page.locator(".ortlab-color-by").select_option("time")
        wait_idle(page)
        page.locator(".jp-Notebook .jp-Cell").nth(3).locator(".jp-InputPrompt").click()
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-cell')")
        page.locator(".jp-OutputArea-output", has_text="COLOR=time").wait_for(timeout=30_000)
        # ... and Python changes the page
        page.locator(".jp-Notebook .jp-Cell").nth(4).locator(".jp-InputPrompt").click()
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-cell')")
        wait_idle(page)
        page.wait_for_function(
            "() => document.querySelector('.ortlab-color-by').value === 'op_type'",
            timeout=30_000,
        )
        assert dialogs == [], "no script from a model string ran"
        context.close()
