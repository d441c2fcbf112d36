"""The timing tasks (run inside the worker): one configuration timed run after run
(``benchmark``), and several timed interleaved in rounds (``interleaved``: A B C, C B A …, so
drift hits them all; pairwise when their sessions would not fit in memory together). Their
clocks run around the session's ``run`` alone: progress, IPC and teardown stay outside.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ortlab.core.config import SessionConfig
from ortlab.core.errors import FeedError, OrtlabError, error_text
from ortlab.core.inputs import FeedsLike
from ortlab.core.machine import IDLE_WINDOW_S
from ortlab.core.run import ModelJob, Progress
from ortlab.engine.replies import BenchmarkReply, InterleavedReply
from ortlab.engine.session import SessionReport, build_session
from ortlab.engine.sessioncache import (
    SESSION_BYTES,
    count_first_runs,
    file_fingerprint,
    keep_only,
    open_session,
    rss_bytes,
    session_budget,
)
from ortlab.engine.tasks import REPORT_EVERY_NS, make_runner, prepare_feeds, run_error

__all__ = ["WARMUP_RUNS", "benchmark", "idle_cores", "interleaved", "settle", "warmed"]

WARMUP_RUNS = 3
"""Warm-up runs per session before an interleaved comparison times it (a plan counts them)."""


def benchmark(
    progress: Progress,
    job: ModelJob,
    *,
    runs: int = 100,
    warmup: int = 10,
    duration_s: float | None = None,
) -> BenchmarkReply:
    """Warm up, then time ``runs`` runs (or until ``duration_s``), profiling off."""
    model_path, model_name, config, feeds = job.model_path, job.model_name, job.config, job.feeds
    sess, report, cached = open_session(model_path, model_name, config)
    prepared = prepare_feeds(feeds)
    run = make_runner(sess, prepared, config.io_binding)
    clock = time.perf_counter_ns
    total = warmup + runs
    warm_ns = 0
    try:
        grown = rss_bytes()
        for i in range(warmup):
            t0 = clock()
            run()
            warm_ns += clock() - t0
            progress(i + 1, total)
        count_first_runs(model_path, config, rss_bytes() - grown)
        lat: list[int] = []
        cpu0 = time.process_time_ns()  # this process, every thread: ORT's pool included
        stop_at = None if duration_s is None else clock() + int(duration_s * 1e9)
        next_report = clock() + REPORT_EVERY_NS
        for i in range(runs):
            t0 = clock()
            run()
            t1 = clock()
            lat.append(t1 - t0)
            if t1 >= next_report:
                progress(warmup + i + 1, total)
                next_report = t1 + REPORT_EVERY_NS
            if stop_at is not None and t1 >= stop_at:
                break
    except Exception as err:
        if isinstance(err, FeedError):
            raise
        raise run_error(err, model_name, config, feeds) from err
    cpu_ns = time.process_time_ns() - cpu0
    idle = idle_cores()
    progress(total, total)
    ort_ns = (0 if cached else report.create_ms * 1e6) + warm_ns + sum(lat)
    return BenchmarkReply(
        latencies_ns=lat,
        report=report,
        cached_session=cached,
        warmup=warmup,
        ort_ms=ort_ns / 1e6,
        cpu_ns_per_run=cpu_ns / max(len(lat), 1),
        idle_cores=idle,
    )


SETTLED_S = 0.03
"""The idle window ends early once the process has used under :data:`SETTLED_CORES` over the
last this long: the pool has stopped spinning (ORT's threads park), and the rest of the
window would add nothing but this thread's own polls."""
SETTLED_CORES = 0.02
"""Below this the process counts as asleep: the polls themselves cost ~0.005 of a core, a
spinning pool thread at least half of one even with the machine's other core busy."""
POLL_S = 0.005


def idle_cores() -> float:
    """The cores this process keeps busy in the :data:`~ortlab.core.machine.IDLE_WINDOW_S`
    after the last run while its own thread sleeps: the session's threads spinning (CPU time
    over the window). The wait ends early once the process has settled (under
    :data:`SETTLED_CORES` over :data:`SETTLED_S`), counting the rest of the window as idle:
    a pool spins ~40 ms after a run here, so the window's other 160 ms were all sleep (at most
    SETTLED_CORES x what is left goes uncounted, under the figure's two decimals)."""
    clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
    window = int(IDLE_WINDOW_S * 1e9)
    settled = int(SETTLED_S * 1e9)
    c0, t0 = cpu_clock(), clock()
    marks = [(c0, t0)]
    while True:
        time.sleep(POLL_S)
        c, t = cpu_clock(), clock()
        if t - t0 >= window:
            return (c - c0) / (t - t0)
        marks.append((c, t))
        while len(marks) > 1 and t - marks[1][1] >= settled:
            marks.pop(0)  # marks[0]: the newest mark at least SETTLED_S back
        cm, tm = marks[0]
        if t - tm >= settled and (c - cm) < SETTLED_CORES * (t - tm):
            return (c - c0) / window


def settle() -> None:
    """Wait until this process's pool has stopped spinning (at most the idle window), so the
    next block is not charged for the last one's pool."""
    idle_cores()


Built = tuple[Callable[[], object], SessionReport]
"""A built item: its runner (one run at the feeds) and its session's report."""


def warmed(
    items: list[tuple[str, str, SessionConfig]], feeds: FeedsLike, warmup: int
) -> tuple[list[Built | None], dict[int, str]]:
    """Every item's session built and warmed up before anything is timed. An item other than
    the first that fails is None, and ``failed`` maps its index to why (one broken candidate
    never ends a comparison); the first is the reference: its failure raises."""
    sessions: list[Built | None] = []
    failed: dict[int, str] = {}
    for k, (path, name, cfg) in enumerate(items):
        try:
            sess, report, _ = open_session(path, name, cfg)
            run = make_runner(sess, prepare_feeds(feeds), cfg.io_binding)
            grown = rss_bytes()
            for _ in range(max(warmup, 1)):
                run()
            count_first_runs(path, cfg, rss_bytes() - grown)
        except Exception as err:
            if k == 0:
                if isinstance(err, OrtlabError):
                    raise
                raise run_error(err, name, cfg, feeds) from err
            failed[k] = error_text(err)
            sessions.append(None)
            continue
        sessions.append((run, report))
    return sessions, failed


def interleaved(
    progress: Progress,
    *,
    items: list[tuple[str, str, SessionConfig]],
    feeds: FeedsLike,
    rounds: int = 10,
    runs: int = 10,
    warmup: int = WARMUP_RUNS,
) -> InterleavedReply:
    """Time several (model, config) variants in rounds, A B C then C B A …, so drift cancels.

    Returns per round and variant the median of ``runs`` timed runs (ns). A variant other than
    the first whose session cannot be built or whose warm-up run fails is left out of the
    timing: its column holds NaN, and ``failed`` maps its index to what went wrong (one broken
    candidate never ends a comparison). The first variant is the reference: its failure raises.
    """
    if len(items) > 2:
        path, _, cfg = items[0]
        warmed(items[:1], feeds, 2)  # run twice (the memory pattern allocates on the 2nd):
        # its size then says whether all fit
        key = (path, file_fingerprint(path), cfg)
        if len(items) * SESSION_BYTES.get(key, 0) > session_budget():
            return _pairwise(
                progress, items=items, feeds=feeds, rounds=rounds, runs=runs, warmup=warmup
            )
    sessions, failed = warmed(items, feeds, warmup)
    clock = time.perf_counter_ns
    medians: list[list[float]] = [[float("nan")] * len(items) for _ in range(rounds)]
    every: list[list[int]] = [[] for _ in items]
    live = [k for k, s in enumerate(sessions) if s is not None]
    for r in range(rounds):
        for k in live if r % 2 == 0 else reversed(live):
            run = sessions[k][0]  # type: ignore[index]  # live holds built sessions only
            lat = []
            for _ in range(runs):
                t0 = clock()
                run()
                lat.append(clock() - t0)
            medians[r][k] = float(np.median(lat))
            every[k].extend(lat)
        progress(r + 1, rounds)
    return InterleavedReply(
        medians_ns=medians,
        latencies_ns=every,
        reports=[s[1] if s is not None else None for s in sessions],
        failed=failed,
    )


def _timed(run: Callable[[], object], runs: int, clock: Callable[[], int]) -> list[int]:
    lat = []
    for _ in range(runs):
        t0 = clock()
        run()
        lat.append(clock() - t0)
    return lat


def _pairwise(
    progress: Progress,
    *,
    items: list[tuple[str, str, SessionConfig]],
    feeds: FeedsLike,
    rounds: int,
    runs: int,
    warmup: int,
) -> InterleavedReply:
    """:func:`interleaved` when the sessions would not fit in memory together: the reference
    with one candidate at a time (two sessions, never more), each pair interleaved for all
    ``rounds``. A candidate's per-round median is scaled by the reference's round in the first
    pair over its round in this pair, so each candidate's paired ratio to the reference is the
    one measured in its own pair; its raw latencies are kept as measured."""
    import gc

    clock = time.perf_counter_ns
    path, name, cfg = items[0]
    ref, ref_report, _ = open_session(path, name, cfg)
    keep_only(path, cfg)  # two sessions from here on: the reference and one candidate
    run_ref = make_runner(ref, prepare_feeds(feeds), cfg.io_binding)
    medians: list[list[float]] = [[float("nan")] * len(items) for _ in range(rounds)]
    every: list[list[int]] = [[] for _ in items]
    reports: list[SessionReport | None] = [ref_report] + [None] * (len(items) - 1)
    failed: dict[int, str] = {}
    first = True
    for k, (c_path, c_name, c_cfg) in enumerate(items[1:], start=1):
        try:  # not cached: it is dropped before the next candidate is built
            sess, reports[k] = build_session(c_path, c_cfg, model_name=c_name)
            run = make_runner(sess, prepare_feeds(feeds), c_cfg.io_binding)
            for _ in range(warmup):
                run()
                run_ref()
        except Exception as err:  # noqa: BLE001 - one broken candidate never ends it
            failed[k] = error_text(err)
            continue
        for r in range(rounds):
            order = [(0, run_ref), (k, run)] if r % 2 == 0 else [(k, run), (0, run_ref)]
            got = {}
            for j, fn in order:
                lat = _timed(fn, runs, clock)
                got[j] = float(np.median(lat))
                if j == k or first:
                    every[j].extend(lat)
            if first:
                medians[r][0] = got[0]
            medians[r][k] = got[k] * medians[r][0] / got[0]
        first = False
        order = []  # it held the runner too: the candidate's session goes now, all of it
        del run, sess
        gc.collect()
        progress(k, len(items) - 1)
    if first:  # no candidate ran: the reference alone, for its own column
        for r in range(rounds):
            lat = _timed(run_ref, runs, clock)
            medians[r][0] = float(np.median(lat))
            every[0].extend(lat)
    return InterleavedReply(
        medians_ns=medians, latencies_ns=every, reports=reports, failed=failed, pairwise=True
    )
