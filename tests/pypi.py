"""The onnxruntime versions the tests install from PyPI (``version_diff``, ``ortlab run
--onnxruntime``): their virtual environments go to ``$ORTLAB_VENV_DIR``, here a folder of the
system's temp dir that outlives the test run, so later runs reuse them (~20 MB per onnxruntime
wheel). Without PyPI a test that installs is skipped with the reason; under CI=true it fails
instead (a skip would hide a broken install)."""

from __future__ import annotations

import os
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ortlab.engine import venvs

A, B = "1.31.1", "1.32.0"


def folder() -> Path:
    """The tests' shared folder of environments (``$ORTLAB_VENV_DIR`` where set)."""
    return Path(
        os.environ.get("ORTLAB_VENV_DIR") or Path(tempfile.gettempdir()) / "ortlab-test-venvs"
    )


def venv_folder() -> Iterator[Path]:
    """(a fixture's body) ``$ORTLAB_VENV_DIR`` set to the tests' shared folder meanwhile."""
    folder_ = folder()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ORTLAB_VENV_DIR", str(folder_))
        yield folder_


def need(*versions: str) -> None:
    """Skip (fail under CI) when a version is not built here and PyPI cannot be reached."""
    if all(venvs.installed(v) for v in versions):
        return
    try:
        urllib.request.urlopen("https://pypi.org/simple/onnxruntime/", timeout=10).close()
    except OSError as err:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"PyPI is not reachable from here ({err}): cannot install onnxruntime")
