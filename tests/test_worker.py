from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

import ortlab
from ortlab.core.errors import (
    SessionConfigError,
    WorkerCancelledError,
    WorkerCrashedError,
    WorkerTimeoutError,
)
from ortlab.engine.worker import InProcessWorker, Worker, get_worker
from tests import models


@pytest.fixture
def worker() -> Worker:
    w = Worker()
    yield w
    w.stop()


@pytest.mark.parametrize(
    ("task", "signal_text"),
    [
        ("tests.crashers:abort", r"SIGABRT \(abort\)"),
        ("tests.crashers:segfault", r"SIGSEGV \(segmentation fault\)"),
        ("tests.crashers:exit_now", "exited with code 3"),
    ],
)
def test_a_dying_worker_is_replaced(worker: Worker, task: str, signal_text: str) -> None:
    first = worker.call("ping", {})
    with pytest.raises(WorkerCrashedError, match=signal_text) as info:
        worker.call(task, {}, context="of 'crashy' with cpu · all")
    assert "'crashy' with cpu · all" in str(info.value)
    assert "Your Python session is fine" in str(info.value)
    if "segfault" in task:
        assert "Fatal Python error" in str(info.value), "faulthandler's stack is in the message"
    second = worker.call("ping", {})
    assert second != first, "a fresh worker serves the next call"


def test_kill_mid_benchmark_then_benchmark_again(mlp: ortlab.Model) -> None:
    """The worker is killed from outside during a run; the next benchmark works."""
    w = get_worker()
    assert isinstance(w, Worker)
    w.call("ping", {})
    pid = w.pid
    assert pid is not None
    killer = threading.Timer(1.0, lambda: psutil.Process(pid).kill())
    killer.start()
    with pytest.raises(WorkerCrashedError, match="SIGKILL") as info:
        ortlab.benchmark(mlp, runs=10**7, warmup=0, progress=False)
    killer.join()
    # what the out-of-memory killer does looks like this: said as memory, not as a crash
    assert "most likely for memory" in str(info.value)
    assert "crash inside onnxruntime" not in str(info.value)
    b = ortlab.benchmark(mlp, runs=5, progress=False)
    assert b.stats.count == 5
    assert w.pid != pid


@pytest.mark.slow
def test_memory_exhaustion_gives_an_error_and_a_fresh_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ORTLAB_WORKER_MEMORY_MB", "3000")
    w = Worker()
    try:
        with pytest.raises(WorkerCrashedError, match="ran out of memory .* 3000 MB"):
            w.call("tests.crashers:exhaust_memory", {})
        monkeypatch.delenv("ORTLAB_WORKER_MEMORY_MB")
        assert w.call("ortlab.engine.tasks:ping", {}) > 0  # a fresh worker answers
    finally:
        w.stop()


def test_timeout_stops_a_hang(worker: Worker) -> None:
    start = time.monotonic()
    with pytest.raises(WorkerTimeoutError, match=r"^hang .*did not finish within 1 s") as err:
        worker.call("tests.crashers:hang", {}, timeout=1.0)
    assert "tests.crashers" not in str(err.value)  # a message names the task, not its module
    assert time.monotonic() - start < 10
    assert isinstance(worker.call("ping", {}), int)


@pytest.mark.slow
def test_timeout_on_a_model_that_runs_forever() -> None:
    m = ortlab.load(models.slow_loop())
    with pytest.raises(WorkerTimeoutError, match="did not finish within 2 s"):
        ortlab.benchmark(m, runs=1, warmup=0, timeout=2.0, progress=False)
    assert ortlab.benchmark(ortlab.load(models.add()), runs=2, progress=False).stats.count == 2


def test_cancel_from_another_thread(worker: Worker) -> None:
    threading.Timer(0.5, worker.cancel).start()
    with pytest.raises(WorkerCancelledError, match="Cancelled"):
        worker.call("tests.crashers:hang", {})
    assert isinstance(worker.call("ping", {}), int)


