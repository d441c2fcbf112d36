"""The CPU-cost task (run inside the worker): what each of several configurations costs in CPU
time per run, over every thread of the process, and what its thread pool burns once idle.

Each item's block of timed runs is followed by an idle window (:data:`IDLE_WINDOW_S`) in which
the worker's own thread sleeps: the CPU the process uses then is the session's pool spinning
for work that does not come (ORT's ``allow_spinning``; ~40 ms of one core after a run here).
The window also lets that spinning end before the next item's runs, so no item is charged for
another's pool; it ends early once the pool has parked (``tasks_timing.idle_cores``: the
whole window's figure, without waiting out its sleep). Items run in rounds, A B C then C B A …,
as the timing task's do, so drift hits them all; when their sessions would not fit in memory
together each item runs its rounds in turn instead (said by ``interleaved``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ortlab.core.config import SessionConfig
from ortlab.core.errors import OrtlabError, error_text
from ortlab.core.inputs import FeedsLike
from ortlab.core.run import Progress
from ortlab.engine.replies import CpuCostReply
from ortlab.engine.sessioncache import (
    SESSION_BYTES,
    file_fingerprint,
    keep_only,
    session_budget,
)
from ortlab.engine.tasks_timing import idle_cores, settle, warmed

__all__ = ["cpu_costs"]


def cpu_costs(
    progress: Progress,
    *,
    items: list[tuple[str, str, SessionConfig]],
    feeds: FeedsLike,
    rounds: int = 6,
    runs: int = 10,
    warmup: int = 3,
) -> CpuCostReply:
    """Per round and item: the process CPU time over ``runs`` timed runs, their wall time and
    the idle cores after them. An item other than the first whose session cannot be built or
    whose warm-up fails is left out (NaN, and ``failed`` says why); the first one's failure
    raises."""
    nan = math.nan
    cpu = [[nan] * len(items) for _ in range(rounds)]
    wall = [[nan] * len(items) for _ in range(rounds)]
    idle = [[nan] * len(items) for _ in range(rounds)]
    together = _fit_together(items)
    failed: dict[int, str] = {}
    steps = [0]

    def measure(r: int, k: int, run: Callable[[], object]) -> None:
        cpu[r][k], wall[r][k] = _block(run, runs)
        idle[r][k] = idle_cores()
        steps[0] += 1
        progress(steps[0], rounds * len(items))

    if together:  # every session held: rounds interleaved, A B C then C B A
        built, failed = warmed(items, feeds, warmup)
        live = [(k, b[0]) for k, b in enumerate(built) if b is not None]
        settle()  # the last warm-up's pool stops spinning before any counts
        for r in range(rounds):
            for k, run_k in live if r % 2 == 0 else live[::-1]:
                measure(r, k, run_k)
    else:  # one session at a time, its rounds in a row
        for k, item in enumerate(items):
            try:
                (one,), _ = warmed([item], feeds, warmup)  # its own failure raises
            except OrtlabError as err:
                if k == 0:
                    raise
                failed[k] = error_text(err)
                continue
            keep_only(item[0], item[2])  # the cache holds this one only
            assert one is not None
            settle()
            for r in range(rounds):
                measure(r, k, one[0])
    return CpuCostReply(
        cpu_ns=cpu, wall_ns=wall, idle_cores=idle, runs=runs, failed=failed, interleaved=together
    )


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


def _block(run: Callable[[], object], runs: int) -> tuple[float, float]:
    """``runs`` back-to-back runs: the process's CPU time over them (every thread, ns) and
    their wall time (ns)."""
    clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
    c0, t0 = cpu_clock(), clock()
    for _ in range(runs):
        run()
    return float(cpu_clock() - c0), float(clock() - t0)
