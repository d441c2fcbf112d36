"""The hold on Python's cyclic collector during a Lab refresh (ortlab.core.gcpause): it is off
while ortlab computes, on again while a thread only waits for the worker, and afterwards in
the state the user left it."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

import ortlab
from ortlab.core import gcpause
from ortlab.engine.worker import InProcessWorker, Worker


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    assert gcpause._State.holds == 0, "a hold outlived its block"
    if not was:
        gc.disable()


def test_a_hold_switches_the_collector_off_until_the_last_one_ends() -> None:
    with gcpause.held():
        assert not gc.isenabled()
        with gcpause.held():
            assert not gc.isenabled()
        assert not gc.isenabled(), "the outer hold is still in force"
    assert gc.isenabled()


def test_a_hold_gives_the_collector_back_after_an_error() -> None:
    with pytest.raises(ValueError, match="inside"), gcpause.held():
        raise ValueError("inside")
    assert gc.isenabled()


def test_a_collector_the_user_switched_off_stays_off() -> None:
    gc.disable()
    with gcpause.held():
        with gcpause.waiting():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_waiting_lifts_only_this_threads_holds() -> None:
    """A thread waiting for the worker lets the collector run, unless another thread is
    computing under a hold of its own; the waiter's hold is back when it stops waiting."""
    other_holds, release = threading.Event(), threading.Event()

    def other() -> None:
        with gcpause.held():
            other_holds.set()
            release.wait(10)

    with gcpause.held():
        with gcpause.waiting():
            assert gc.isenabled(), "nobody else holds it: waiting lets it run"
        assert not gc.isenabled()
        t = threading.Thread(target=other)
        t.start()
        assert other_holds.wait(10)
        with gcpause.waiting():
            assert not gc.isenabled(), "the other thread still computes under its hold"
        release.set()
        t.join(10)
        assert not gc.isenabled(), "this thread's own hold is still in force"
    assert gc.isenabled()


@pytest.mark.parametrize("kind", [Worker, InProcessWorker])
def test_a_worker_call_lets_the_collector_run_while_it_waits(kind: type) -> None:
    """Under a hold, the collector runs again for as long as the thread blocks on the worker
    (a user's code in another thread is collected as usual), and is held again after; the
    same when the task runs in this process (isolation "inprocess", for debugging)."""
    w = kind()
    if isinstance(w, Worker):
        w.start()  # its start-up is a wait too, but this test is about the call
    seen: list[bool] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.append(gc.isenabled())
            stop.wait(0.01)

    try:
        with gcpause.held():
            t = threading.Thread(target=watch)
            t.start()
            w.call("tests.crashers:sleep", {"seconds": 0.5})
            stop.set()
            t.join(10)
            assert not gc.isenabled()
    finally:
        w.stop()
    assert seen.count(True) > len(seen) / 2, seen


def test_a_lab_refresh_computes_under_the_hold_and_gives_it_back(
    mlp: ortlab.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph view (one of the refresh's own computations) is built with the collector
    off; after the refresh, and after a refresh that failed, it is on."""
    states: list[bool] = []
    graph = ortlab.graph

    def watched(*args: object, **kw: object) -> object:
        states.append(gc.isenabled())
        if len(states) == 2:
            raise RuntimeError("a failing graph view")
        return graph(*args, **kw)

    monkeypatch.setattr(ortlab, "graph", watched)
    lab = ortlab.Lab(mlp, runs=3, synchronous=True, tab="Graph")
    assert gc.isenabled()
    lab.level.value = "basic"
    assert "a failing graph view" in lab.error.value
    assert gc.isenabled()
    lab.close()
    assert states == [False, False]
