"""What dead workers leave in the cache's tmp/ is swept when a worker starts (issue 48 item 6):
a clean log whose parent is gone goes, a failure's log stays for a post-mortem (the newest
five), a live parent's log and fresh folders are never touched; and a worker ignores the
interrupt that reaches its process group (its caller decides), so no traceback is left."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from ortlab.core import cache


def _dead_pid() -> int:
    pid = 4_000_000
    while psutil.pid_exists(pid):
        pid += 1
    return pid


def test_sweep_keeps_failures_and_the_living(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORTLAB_CACHE_DIR", str(tmp_path))
    tmp = cache.subdir("tmp")
    dead = _dead_pid()
    clean = tmp / f"worker-{dead}-clean.log"
    clean.write_text("ORT's verbose lines\n")
    failures = []
    for i in range(7):
        f = tmp / f"worker-{dead}-fail{i}.log"
        f.write_text("Traceback (most recent call last):\n  ...\nRuntimeError: boom\n")
        os.utime(f, (time.time() - 100 + i, time.time() - 100 + i))
        failures.append(f)
    mine = tmp / f"worker-{os.getpid()}-live.log"
    mine.write_text("Traceback (most recent call last):\n")
    fresh, stale = tmp / "cwd-fresh", tmp / "cwd-stale"
    fresh.mkdir()
    stale.mkdir()
    old = time.time() - cache.STALE_TMP_S - 60
    os.utime(stale, (old, old))
    cache.sweep_tmp()
    assert not clean.exists()
    kept = [f for f in failures if f.exists()]
    assert kept == failures[-cache.KEEP_FAILED_LOGS :]  # the newest failures
    assert mine.exists() and fresh.exists() and not stale.exists()


def test_a_worker_ignores_the_group_interrupt() -> None:
    """SIGINT to the worker (as a notebook interrupt reaches the process group) leaves it
    serving calls."""
    from ortlab.engine.worker import Worker

    w = Worker()
    try:
        w.call("ping", {})
        assert w.pid is not None
        os.kill(w.pid, signal.SIGINT)
        time.sleep(0.3)
        assert w.alive()
        assert w.call("ping", {}) is not None
    finally:
        w.stop()
