"""The CPU-cost task (run inside the worker): what each of several configurations costs in CPU
time per run, over every thread of the process, and what its thread pool burns once idle.

Each item's block of timed runs is followed by an idle window (:data:`IDLE_WINDOW_S`) in which
the worker's own thread sleeps: the CPU the process uses then is the session's pool spinning
for work that does not come (ORT's ``allow_spinning``; ~40 ms of one core after a run here).
The window also lets that spinning end before the next item's runs, so no item is charged for
another's pool. Items run in rounds, A B C then C B A …, as the timing task's do, so drift
hits them all; when their sessions would not fit in memory together each item runs its rounds
in turn instead (said by ``interleaved``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from ortlab.core.config import SessionConfig
from ortlab.core.errors import OrtlabError, error_text
from ortlab.core.machine import IDLE_WINDOW_S
from ortlab.core.run import Progress
from ortlab.engine.replies import CpuCostReply
from ortlab.engine.sessioncache import (
    SESSION_BYTES,
    file_fingerprint,
    keep_only,
    open_session,
    session_budget,
)
from ortlab.engine.tasks import make_runner, prepare_feeds
from ortlab.engine.tasks_timing import idle_cores, warmed

__all__ = ["cpu_costs"]


def cpu_costs(
    progress: Progress,
    *,
    items: list[tuple[str, str, SessionConfig]],
    feeds: Mapping[str, Any],
    rounds: int = 6,
    runs: int = 10,
    warmup: int = 3,
) -> CpuCostReply:
    """Per round and item: the process CPU time over ``runs`` timed runs, their wall time and
    the idle cores after them. An item other than the first whose session cannot be built or
    whose warm-up fails is left out (NaN, and ``failed`` says why); the first one's failure
    raises."""
    together = _fit_together(items)
    runners, failed = _built(items, feeds, warmup, keep=together)
    live = [k for k in range(len(items)) if k not in failed]
    nan = math.nan
    cpu = [[nan] * len(items) for _ in range(rounds)]
    wall = [[nan] * len(items) for _ in range(rounds)]
    idle = [[nan] * len(items) for _ in range(rounds)]
    order = (
        [(r, k) for r in range(rounds) for k in (live if r % 2 == 0 else live[::-1])]
        if together
        else [(r, k) for k in live for r in range(rounds)]
    )
    time.sleep(IDLE_WINDOW_S)  # the last warm-up's pool stops spinning before any is counted
    for step, (r, k) in enumerate(order):
        if runners[k] is None:  # one item at a time: its session again (its rounds in a row)
            runners = [None] * len(items)
            runners[k] = _rebuilt(items[k], feeds, warmup)
        run = runners[k]
        assert run is not None
        cpu[r][k], wall[r][k] = _block(run, runs)
        idle[r][k] = idle_cores()
        progress(step + 1, len(order))
    return CpuCostReply(
        cpu_ns=cpu, wall_ns=wall, idle_cores=idle, runs=runs, failed=failed, interleaved=together
    )


def _built(
    items: list[tuple[str, str, SessionConfig]],
    feeds: Mapping[str, Any],
    warmup: int,
    *,
    keep: bool,
) -> tuple[list[Callable[[], Any] | None], dict[int, str]]:
    """Every item built and warmed up (:func:`warmed`: the first's failure raises, the others'
    are recorded); with ``keep`` their runners, else None for each (their sessions are not
    held together: each is built again when its turn comes)."""
    if keep:
        built, failed = warmed(items, feeds, warmup)
        return [b[0] if b is not None else None for b in built], failed
    failed = {}
    for k, item in enumerate(items):
        try:
            warmed([item], feeds, warmup)
        except OrtlabError as err:
            if k == 0:
                raise
            failed[k] = error_text(err)
    return [None] * len(items), failed


def _rebuilt(
    item: tuple[str, str, SessionConfig], feeds: Mapping[str, Any], warmup: int
) -> Callable[[], Any]:
    """The item's runner again (its session from the cache, or rebuilt when another's evicted
    it), warmed up."""
    path, name, cfg = item
    sess, _, _ = open_session(path, name, cfg)
    keep_only(path, cfg)  # one session at a time: that is why it is rebuilt
    run = make_runner(sess, prepare_feeds(feeds), cfg.io_binding)
    for _ in range(warmup):
        run()
    return run


def _fit_together(items: list[tuple[str, str, SessionConfig]]) -> bool:
    """Whether the items' sessions fit the worker's session budget together (they then stay
    built and the rounds interleave). An unreadable file holds nothing: building it fails, and
    its failure is recorded."""
    held = 0
    for path, _, cfg in items:
        try:
            held += SESSION_BYTES.get((path, file_fingerprint(path), cfg), 0)
        except OSError:
            continue
    return held <= session_budget()


def _block(run: Callable[[], Any], runs: int) -> tuple[float, float]:
    """``runs`` back-to-back runs: the process's CPU time over them (every thread, ns) and
    their wall time (ns)."""
    clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
    c0, t0 = cpu_clock(), clock()
    for _ in range(runs):
        run()
    return float(cpu_clock() - c0), float(clock() - t0)
