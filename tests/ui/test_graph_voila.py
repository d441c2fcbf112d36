"""The graph widget in Voila (a notebook as a standalone page, as workshops use it), offline."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.ui.lab import voila, write_notebook

pytestmark = [pytest.mark.ui, pytest.mark.slow]


def test_widget_renders_in_voila(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    nb = write_notebook(
        tmp_path / "graph.ipynb",
        [
            "import os, ortlab\n"
            f"os.environ['ORTLAB_CACHE_DIR'] = {os.environ['ORTLAB_CACHE_DIR']!r}\n"
            "ortlab.graph(ortlab.examples.load('nan_guard_cnn'))",
        ],
    )
    with voila(nb, tmp_path / "home") as url:
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        page = context.new_page()
        # offline: anything not on this machine is refused (Voila links two icon fonts)
        page.route(
            "**/*",
            lambda r: (
                r.continue_()
                if "127.0.0.1" in r.request.url or r.request.url.startswith(("blob:", "data:"))
                else r.abort()
            ),
        )
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url, timeout=120_000)
        status = page.locator(".ortlab-status", has_text="layout")
        status.wait_for(timeout=120_000)
        assert "9 nodes" in status.text_content()
        page.screenshot(path=str(artifacts / "voila_graph_widget.png"))
        assert errors == []
        context.close()
