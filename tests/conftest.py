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


def pytest_unconfigure(config: pytest.Config) -> None:  # noqa: ARG001 - pytest's hook signature
    """Remove the run's cache (~2.5 GB of variants, optimized models and profiles), once the
    worker that writes into it has stopped. ORTLAB_KEEP_TEST_CACHE=1 keeps it for a look."""
    import shutil

    from ortlab.engine.worker import get_worker

    get_worker().stop()
    if os.environ.get("ORTLAB_KEEP_TEST_CACHE") != "1":
        shutil.rmtree(_CACHE, ignore_errors=True)
