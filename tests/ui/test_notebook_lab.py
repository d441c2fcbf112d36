"""The LLM notebook (08) in a real JupyterLab, run all twice as a workshop does: every cell
runs without an error output, its widgets render (the merged GPT-2's graph) and the page
logs no error: no "widget model not found" from a view whose model a cell closed (issue 48)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.ui.lab import jupyterlab, run_all, wait_idle

pytestmark = [pytest.mark.ui, pytest.mark.notebook, pytest.mark.slow]

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "08_why_is_my_llm_slow.ipynb"


CELLS = """() => {
  const model = window.jupyterapp.shell.currentWidget.content.model;
  const code = [];
  for (let i = 0; i < model.cells.length; i++) {
    const c = model.cells.get(i);
    if (c.type === "code") code.push({n: c.executionCount, out: c.outputs.toJSON()});
  }
  return code;
}"""
"""The notebook's code cells from its model (JupyterLab renders only the cells in view)."""


def _run_all_and_wait(page: Any) -> list[dict[str, Any]]:
    run_all(page)
    page.wait_for_function(f"() => ({CELLS})().every(c => c.n !== null)", timeout=600_000)
    wait_idle(page, timeout=600_000)
    cells: list[dict[str, Any]] = page.evaluate(CELLS)
    return cells


def test_llm_notebook_runs_all_twice_without_errors(
    browser: Any, tmp_path: Path, artifacts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORTLAB_NOTEBOOK_FAST", "1")  # the kernel inherits it
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
    with jupyterlab(root, tmp_path / "home") as handle:
        base, token = handle.split("|")
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        logged: list[str] = []
        page.on(
            "console",
            lambda m: logged.append(m.text) if m.type in ("error", "warning") else None,
        )
        page.on("pageerror", lambda e: logged.append(str(e)))
        page.goto(f"{base}/lab/tree/{NOTEBOOK.name}?token={token}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        for _ in range(2):  # a second Run All replaces every output, widgets included
            page.evaluate("window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
            cells = _run_all_and_wait(page)
            assert len(cells) >= 10
            errors = [o for c in cells for o in c["out"] if o["output_type"] == "error"]
            assert errors == [], errors[0]["ename"] + ": " + errors[0]["evalue"]
            graph = page.locator(".ortlab-status", has_text="layout")
            graph.first.wait_for(timeout=120_000)
        text = page.inner_text(".jp-Notebook")
        assert "encoder" in text and "decode" in text  # the Whisper section's phases
        page.screenshot(path=str(artifacts / "lab_notebook_08.png"))
        assert [m for m in logged if "model not found" in m.lower()] == []
        assert logged == []
        context.close()
