"""The throughput task (run inside the worker): c threads issuing ``run`` for a fixed window,
per concurrency level and mode (threads sharing one session, one session per thread),
interleaved in rounds so drift hits every level."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ortlab.core.errors import FeedError, OrtlabError, SessionCreationError
from ortlab.core.machine import logical_cpus
from ortlab.core.run import ModelJob, Progress
from ortlab.engine.replies import ThroughputReply, Window
from ortlab.engine.session import build_session
from ortlab.engine.sessioncache import (
    SESSION_BYTES,
    check_fits,
    file_fingerprint,
    model_files,
    open_session,
    release_after_reply,
)
from ortlab.engine.tasks import make_runner, prepare_feeds, run_error

__all__ = ["MODES", "sessions_fit", "throughput"]

MODES = ("shared", "per_thread")
"""``shared``: c threads run one session; ``per_thread``: each thread runs its own session."""


def sessions_fit(per_session: int, count: int, free: int) -> str | None:
    """None when ``count`` sessions of ``per_session`` bytes fit in 90 % of ``free`` bytes,
    else the reason, with the numbers and what to do instead."""
    need = per_session * count
    if need <= 0.9 * free:
        return None
    gib = 2**30
    return (
        f"one session per thread needs {count} sessions of about {per_session / gib:.2f} GiB "
        f"each ({need / gib:.2f} GiB), and {free / gib:.2f} GiB of memory is free: measure "
        "modes=['shared'] or lower concurrency."
    )


def _window(runs: list[Callable[[], object]], duration_ns: int) -> tuple[int, int, list[int]]:
    """Release one thread per runner at once; each issues requests until ``duration_ns`` has
    passed. Returns (completed, window_ns, latencies_ns)."""
    clock = time.perf_counter_ns
    start = threading.Barrier(len(runs) + 1)
    lats: list[list[int]] = [[] for _ in runs]
    ends = [0] * len(runs)
    errors: list[BaseException] = []
    deadline = [0]

    def worker(k: int) -> None:
        run, lat = runs[k], lats[k]
        start.wait()
        stop = deadline[0]
        try:
            t1 = clock()
            while t1 < stop:
                t0 = clock()
                run()
                t1 = clock()
                lat.append(t1 - t0)
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(err)
        ends[k] = clock()

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(len(runs))]
    for t in threads:
        t.start()
    begin = clock()
    deadline[0] = begin + duration_ns
    start.wait()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    every = [x for lat in lats for x in lat]
    return len(every), max(ends) - begin, every


def throughput(
    progress: Progress,
    job: ModelJob,
    *,
    concurrency: list[int],
    modes: list[str],
    rounds: int = 6,
    duration_s: float = 0.5,
    warmup_s: float = 0.2,
) -> ThroughputReply:
    """Time every (mode, concurrency) item for ``duration_s`` per round, in rounds (forward,
    then reversed, …); one unrecorded ``warmup_s`` window per item first. The per-thread mode
    builds as many sessions as the largest concurrency, refused when they would not fit."""
    model_path, model_name, config, feeds = job.model_path, job.model_name, job.config, job.feeds
    import psutil

    shared, report, _ = open_session(model_path, model_name, config)
    prepared = prepare_feeds(feeds)
    top = max(concurrency)
    own: list[Any] = []
    if "per_thread" in modes:
        key = (model_path, file_fingerprint(model_path), config)
        weights = sum(f.stat().st_size for f in model_files(model_path))
        per_session = max(SESSION_BYTES.get(key, 0), 2 * weights)
        why = sessions_fit(per_session, top, psutil.virtual_memory().available)
        if why is not None:
            raise SessionCreationError(f"{model_name!r}: {why}")
        for _ in range(top):
            check_fits(model_path, model_name)
            own.append(build_session(model_path, config, model_name=model_name)[0])
    io = config.io_binding
    runners = {
        "shared": [make_runner(shared, prepared, io) for _ in range(top)],
        "per_thread": [make_runner(s, prepared, io) for s in own],
    }
    items = [(m, c) for m in MODES if m in modes for c in concurrency]
    windows: list[Window] = []
    try:
        for mode, c in items:  # warm-up: every session runs, every item's threads once
            _window(runners[mode][:c], int(warmup_s * 1e9))
        for r in range(rounds):
            for k, (mode, c) in enumerate(items if r % 2 == 0 else items[::-1]):
                done, span, lat = _window(runners[mode][:c], int(duration_s * 1e9))
                sessions = 1 if mode == "shared" else len({id(s) for s in own[:c]})
                windows.append(Window(mode, c, r, done, span, lat, sessions))
                progress(r * len(items) + k + 1, rounds * len(items))
    except Exception as err:
        if isinstance(err, (FeedError, OrtlabError)):
            raise
        raise run_error(err, model_name, config, feeds) from err
    finally:
        release_after_reply(own, runners)
    return ThroughputReply(
        windows=windows, report=report, sessions_built=len(own), cpu_count=logical_cpus()
    )
