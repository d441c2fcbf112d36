"""The graph widget in Voila (a notebook as a standalone page, as workshops use it), offline."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.ui.lab import offline_page, voila, write_notebook

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
        context, page, errors = offline_page(browser, 1200, 800)
        page.goto(url, timeout=120_000)
        status = page.locator(".ortlab-status", has_text="layout")
        status.wait_for(timeout=120_000)
        assert "9 nodes" in status.text_content()
        page.screenshot(path=str(artifacts / "voila_graph_widget.png"))
        assert errors == []
        context.close()
