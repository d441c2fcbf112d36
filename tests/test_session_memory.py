"""The worker's memory promise on a model whose activations dwarf its weights (a 1024x1024
image network's case, issue 47 item 5): a session built in a few MB grows by its arena on its
first run, and the session cache counts that growth; comparisons too large to hold together
run in pairs that hold two sessions, never three, measured on fresh worker processes with
their resident size sampled every few milliseconds from this one."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import psutil
import pytest
from onnx import TensorProto, helper

from ortlab.core.config import SessionConfig
from ortlab.engine import sessioncache, tasks_timing
from ortlab.engine.calls import Via, run
from ortlab.engine.replies import InterleavedReply
from ortlab.engine.worker import Worker

SHAPE = [1, 16, 1024, 1024]
TENSOR = int(np.prod(SHAPE)) * 4  # 64 MiB per activation


def _activations_model(path: Path) -> Path:
    """x -> (Sigmoid, Mul) x 3: no weights, 64 MiB per intermediate tensor."""
    nodes, x = [], "x"
    for i in range(3):
        nodes += [
            helper.make_node("Sigmoid", [x], [f"s{i}"]),
            helper.make_node("Mul", [x, f"s{i}"], [f"m{i}"]),
        ]
        x = f"m{i}"
    graph = helper.make_graph(
        nodes,
        "activations",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, SHAPE)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, path)
    return path


@contextmanager
def _peak(pid: int) -> Iterator[list[int]]:
    """Process ``pid``'s resident peak above its size at entry, sampled every 2 ms: out[0]."""
    proc, out, stop = psutil.Process(pid), [0], threading.Event()
    start = proc.memory_info().rss

    def watch() -> None:
        while not stop.is_set():
            out[0] = max(out[0], proc.memory_info().rss - start)
            time.sleep(0.002)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        yield out
    finally:
        stop.set()
        t.join()


@dataclass(frozen=True)
class _Timed:
    reply: InterleavedReply
    peak: int


def _worker_peak(**kwargs: Any) -> _Timed:
    """``tasks_timing.interleaved(**kwargs)`` in a worker process of its own (no memory a
    dropped session freed is there to reuse), and that process's resident peak."""
    w = Worker()
    try:
        w.call("ping", {})
        assert w.pid is not None
        with _peak(w.pid) as peak:
            reply = run(tasks_timing.interleaved, Via(worker=w), runs=1, **kwargs)
    finally:
        w.stop()
    return _Timed(reply, peak[0])


@pytest.fixture
def model(tmp_path: Path) -> str:
    sessioncache.clear()
    return str(_activations_model(tmp_path / "activations.onnx"))


def test_a_sessions_first_runs_count_as_its_size(model: str) -> None:
    """Built, the session holds almost nothing; run, its arena holds activations: the cache
    counts both (at least two live 64 MiB tensors), once."""
    feeds = {"x": np.ones(SHAPE, np.float32)}
    items = [(model, "activations", SessionConfig())]
    tasks_timing.warmed(items, feeds, 2)
    key = (model, sessioncache.file_fingerprint(model), SessionConfig())
    counted = sessioncache.SESSION_BYTES[key]
    assert counted >= 2 * TENSOR
    tasks_timing.warmed(items, feeds, 2)  # cached: its growth is not counted again
    assert sessioncache.SESSION_BYTES[key] == counted


def test_a_session_counts_at_least_its_weights(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the C library hands a new session memory a dropped one freed, the process does
    not grow: the session still counts its model's bytes, so a budget it cannot fit in is not
    passed by two sessions "of 0 bytes" (a long CI run timed such a pair interleaved)."""
    monkeypatch.setattr(sessioncache, "rss_bytes", lambda: 1 << 30)  # no growth seen
    sessioncache.open_session(model, "activations", SessionConfig())
    key = (model, sessioncache.file_fingerprint(model), SessionConfig())
    files = sum(f.stat().st_size for f in sessioncache.model_files(model))
    assert files > 0 and sessioncache.SESSION_BYTES[key] == files


@pytest.mark.slow
def test_pairs_hold_two_sessions_never_three(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Five settings of a model whose sessions do not fit together: the pairwise comparison's
    peak stays near two sessions (each candidate's session is released, runner and all, before
    the next is built), measured against one session's own peak — each in a fresh worker,
    read from this process."""
    feeds = {"x": np.ones(SHAPE, np.float32)}
    one = _worker_peak(items=[(model, "a", SessionConfig())], feeds=feeds, rounds=1)
    monkeypatch.setenv("ORTLAB_SESSION_BUDGET_MB", "1")  # the next worker's environment
    items = [(model, "a", SessionConfig(intra_op_threads=k)) for k in (0, 1, 2)]
    items += [(model, "a", SessionConfig(level=level)) for level in ("basic", "disabled")]
    out = _worker_peak(items=items, feeds=feeds, rounds=2)
    five = out.peak
    assert out.reply.pairwise and not out.reply.failed
    # two sessions with their prepared feeds and outputs: 2.8x one session's peak here; three
    # sessions (a candidate's kept alive by the round's order while the next was built): 4.5x
    assert five <= 3.4 * one.peak, (five >> 20, one.peak >> 20)
