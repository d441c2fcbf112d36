"""The notebooks (tour and workshops): stored without outputs, and each runs top to bottom.

Execution uses the notebooks' fast path (ORTLAB_NOTEBOOK_FAST=1: fewer rounds, no ResNet-50 in
the workshops) on a temporary copy with a temporary working directory, and checks that nothing
was written into notebooks/ or next to the copy."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from tests import pypi

pytestmark = pytest.mark.notebook

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
ALL = sorted(NOTEBOOKS.glob("*.ipynb"))
EXPECTED = {"00", "01", "02", "03", "04", "05", "06", "07", "08", "09"}


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


def test_every_notebook_is_here() -> None:
    assert {p.name[:2] for p in ALL} >= EXPECTED, [p.name for p in ALL]


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_stored_without_outputs(path: Path) -> None:
    book = json.loads(path.read_text(encoding="utf-8"))
    assert book["nbformat"] == 4
    assert book["metadata"]["kernelspec"]["name"] == "python3"
    dirty = [
        i
        for i, cell in enumerate(book["cells"])
        if cell["cell_type"] == "code" and (cell["outputs"] or cell["execution_count"] is not None)
    ]
    assert dirty == [], f"{path.name}: cells {dirty} keep outputs; clear them before committing"
    ids = [cell.get("id") for cell in book["cells"]]
    missing = [i for i, cell_id in enumerate(ids) if not cell_id]
    assert missing == [], f"{path.name}: cells {missing} have no id (nbformat 4.5 wants one)"
    assert len(set(ids)) == len(ids), f"{path.name}: cell ids repeat"


def _the_page_shows_the_lab_offline(book: object) -> None:
    """``./run --headless`` writes the executed tour as HTML without widget state: each Lab
    shows its static snapshot, which needs no network (the widgets' renderer comes from a CDN,
    so the page showed no Lab offline)."""
    from nbconvert import HTMLExporter

    html, _ = HTMLExporter().from_notebook_node(book)
    assert html.count("ortlab-lab-snapshot") == 1
    snapshot = html[html.index("ortlab-lab-snapshot") :]
    for shown in (
        "a static snapshot of the last run",
        "interval of the median run",
        "machine load",
        "CPUExecutionProvider",
        "Slowest nodes",
        "History",
    ):
        assert shown in snapshot, shown
    assert "<script" not in snapshot.split("</div></div>")[0]


def _the_history_cell_shows_the_first_run(copy: Path, work: Path) -> None:
    """'The same, as data' under Run All, with the Lab in the background as in a notebook: the
    history holds the Lab's first run (it showed an empty table: the run had not finished
    when the next cell read it). The tour's cells up to that one, run again."""
    import nbformat
    from nbclient import NotebookClient

    book = nbformat.read(copy, as_version=4)
    last = next(
        i for i, c in enumerate(book.cells) if c.cell_type == "code" and "lab.history" in c.source
    )
    book.cells = book.cells[: last + 1]
    NotebookClient(book, timeout=600, resources={"metadata": {"path": str(work)}}).execute()
    shown = "".join(str(o.get("data", {}).get("text/plain", "")) for o in book.cells[-1].outputs)
    assert "Empty DataFrame" not in shown and "\n0 " in "\n" + shown.split("\n", 1)[-1], shown


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_notebook_runs(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    import nbformat
    from nbclient import NotebookClient

    # the kernel inherits the environment: the fast path, the Lab without a background thread,
    # and the session's isolated ORTLAB_CACHE_DIR (tests/conftest.py)
    monkeypatch.setenv("ORTLAB_NOTEBOOK_FAST", "1")
    monkeypatch.setenv("ORTLAB_LAB_SYNC", "1")
    # onnxruntime versions from PyPI (09's upgrade): the tests' shared environments
    monkeypatch.setenv("ORTLAB_VENV_DIR", str(pypi.folder()))
    tour = path.name.startswith("00")
    # what a notebook writes on purpose (05's report goes to tempfile.mkdtemp()) stays in here
    # (a short path: Ray's sockets under it must fit AF_UNIX's 107 bytes)
    scratch = Path(tempfile.mkdtemp(prefix="ortlab-nb-"))
    request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
    monkeypatch.setenv("TMPDIR", str(scratch))
    work = tmp_path / "run"
    work.mkdir()
    copy = work / path.name
    shutil.copy(path, copy)
    before = _snapshot(NOTEBOOKS)
    book = nbformat.read(copy, as_version=4)
    client = NotebookClient(
        book,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(work)}},
        store_widget_state=not path.name.startswith("00"),  # the tour: as ./run --headless
    )
    client.execute()  # a failing cell raises CellExecutionError with its traceback
    if tour:
        _the_page_shows_the_lab_offline(book)
        monkeypatch.delenv("ORTLAB_LAB_SYNC")  # as a newcomer's Run All: runs in the background
        _the_history_cell_shows_the_first_run(copy, work)
    ran = [c for c in book.cells if c.cell_type == "code"]
    assert ran and all(c.execution_count is not None for c in ran)
    assert _snapshot(NOTEBOOKS) == before, "executing it wrote into notebooks/"
    assert sorted(p.name for p in work.iterdir()) == [path.name], "it wrote into its cwd"
