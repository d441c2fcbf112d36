"""Python's cyclic garbage collector held off while ortlab works for a Lab refresh, and let
run again while it only waits for its worker.

Why: a refresh of a 1.5k-node model allocates ~20,000 container objects (node rows, graph
data, figures). The young collections that fire meanwhile find most of them still in use and
promote them to the oldest generation, whose growth is what triggers a *full* collection: in a
kernel with pandas, plotly and ipywidgets loaded that walks ~130,000 objects, 80-200 ms, and it
fired every third refresh. Held off, the refresh's temporaries die by reference counting before
any collection sees them, and only what the refresh keeps is promoted later.

How it stays harmless for the rest of the process:

- Only while a thread is *computing* for a refresh: :func:`waiting` lets the collector run again
  while that thread blocks on the worker (ORT's session builds and runs, seconds to minutes),
  so the user's code in other threads is collected as usual then.
- Nested and concurrent holds are counted; the collector comes back when the last one ends,
  and only if it was on when the first began (a user who switched it off keeps it off).
- Nothing is lost: the cycles made meanwhile are collected at the next collection.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["held", "waiting"]


class _State:
    lock = threading.Lock()
    holds = 0  # holds in force, over all threads
    restore = False  # the collector was on when the first hold began


_mine = threading.local()  # this thread's holds in force


def _take(n: int) -> None:
    with _State.lock:
        if _State.holds == 0:
            _State.restore = gc.isenabled()
            gc.disable()
        _State.holds += n


def _give(n: int) -> None:
    with _State.lock:
        _State.holds -= n
        if _State.holds == 0 and _State.restore:
            gc.enable()


@contextmanager
def held() -> Iterator[None]:
    """No cyclic collection from here until every hold in force has ended (or is
    :func:`waiting`)."""
    _take(1)
    _mine.n = getattr(_mine, "n", 0) + 1
    try:
        yield
    finally:
        _mine.n -= 1
        _give(1)


@contextmanager
def waiting() -> Iterator[None]:
    """This thread's holds lifted while it blocks (on a child process); taken again after."""
    n = getattr(_mine, "n", 0)
    if n:
        _give(n)
    try:
        yield
    finally:
        if n:
            _take(n)
