"""Entry point of the worker process (see ortlab.worker)."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import traceback
from multiprocessing.connection import Client


def _die_with_parent() -> None:
    """On Linux, get SIGTERM when the parent dies, so no worker outlives its kernel."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass
    parent = int(os.environ.get("ORTLAB_WORKER_PARENT", "0"))
    if parent and os.getppid() != parent:  # the parent is already gone
        sys.exit(0)


def _limit_memory() -> None:
    """ORTLAB_WORKER_MEMORY_MB caps the worker's address space: a model that would exhaust the
    machine's memory fails with MemoryError in the worker instead of summoning the OOM killer."""
    value = os.environ.get("ORTLAB_WORKER_MEMORY_MB")
    if value and sys.platform != "win32":
        import resource

        limit = int(value) * 1024 * 1024
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _preload() -> None:
    """Import onnxruntime and register the plugin EPs before saying ready: every real task
    needs them (~0.3 s), and a caller that started the worker early
    (``Worker.start_in_background``) is still busy. Only a head start: a failure here is met
    again, and reported, by the task that needs the module."""
    import contextlib

    with contextlib.suppress(Exception):
        import onnxruntime  # noqa: F401

        from ortlab.engine.plugins import registered

        registered()


def main() -> None:
    faulthandler.enable()
    # Ctrl-C and a notebook's interrupt reach the whole process group: the caller decides
    # (it cancels or stops this worker), so no half-finished task dies with a traceback here
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    _limit_memory()
    conn = Client(
        os.environ["ORTLAB_WORKER_ADDRESS"],
        authkey=bytes.fromhex(os.environ["ORTLAB_WORKER_AUTHKEY"]),
    )
    from ortlab.core.cache import private_cwd
    from ortlab.engine import (
        tasks,  # noqa: F401 - the tasks module, imported here
        tasks_timing,  # noqa: F401 - a Lab's first run times at once
    )
    from ortlab.engine.sessioncache import release_deferred
    from ortlab.engine.worker import resolve_task

    _preload()
    conn.send(("ready",))  # the parent's start() returns on this: calls are served from now

    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        if msg[0] != "call":
            break
        _, call_id, task, kwargs = msg

        def progress(done: int, total: int, call_id: int = call_id) -> None:
            conn.send(("progress", call_id, done, total))

        try:
            with private_cwd():  # ORT's tools write into the cwd: never the user's folder
                result = resolve_task(task)(progress=progress, **kwargs)
        except BaseException as err:  # noqa: BLE001 - every error goes back to the caller
            tb = traceback.format_exc()
            try:
                conn.send(("error", call_id, err, tb))
            except Exception:  # noqa: BLE001 - unpicklable exception: send its text
                conn.send(("error", call_id, RuntimeError(f"{type(err).__name__}: {err}"), tb))
            release_deferred()
            continue
        conn.send(("result", call_id, result))
        del result
        release_deferred()  # after the reply: the caller does not wait for ORT's teardown


if __name__ == "__main__":
    main()
