"""The Lab end to end in JupyterLab: the tour notebook runs, the Lab's first run lands,
changing the optimization level in the page re-runs it, and Python agrees."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.ui.lab import (
    jupyterlab,
    no_console_errors,
    open_lab,
    run_all,
    wait_idle,
    write_notebook,
)

pytestmark = [pytest.mark.ui, pytest.mark.slow]
TOUR = Path(__file__).resolve().parents[2] / "notebooks" / "00_tour.ipynb"


def _wait_for_row(page: Any, label: str) -> None:
    """Until a table in the Lab (the History tab) shows a run labelled ``label``."""
    page.wait_for_function(
        "label => [...document.querySelectorAll('.ortlab-lab table')].some("
        "t => t.innerText.includes(label))",
        arg=label,
        timeout=180_000,
    )


def test_tour_lab_reruns_on_a_toggle(browser: Any, tmp_path: Path, artifacts: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    nb = json.loads(TOUR.read_text())
    nb["cells"].insert(
        0,
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": f"import os; os.environ['ORTLAB_CACHE_DIR'] = "
            f"{os.environ['ORTLAB_CACHE_DIR']!r}",
        },
    )
    nb["cells"].append(
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "print('RUNS=%d LEVEL=%s' % (len(lab.history), lab.config.level))",
        }
    )
    (root / "tour.ipynb").write_text(json.dumps(nb))
    with jupyterlab(root, tmp_path / "home") as handle:
        base, token = handle.split("|")
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.console_errors = []
        page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
        page.on("pageerror", lambda e: page.console_errors.append(str(e)))
        page.goto(f"{base}/lab/tree/tour.ipynb?token={token}")
        run_all(page)
        lab = page.locator(".ortlab-lab")
        lab.wait_for(timeout=120_000)
        # the first run lands: History (tabs render when shown) has run 1
        page.locator(".ortlab-lab .lm-TabBar-tab", has_text="History").click()
        _wait_for_row(page, "cpu · all")
        page.screenshot(path=str(artifacts / "lab_first_run.png"))
        page.locator(".ortlab-level select").select_option("disabled")
        # wait for the second run: the progress bar returns to idle after a benchmark
        _wait_for_row(page, "cpu · disabled")
        wait_idle(page)
        # the charts were redrawn for the new run: the latency chart names its config
        page.locator(".ortlab-lab .lm-TabBar-tab", has_text="Benchmark").click()
        page.wait_for_function(
            "() => [...document.querySelectorAll('.ortlab-lab .js-plotly-plot .gtitle')].some("
            "t => t.textContent.includes('cpu · disabled'))",
            timeout=60_000,
        )
        page.locator(".jp-Notebook .jp-Cell").last.locator(".jp-InputPrompt").click()
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-cell')")
        out = page.locator(".jp-OutputArea-output", has_text="RUNS=")
        out.wait_for(timeout=60_000)
        assert "RUNS=2 LEVEL=disabled" in out.last.text_content()
        page.screenshot(path=str(artifacts / "lab_after_toggle.png"))
        no_console_errors(page)
        context.close()


OPENVINO_PY = Path(__file__).resolve().parents[2] / ".venv-openvino" / "bin" / "python"


def test_lab_switches_execution_provider_in_the_page(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    """A kernel from .venv-openvino (scripts/bootstrap-openvino.sh), where OpenVINO really
    loads: ticking it in the Lab re-runs on OpenVINO + CPU, the Placement tab shows the split
    and Python agrees."""
    if not OPENVINO_PY.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(".venv-openvino is missing: ./run-tests creates it before this test")
        pytest.skip(".venv-openvino is missing (scripts/bootstrap-openvino.sh)")
    root, data = tmp_path / "root", tmp_path / "data"
    spec = data / "kernels" / "ortlab-openvino"
    spec.mkdir(parents=True)
    root.mkdir()
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(OPENVINO_PY), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "ortlab (OpenVINO)",
                "language": "python",
            }
        )
    )
    cells = [
        f"import os; os.environ['ORTLAB_CACHE_DIR'] = {os.environ['ORTLAB_CACHE_DIR']!r}",
        "import ortlab\nlab = ortlab.Lab(ortlab.examples.load('nan_guard_cnn'), runs=10)\nlab",
        "print('EPS=%s RUNS=%d' % ('+'.join(lab.config.providers), len(lab.history)))\n"
        "print('SPLIT=%s' % (lab.placement and lab.placement.summary()['provider'].tolist()))",
    ]
    nb = write_notebook(root / "ov.ipynb", cells)
    meta = json.loads(nb.read_text())
    kernel = {"name": "ortlab-openvino", "display_name": "ortlab (OpenVINO)", "language": "python"}
    meta["metadata"]["kernelspec"] = kernel
    nb.write_text(json.dumps(meta))
    with jupyterlab(root, tmp_path / "home", {"JUPYTER_PATH": str(data)}) as handle:
        context, page = open_lab(browser, handle, "ov.ipynb", 1400, 1000)
        page.locator(".ortlab-lab .lm-TabBar-tab", has_text="History").click()
        _wait_for_row(page, "cpu · all")
        box = page.locator(".ortlab-lab .widget-checkbox", has_text="openvino")
        assert box.locator("input").is_enabled(), "OpenVINO loads in this kernel"
        box.locator("input").check()
        _wait_for_row(page, "openvino+cpu · all")
        wait_idle(page)
        page.locator(".ortlab-lab .lm-TabBar-tab", has_text="Placement").click()
        page.screenshot(path=str(artifacts / "lab_openvino_placement.png"))
        placement_text = page.locator(".ortlab-lab").inner_text()
        page.locator(".jp-Notebook .jp-Cell").last.locator(".jp-InputPrompt").click()
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-cell')")
        out = page.locator(".jp-OutputArea-output", has_text="EPS=")
        out.wait_for(timeout=60_000)
        text = out.last.text_content()
        no_console_errors(page)
        context.close()
    assert "EPS=OpenVINOExecutionProvider+CPUExecutionProvider RUNS=2" in text
    assert "SPLIT=['OpenVINOExecutionProvider', 'CPUExecutionProvider']" in text
    assert "OpenVINOExecutionProvider" in placement_text
