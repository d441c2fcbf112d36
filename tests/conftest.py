"""Shared fixtures: an isolated cache directory and the registry of tiny test models."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# Isolate ortlab's cache before ortlab is imported anywhere (the worker inherits it).
_CACHE = Path(tempfile.mkdtemp(prefix="ortlab-test-cache-"))
os.environ["ORTLAB_CACHE_DIR"] = str(_CACHE)
os.environ.setdefault("ORTLAB_TIMEOUT_S", "600")

import ortlab  # noqa: E402
from tests import models as registry  # noqa: E402

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def resnet50() -> ortlab.Model:
    return ortlab.examples.load("resnet50")


@pytest.fixture(scope="session")
def bert_tiny() -> ortlab.Model:
    return ortlab.examples.load("bert_tiny")


@pytest.fixture(scope="session")
def mlp() -> ortlab.Model:
    return ortlab.examples.load("mlp")


@pytest.fixture
def models() -> object:
    return registry


@pytest.fixture
def in_tmp_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in an empty working directory (to check nothing is written to it)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


MARKERS = ("ui", "notebook", "corpus", "pypi", "slow")
"""The markers a test's time is summed under: its first of these, else "no marker"."""
_SECONDS: dict[str, float] = {}
_COUNTS: dict[str, int] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Sum each test's setup, call and teardown under its marker (in pytest-xdist's
    controller too: its reports carry the test's keywords)."""
    marker = next((m for m in MARKERS if m in report.keywords), "no marker")
    _SECONDS[marker] = _SECONDS.get(marker, 0.0) + report.duration
    if report.when == "call":
        _COUNTS[marker] = _COUNTS.get(marker, 0) + 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The time per marker, after the slowest tests (summed test time: with two processes it
    is more than the wall-clock time)."""
    if not _SECONDS or hasattr(terminalreporter.config, "workerinput"):
        return
    terminalreporter.write_sep("=", "test time per marker (a test under its first marker)")
    for marker in (*MARKERS, "no marker"):
        if marker in _SECONDS:
            terminalreporter.write_line(
                f"{marker:>10}: {_SECONDS[marker]:8.1f} s in {_COUNTS.get(marker, 0)} tests"
            )
    terminalreporter.write_line(f"{'all':>10}: {sum(_SECONDS.values()):8.1f} s")


def pytest_unconfigure(config: pytest.Config) -> None:  # noqa: ARG001 - pytest's hook signature
    """Remove the run's cache (~2.5 GB of variants, optimized models and profiles), once the
    worker that writes into it has stopped. ORTLAB_KEEP_TEST_CACHE=1 keeps it for a look."""
    import shutil

    from ortlab.engine.worker import get_worker

    get_worker().stop()
    if os.environ.get("ORTLAB_KEEP_TEST_CACHE") != "1":
        shutil.rmtree(_CACHE, ignore_errors=True)
