"""The core imports no UI library (ARCHITECTURE.md): checked in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

UI_MODULES = ("ipywidgets", "anywidget", "traitlets", "IPython", "plotly", "tqdm", "pandas")


def test_core_import_loads_no_ui_module() -> None:
    code = (
        "import sys, json, ortlab; "
        f"print(json.dumps([m for m in {UI_MODULES!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
