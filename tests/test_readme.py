"""The README's examples run as written, so the README cannot drift from the code.

Every ```python block runs, in order, in one namespace (the tour's ``m``, ``p`` and ``opt`` are
the graph section's), and every line of the shell block runs as a command, in a temporary
working directory that holds the README's placeholder files: ``model.onnx`` (a bundled model
with a symbolic batch dim) and ``feeds.npz`` (its inputs). Only sizes change, and only those
listed in ``SCALED``: a bundled CNN that runs in 2 ms instead of ResNet-50, shorter doctor
budgets; the calls, arguments and order are the README's. A warning from ortlab other than a
provider that did not load (the README asks for CUDA on purpose) fails the test: a README line
that passes dims a model lacks, say, is caught here.

Not run: the first block (``./run``, ``./run-tests``: the test command itself) and the install
block (``pip install``: it would change the environment running the tests)."""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import ortlab
from ortlab.core.errors import OrtlabWarning, ProviderFallbackWarning
from tests import pypi

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[1] / "README.md"
SMALL = "squeezenet"
"""The bundled CNN standing in for ResNet-50 (same kind: an ONNX Model Zoo architecture)."""

SCALED = [  # (README text, what runs here): sizes only
    ('"resnet50"', f'"{SMALL}"'),
    ("ortlab inspect resnet50", f"ortlab inspect {SMALL}"),
    (" resnet50 ", f" {SMALL} "),
    ("resnet50_int8.onnx", f"{SMALL}_int8.onnx"),
    ("budget_s=120", "budget_s=15"),
    ("--budget 60", "--budget 15"),
    ("-o report.html", "-o report.html --budget 10"),
]


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def _scaled(code: str) -> str:
    for text, here in SCALED:
        code = code.replace(text, here)
    return code


@pytest.fixture
def placeholders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with the README's model.onnx (a model with a symbolic batch dim, as
    the README's dims= lines assume) and feeds.npz."""
    m = ortlab.examples.load("mlp")
    shutil.copy(m.path, tmp_path / "model.onnx")
    np.savez(tmp_path / "feeds.npz", **m.example_inputs(seed=0))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ORTLAB_LAB_SYNC", "1")  # the Lab's runs finish before the next line
    return tmp_path


def test_the_readme_names_its_blocks() -> None:
    """The blocks this test runs are the ones it says: if the README grows a block, this test
    is where it gets run."""
    assert len(_blocks("python")) == 9
    bash = _blocks("bash")
    assert bash[0].startswith("./run") and bash[1].startswith("pip install") and len(bash) == 3


def test_the_python_examples_run(placeholders: Path) -> None:
    namespace: dict[str, object] = {"__name__": "readme"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrtlabWarning)
        warnings.simplefilter("ignore", ProviderFallbackWarning)  # asked for on purpose
        for i, block in enumerate(_blocks("python")):
            code = _scaled(block)
            try:
                exec(compile(code, f"README.md python block {i + 1}", "exec"), namespace)
            except Exception as err:
                raise AssertionError(f"README python block {i + 1} failed: {err!r}") from err
    # what the tour's lines promise, checked on what they returned
    b, p, d = namespace["b"], namespace["p"], namespace["d"]
    assert isinstance(b, ortlab.BenchmarkResult) and b.stats.count == 200
    assert isinstance(p, ortlab.ProfileResult) and p.runs == 20
    assert isinstance(d, ortlab.DoctorResult)
    lb = namespace["lb"]
    assert isinstance(lb, ortlab.LLMBenchResult) and len(lb.rows) == 6
    assert (placeholders / "report.html").stat().st_size > 0  # the doctor block's report
    assert sorted(x.name for x in placeholders.iterdir()) == [
        "error.json",  # the divergence block's Model Explorer node data
        "feeds.npz",
        "graph.html",
        "lab.html",
        "model.onnx",
        "report.html",
        "trace.json",
    ]
    trace = json.loads((placeholders / "trace.json").read_text(encoding="utf-8"))
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "node"]
    assert len(slices) == len(p.data.ev_node)  # every profiled event, once


def test_the_shell_examples_run(placeholders: Path) -> None:
    cli = Path(sys.executable).with_name("ortlab")
    env = {**os.environ, "PATH": f"{cli.parent}{os.pathsep}{os.environ['PATH']}"}
    env["ORTLAB_VENV_DIR"] = str(pypi.folder())  # the upgrade line's two versions
    for line in _blocks("bash")[2].splitlines():
        command = _scaled(line.split("  #")[0].split(" #")[0]).strip()
        if not command:
            continue
        done = subprocess.run(
            shlex.split(command), env=env, capture_output=True, text=True, timeout=600, check=False
        )
        assert done.returncode == 0, f"{command!r}: exit {done.returncode}\n{done.stderr[-2000:]}"
        assert "Traceback" not in done.stderr, command
    assert (placeholders / f"{SMALL}_int8.onnx").exists()
    # the first report a person opens: no [nan, nan] interval, no cache file's name for a model
    page = (placeholders / "report.html").read_text(encoding="utf-8")
    visible = re.sub(r"<[^>]+>", " ", re.sub(r"<script.*?</script>", "", page, flags=re.S))
    text = html.unescape(visible)
    assert not re.search(r"\bnan\b", text, flags=re.I), "an interval or ratio reads nan"
    assert "-s0-v3-" not in text, "a bundled model's cache file name shown as its name"
