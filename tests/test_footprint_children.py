"""The processes a footprint is measured in: children forked by a measuring process read what a
fresh interpreter reads (checked against one, interleaved), and a child that dies, hangs or
cannot be forked is said, never a hung worker or a wrong figure."""

from __future__ import annotations

import contextlib
import pickle
import re
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benchmarks.footprint_processes import fresh_measure
from ortlab.analysis.memory import FORK_OFFSET_MB
from ortlab.core.config import SessionConfig
from ortlab.engine import _footprint_child
from ortlab.engine.children import FootprintAsk
from ortlab.engine.tasks_memory import measurer


@pytest.fixture
def ask(tmp_path: Path) -> FootprintAsk:
    """A 4 MB MatMul and its feeds, as the footprint task writes them."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((1024, 1024)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 1024])],
        initializer=[w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, tmp_path / "m.onnx")
    feeds = tmp_path / "feeds.pkl"
    with feeds.open("wb") as f:
        pickle.dump({"x": rng.standard_normal((64, 1024)).astype(np.float32)}, f)
    return {
        "model_path": str(tmp_path / "m.onnx"),
        "name": "m",
        "config": SessionConfig(),
        "feeds_file": str(feeds),
        "runs": 2,
    }


@pytest.mark.slow
def test_a_forked_child_reads_what_a_fresh_interpreter_reads_plus_the_file_pages_it_states(
    ask: FootprintAsk, tmp_path: Path
) -> None:
    """Interleaved, a new measuring process each round as the task starts them, against a
    fresh interpreter (the reference, never ortlab's way). A forked child re-faults its
    parent's code pages as it runs them (0.40-0.45 MB more than a fresh interpreter on this
    model, the library code the build ran): its held memory less its file pages is what a
    fresh interpreter reads less its own, within 0.25 MB, and the offset is file pages, near
    what the footprint states (FORK_OFFSET_MB)."""
    forked, fresh = [], []
    for _ in range(4):
        with measurer(tmp_path) as measure:
            assert not measure.refused, measure.refused  # Linux, one thread after the imports
            got = measure(ask, 0)
        forked.append(got)
        fresh.append(fresh_measure(tmp_path, ask, 1))
    for s in (*forked, *fresh):
        assert not s.error and None not in (s.held_bytes, s.peak_bytes, s.file_bytes), s
        assert 0 <= s.file_bytes <= s.held_bytes  # type: ignore[operator]
    a = [s.held_bytes - s.file_bytes for s in forked]  # type: ignore[operator]
    b = [s.held_bytes - s.file_bytes for s in fresh]  # type: ignore[operator]
    # a session of a 4 MB weight adds tens of MB (ORT's environment, its first session)
    assert 4e6 < float(np.median(b)) < 500e6
    assert abs(float(np.median(a)) - float(np.median(b))) < 0.25e6, (a, b)
    offset = float(np.median([s.file_bytes for s in forked])) - float(  # type: ignore[misc]
        np.median([s.file_bytes for s in fresh])  # type: ignore[misc]
    )
    held = float(np.median([s.held_bytes for s in forked])) - float(  # type: ignore[misc]
        np.median([s.held_bytes for s in fresh])  # type: ignore[misc]
    )
    assert offset > 0 and abs(held - offset) < 0.25e6, (held, offset)
    assert abs(offset - FORK_OFFSET_MB * 1e6) < 0.3e6, offset


def test_a_footprint_states_its_file_pages() -> None:
    """The footprint says the file pages its figures include, from its own measurements."""
    import ortlab

    r = ortlab.footprint(ortlab.examples.load("mlp"), repeats=2, runs=1, progress=False)
    (said,) = [n for n in r.notes if "are file pages" in n]
    assert said.startswith("of what is held, ") and f"{FORK_OFFSET_MB} MB more of them" in said
    # its figure is the measurements' own: the file pages as configured, a part of held
    files = said.removeprefix("of what is held, ").split(" are file pages")[0]
    assert files.endswith(" MB") and 0 < float(files[:-3]) * 1e6 <= r.reference.held


class _Unreadable:
    """Pickles as a call that fails when the child reads its request."""

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return (int, ("not a count",))


def test_a_child_that_dies_is_said_with_its_own_last_words(
    ask: FootprintAsk, tmp_path: Path
) -> None:
    with measurer(tmp_path) as measure:
        ok = measure(ask, 0)
        failed = measure(dict(ask, feeds_file=str(tmp_path / "gone.pkl")), 1)  # type: ignore[arg-type]
        # a request the child cannot even read: it dies before it can answer
        died = measure(dict(ask, runs=_Unreadable()), 2)  # type: ignore[arg-type]
        again = measure(ask, 3)  # the server goes on after a child died
    assert not ok.error and ok.held_bytes and again.held_bytes
    assert "FileNotFoundError" in failed.error and "gone.pkl" in failed.error
    assert died.error.startswith("the measurement died (exit 1): "), died.error
    assert "ValueError: invalid literal for int()" in died.error


def test_a_child_that_takes_too_long_is_killed_and_said(ask: FootprintAsk, tmp_path: Path) -> None:
    with measurer(tmp_path) as measure:
        slow = measure(ask, 0, timeout_s=0.001)
        after = measure(ask, 1)
        server = measure.server
    assert slow.error == "the measurement took more than 0 s"
    assert after.held_bytes and not after.error
    assert server is not None and server.returncode == 0  # it ended at the end of its input


def test_a_process_with_threads_does_not_fork(ask: FootprintAsk, tmp_path: Path) -> None:
    """A second thread could hold a lock the child would wait on forever: no fork then, and
    each measurement fails saying why (there is no other way to measure)."""
    from ortlab.engine.tasks_memory import Measurer

    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        why = _footprint_child.why_not_fork()
    finally:
        stop.set()
        t.join()
    assert re.match(r"the measuring process has \d+ threads after its imports", why), why
    refused = Measurer(tmp_path, None, why)  # type: ignore[arg-type]
    got = refused(ask, 0)
    assert got.error == f"the footprint's measuring process cannot fork here: {why}"


def test_a_cancelled_footprint_leaves_no_process_behind() -> None:
    """Cancelled while a child measures (the worker is killed): the measuring process sees its
    worker gone and kills the child, then ends; nothing keeps measuring (without that check
    the child went on building and running resnet50 past the 2 s this allows)."""
    import psutil

    import ortlab
    from ortlab.core.errors import WorkerCancelledError
    from ortlab.engine.worker import get_worker

    m = ortlab.examples.load("resnet50")  # a child builds its session for about a second
    failed: list[BaseException] = []

    def measure() -> None:
        try:
            ortlab.footprint(m, progress=False)
        except BaseException as err:  # noqa: BLE001 - the test reads it
            failed.append(err)

    thread = threading.Thread(target=measure)
    thread.start()
    seen: list[psutil.Process] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(seen) < 2 and thread.is_alive():
        pid = get_worker().pid
        with contextlib.suppress(psutil.Error):
            seen = psutil.Process(pid).children(recursive=True) if pid else []
        time.sleep(0.01)
    assert len(seen) >= 2, "never saw the measuring process with a child"  # server + child
    get_worker().cancel()
    thread.join(60)
    assert failed and isinstance(failed[0], WorkerCancelledError), failed
    _, alive = psutil.wait_procs(seen, timeout=2)
    still = [c for c in map(_running, alive) if c]
    assert not still, still


def _running(p: Any) -> str:
    """``p``'s command line while it still runs; '' once it ended. A process that ended and
    waits to be reaped (a zombie: no CPU, no memory) has ended: its worker was killed, so the
    container's init reaps it, and under load that took longer than 2 s."""
    import psutil

    try:
        return "" if p.status() == psutil.STATUS_ZOMBIE else " ".join(p.cmdline())
    except psutil.NoSuchProcess:
        return ""