def test_errors_come_back_typed(worker: Worker) -> None:
    with pytest.raises(ValueError, match="plain bug inside a task") as info:
        worker.call("tests.crashers:raise_value_error", {})
    assert any("raised in the ortlab worker" in n for n in getattr(info.value, "__notes__", []))
    with pytest.raises(SessionConfigError):
        worker.call(
            "ortlab.engine.tasks_timing:benchmark",
            {
                "model_path": "x",
                "model_name": "x",
                "config": ortlab.SessionConfig(level="all").with_(level="max"),
                "feeds": {},
            },
        )


def test_in_process_mode(mlp: ortlab.Model) -> None:
    ortlab.set_isolation("inprocess")
    try:
        assert isinstance(get_worker(), InProcessWorker)
        b = ortlab.benchmark(mlp, runs=3, progress=False)
        assert b.stats.count == 3
    finally:
        ortlab.set_isolation("process")
    assert isinstance(get_worker(), Worker)


def test_no_worker_outlives_stop(worker: Worker) -> None:
    worker.call("ping", {})
    pid = worker.pid
    worker.stop()
    assert (pid is not None and not psutil.pid_exists(pid)) or (
        psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    )


def test_worker_outlives_the_thread_that_started_it() -> None:
    """The Lab runs each job on a thread of its own. The worker dies with its parent
    (PR_SET_PDEATHSIG), and Linux counts the thread that started it as the parent: started
    from a job's thread, it was killed when the job ended and restarted by the next one."""
    w = Worker()
    try:
        pids: list[int] = []
        for _ in range(2):  # as two Lab runs do: each call from a thread that then ends
            job = threading.Thread(target=lambda: pids.append(w.call("ping", {})))
            job.start()
            job.join()
            time.sleep(0.5)  # a SIGTERM on the thread's exit would have landed by now
        assert w.alive() and pids == [pids[0]] * 2 and w.call("ping", {}) == pids[0]
        w.stop()
        w.start_in_background()  # the Lab's early start: also from a thread that ends
        deadline = time.monotonic() + 60
        while not w.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        assert w.alive(), "started in the background, the worker kept running"
        assert w.call("ping", {}) == w.pid
    finally:
        w.stop()


def test_children_find_this_copy_of_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker and the children it starts get the folder holding ``ortlab`` first on their
    path (it was ``ortlab/`` itself once the worker moved to ``ortlab/engine/``)."""
    import os
    from pathlib import Path

    from ortlab.engine import children

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/elsewhere", ""]))
    path = children.child_env(EXTRA="1")["PYTHONPATH"].split(os.pathsep)
    assert Path(path[0], "ortlab", "__init__.py").resolve() == Path(ortlab.__file__).resolve()
    assert path[1:] == ["/elsewhere"] and children.child_env(EXTRA="1")["EXTRA"] == "1"


def test_a_ready_worker_has_imported_onnxruntime_and_not_the_public_namespace() -> None:
    """``ready`` is set once the worker has imported onnxruntime and the tasks (a Lab's first
    run waits for that), and a child skips ``ortlab``'s public namespace (the analyses, pandas,
    the renderers): those imports doubled the worker's start-up."""
    w = Worker()
    try:
        assert not w.ready
        w.start()
        assert w.ready
        loaded = set(w.call("tests.crashers:modules", {}))
        assert {"onnxruntime", "ortlab.engine.tasks", "ortlab.engine.session"} <= loaded
        assert not loaded & {"pandas", "ortlab.views", "ortlab.analysis", "plotly"}
        w.stop()
        assert not w.ready
    finally:
        w.stop()


def test_import_ortlab_outside_a_child_still_gives_the_whole_api() -> None:
    """The skip is for ortlab's own children only: a user's ``import ortlab`` (no
    ORTLAB_CHILD) has every public name and the renderers registered."""
    import os
    import subprocess
    import sys

    from ortlab.engine.children import child_env

    code = (
        "import ortlab, sys; from ortlab.core import display; "
        "print(all(hasattr(ortlab, n) for n in ortlab.__all__ if n not in ('Lab', 'GraphView')),"
        " display.has(ortlab.PlacementResult, 'html'))"
    )
    env = {k: v for k, v in child_env().items() if k != "ORTLAB_CHILD"}
    root = os.path.dirname(os.path.dirname(ortlab.__file__))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.split() == ["True", "True"]


def test_a_teardown_left_for_after_the_reply_ends_before_the_next_call(
    worker: Worker, tmp_path: Path
) -> None:
    """A placement's session frees its kernels when dropped (~30 ms on a 1,500-node model):
    the worker drops it after replying, so the caller does not wait, and before it reads the
    next call, so a teardown never overlaps a timed run. The stand-in's teardown waits for a
    file the test writes only once the reply is in: dropped before replying, the call would
    stall 10 s and the teardown would be done by the time the reply arrived."""
    folder = str(tmp_path)
    assert worker.call("tests.crashers:leave_for_after_reply", {"folder": folder}) is False
    assert not (tmp_path / "released").exists(), "the reply came after the teardown"
    (tmp_path / "go").write_text("1")
    assert worker.call("tests.crashers:exists", {"path": str(tmp_path / "released")})


def test_sessions_that_do_not_fit_together_are_timed_in_pairs(
    monkeypatch: pytest.MonkeyPatch, mlp: ortlab.Model
) -> None:
    """When the sessions of an interleaved comparison would pass the worker's memory bound
    (2x the largest session; here forced tiny), the reference is timed with one candidate at a
    time: never more than two sessions held, every candidate measured against the reference
    in its own pair, the same result shape."""
    from ortlab.core.config import SessionConfig

    monkeypatch.setenv("ORTLAB_SESSION_BUDGET_MB", "0.001")
    w = Worker()
    try:
        configs = [SessionConfig(level=lvl) for lvl in ("all", "disabled", "basic", "all")]
        items = [(str(mlp.path), mlp.name, c) for c in configs]
        feeds = dict(mlp.example_inputs())
        out = w.call(
            "ortlab.engine.tasks_timing:interleaved",
            {"items": items, "feeds": feeds, "rounds": 6, "runs": 3},
        )
        assert out.pairwise is True and out.failed == {}
        med = np.asarray(out.medians_ns)
        assert med.shape == (6, 4) and np.isfinite(med).all()
        assert all(len(lat) == 18 for lat in out.latencies_ns)
        assert [r.level for r in out.reports] == ["all", "disabled", "basic", "all"]
        assert w.call("ortlab.engine.tasks:cached_sessions", {}) <= 2
    finally:
        w.stop()


def test_a_session_that_cannot_fit_is_refused_with_the_numbers(tmp_path: Path) -> None:
    """A model whose external data is larger than this machine's memory (a sparse file the
    size of its RAM): refused before onnxruntime tries, with the sizes, not an OOM kill."""
    import onnx
    import psutil
    from onnx import TensorProto, helper

    from ortlab.engine import sessioncache

    w = helper.make_tensor("w", TensorProto.FLOAT, [4], [0.0] * 4)
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", "16")):
        w.external_data.add(key=k, value=v)
    w.ClearField("float_data")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y], [w])
    path = tmp_path / "big.onnx"
    onnx.save_model(helper.make_model(graph), str(path))
    with (tmp_path / "weights.bin").open("wb") as f:
        f.truncate(psutil.virtual_memory().total)
    with pytest.raises(ortlab.SessionCreationError, match=r"GiB of memory is free"):
        sessioncache.open_session(str(path), "big", ortlab.SessionConfig())


def test_a_comparison_timed_in_pairs_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pairwise timing reaches the result the user reads: compare_configs in a fresh worker
    whose session budget forces pairs carries the note, in its text too; within the budget
    there is no such note."""
    from ortlab.engine import worker as worker_module
    from ortlab.engine.calls import PAIRWISE

    mlp = ortlab.examples.load("mlp")
    configs = [{"level": "all"}, {"level": "disabled"}, {"level": "basic"}]
    monkeypatch.setenv("ORTLAB_SESSION_BUDGET_MB", "0.001")
    worker_module.get_worker().stop()  # the next call starts a worker that reads the budget
    try:
        pairs = ortlab.compare_configs(mlp, configs, rounds=6, runs=3, progress=False)
    finally:
        monkeypatch.delenv("ORTLAB_SESSION_BUDGET_MB")
        worker_module.get_worker().stop()
    assert PAIRWISE in pairs.notes and "timed in pairs" in pairs.to_text()
    together = ortlab.compare_configs(mlp, configs, rounds=6, runs=3, progress=False)
    assert PAIRWISE not in together.notes
