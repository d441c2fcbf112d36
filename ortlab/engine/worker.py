"""Worker isolation: ORT runs in a child process, so the user's kernel survives anything.

A model that segfaults or aborts ORT, exhausts memory or hangs takes down only the worker; the
caller gets a :class:`WorkerCrashedError` / :class:`WorkerTimeoutError` naming the model and the
config, and the next call starts a fresh worker. Timing loops run inside the worker, so
inter-process traffic never lands in a measured time.

We start the child with ``subprocess`` (``python -m ortlab.engine._worker_main``) instead of
``multiprocessing``'s spawn, which re-imports the user's ``__main__`` and breaks scripts without
an ``if __name__ == "__main__"`` guard. Messages travel over a ``multiprocessing.connection``
socket with a random authkey; the child's stdout/stderr go to a log file whose tail explains a
crash (faulthandler writes the Python stack of a segfault there).
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection, Listener
from pathlib import Path
from typing import Any, TypeVar, cast

from ortlab.core import cache, gcpause
from ortlab.core.cache import private_cwd
from ortlab.core.errors import (
    OrtlabError,
    WorkerCancelledError,
    WorkerCrashedError,
    WorkerError,
    WorkerTimeoutError,
)
from ortlab.core.run import Progress
from ortlab.engine.children import child_env

__all__ = [
    "InProcessWorker",
    "Worker",
    "get_worker",
    "in_worker",
    "resolve_task",
    "set_isolation",
    "task_name",
]

_START_TIMEOUT_S = 60.0

R = TypeVar("R")

_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ortlab-spawn")
"""The one thread that starts worker processes. The worker asks Linux to end it when its
parent dies (PR_SET_PDEATHSIG), and Linux means the parent *thread*: a worker started from a
Lab job's thread, which ends with the job, was killed after every run and started afresh by
the next (~0.35 s each time). This thread lives as long as the process."""


def resolve_task(task: str) -> Callable[..., object]:
    """``'profile'`` -> ortlab.engine.tasks.profile; ``'pkg.mod:func'`` -> that function."""
    import importlib

    module, _, func = task.rpartition(":") if ":" in task else ("ortlab.engine.tasks", ":", task)
    return getattr(importlib.import_module(module), func)  # type: ignore[no-any-return]


class InProcessWorker:
    """Runs tasks in the calling process: for debugging, no isolation at all."""

    isolated = False

    def call(
        self,
        task: str,
        kwargs: Mapping[str, object],
        *,
        timeout: float | None = None,  # noqa: ARG002 - same signature as Worker.call
        progress: Progress | None = None,
        context: str = "",  # noqa: ARG002
    ) -> Any:

        from ortlab.engine.sessioncache import release_deferred

        try:
            # the worker's work, done here: a Lab's hold on the collector lifted as if waiting
            with private_cwd(), gcpause.waiting():  # ORT's tools write into the cwd
                return resolve_task(task)(progress=progress or (lambda _d, _t: None), **kwargs)
        finally:
            release_deferred()  # in-process, the caller waits for the teardown too

    def cancel(self) -> None:
        """Nothing to cancel in-process."""

    @contextlib.contextmanager
    def cancel_on(self, event: threading.Event) -> Iterator[None]:  # noqa: ARG002
        """In-process calls cannot be stopped; jobs still check ``event`` between steps."""
        yield

    def stop(self) -> None:
        """Nothing to stop in-process."""

    def start_in_background(self) -> None:
        """Nothing to start in-process."""

    ready = True
    """Always: there is no process to wait for."""

    @property
    def pid(self) -> int:
        return os.getpid()


class Worker:
    """One long-lived child process running ORT tasks, one call at a time."""

    isolated = True

    def __init__(self, python: str | os.PathLike[str] | None = None) -> None:
        """``python``: the interpreter to run the worker with (another virtual environment's,
        holding another onnxruntime: ``engine.venvs.interpreter``); None, this process's own.
        Another interpreter gets only the package on its path, not this process's
        PYTHONPATH or user site-packages, so it imports its own onnxruntime."""
        self.python = str(python) if python is not None else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._log_path: Path | None = None
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._tokens: list[threading.Event] = []
        self._calls = 0

    # ------------------------------------------------------------------ lifecycle

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc and self._proc.poll() is None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def ready(self) -> bool:
        """Started and done preparing (onnxruntime and the tasks imported): a call now runs
        at once."""
        return self._conn is not None and self.alive()

    def start(self) -> None:
        if self.alive():
            return
        self._discard()
        authkey = secrets.token_bytes(32)
        family = "AF_PIPE" if sys.platform == "win32" else "AF_UNIX"
        listener = Listener(family=family, authkey=authkey)

        cache.sweep_tmp()  # what dead workers left: their logs, their folders
        fd, log = tempfile.mkstemp(
            prefix=f"worker-{os.getpid()}-", suffix=".log", dir=cache.subdir("tmp")
        )
        self._log_path = Path(log)
        env = child_env(
            ORTLAB_WORKER_ADDRESS=str(listener.address),
            ORTLAB_WORKER_AUTHKEY=authkey.hex(),
            ORTLAB_WORKER_PARENT=str(os.getpid()),
            only_package=self.python is not None,
        )
        with os.fdopen(fd, "wb") as logfile:
            self._proc = _spawner.submit(
                subprocess.Popen,
                [self.python or sys.executable, "-m", "ortlab.engine._worker_main"],
                stdin=subprocess.DEVNULL,
                stdout=logfile,
                stderr=subprocess.STDOUT,
                env=env,
                close_fds=True,
            ).result()
        deadline = time.monotonic() + _START_TIMEOUT_S  # for the whole start-up
        conn = self._accept(listener, deadline)
        self._await_ready(conn, deadline)
        self._conn = conn  # set once ready: ``ready`` reads it

    def start_in_background(self) -> None:
        """Start the process on a thread of its own and return at once: a caller with work of
        its own to do first (the Lab builds its widgets) overlaps the worker's start-up, and
        its first call finds onnxruntime already imported. A failure to start is not raised
        here: the first call starts the worker again and reports it."""

        def start() -> None:
            with self._lock, contextlib.suppress(WorkerError):
                self.start()

        threading.Thread(target=start, name="ortlab-worker-start", daemon=True).start()

    def _accept(self, listener: Listener, deadline: float) -> Connection:
        box: dict[str, Any] = {}

        def accept() -> None:
            try:
                box["conn"] = listener.accept()
            except Exception as err:  # noqa: BLE001 - reported below
                box["error"] = err

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        while thread.is_alive():
            thread.join(0.05)
            if self._proc is not None and self._proc.poll() is not None:
                break
            if time.monotonic() > deadline:
                break
        listener.close()
        if "conn" not in box:
            error = f": {box['error']}" if "error" in box else ""
            raise self._start_failed("did not start" + error)
        conn: Connection = box["conn"]
        return conn

    def _await_ready(self, conn: Connection, deadline: float) -> None:
        """Wait for the worker's "ready" (sent once it has imported onnxruntime and the
        tasks), or name how its start-up failed."""
        failure = "exited while importing onnxruntime"
        while not conn.poll(0.05):
            if self._proc is None or self._proc.poll() is not None:
                break
            if time.monotonic() > deadline:
                failure = f"was not ready within {_START_TIMEOUT_S:g} s"
                break
        else:
            with contextlib.suppress(EOFError, OSError):
                if conn.recv() == ("ready",):
                    return
        conn.close()
        raise self._start_failed(failure)

    def _start_failed(self, what: str) -> WorkerError:
        """Kill the process; the error names what went wrong, with the tail of its output."""
        tail = self._log_tail()
        self._kill()
        self._discard()
        return WorkerError(
            f"The ortlab worker process {what}"
            + (f". Its output:\n{tail}" if tail else ".")
            + f" Check that `{self.python or 'python'} -m ortlab.engine._worker_main` can "
            "import onnxruntime."
        )

    def stop(self) -> None:
        """Ask the worker to exit; kill it if it does not within 2 s."""
        if self._conn is not None and self.alive():
            with contextlib.suppress(OSError, EOFError, BrokenPipeError):
                self._conn.send(("stop",))
            if self._proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(2)
        self._kill()
        self._discard()

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)

    def _discard(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
        self._conn = None
        if self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None
        self._proc = None

    def _log_tail(self, lines: int = 25) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        with contextlib.suppress(OSError):
            text = self._log_path.read_text(errors="replace")
            return "\n".join(text.strip().splitlines()[-lines:])
        return ""

    def cancel(self) -> None:
        """Cancel the running call (from another thread, e.g. a Cancel button)."""
        self._cancel.set()

    @contextlib.contextmanager
    def cancel_on(self, event: threading.Event) -> Iterator[None]:
        """Every call made inside the block stops once ``event`` is set, and a call that
        would start after it was set does not start: a job of several calls (the Lab's
        refresh) is cancelled whether the click lands during a call or between two. The
        per-call flag ``cancel()`` sets is cleared by each new call, so it cannot do that."""
        self._tokens.append(event)
        try:
            yield
        finally:
            self._tokens.remove(event)

    def _cancelled(self) -> bool:
        return self._cancel.is_set() or any(t.is_set() for t in self._tokens)

    # ------------------------------------------------------------------ calls

    def call(
        self,
        task: str,
        kwargs: Mapping[str, object],
        *,
        timeout: float | None = None,
        progress: Progress | None = None,
        context: str = "",
    ) -> Any:
        """Run ``task(**kwargs)`` in the worker and return its result (or raise its error)."""
        with self._lock:
            self._cancel.clear()
            if self._cancelled():  # a job's token set before this call: do not start it
                raise WorkerCancelledError(f"Cancelled {said(task)} {context} before it started.")
            with gcpause.waiting():  # the start-up (if any) is a wait for the worker too
                self.start()
            assert self._conn is not None
            self._calls += 1
            call_id = self._calls
            try:
                self._conn.send(("call", call_id, task, kwargs))
            except (OSError, EOFError) as err:
                raise self._crashed(context, task) from err
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                return self._wait(
                    call_id,
                    deadline=deadline,
                    progress=progress,
                    context=context,
                    task=task,
                    timeout=timeout,
                )
            except KeyboardInterrupt:
                self._kill()
                self._discard()
                raise

    def _wait(
        self,
        call_id: int,
        *,
        deadline: float | None,
        progress: Progress | None,
        context: str,
        task: str,
        timeout: float | None,
    ) -> Any:
        assert self._conn is not None and self._proc is not None
        while True:
            with gcpause.waiting():  # a Lab's hold on the collector lifted while it blocks
                ready = self._conn.poll(0.05)
            if ready:
                try:
                    msg = self._conn.recv()
                except (EOFError, OSError) as err:
                    raise self._crashed(context, task) from err
                kind = msg[0]
                if kind == "progress" and msg[1] == call_id:
                    if progress is not None:
                        progress(msg[2], msg[3])
                elif kind == "result" and msg[1] == call_id:
                    return msg[2]
                elif kind == "error" and msg[1] == call_id:
                    if isinstance(msg[2], MemoryError):
                        raise self._out_of_memory(context, task) from msg[2]
                    raise _reraise(msg[2], msg[3])
                continue
            if self._proc.poll() is not None:
                raise self._crashed(context, task)
            if self._cancelled():
                self._kill()
                self._discard()
                raise WorkerCancelledError(
                    f"Cancelled {said(task)} {context}; the worker was stopped and a fresh one "
                    "will serve the next call."
                )
            if deadline is not None and time.monotonic() > deadline:
                self._kill()
                self._discard()
                raise WorkerTimeoutError(
                    f"{said(task)} {context} did not finish within {timeout:.3g} s; the worker was "
                    "stopped (the model may hang ORT, or need a longer timeout=).",
                    timeout_s=timeout,
                )

    def _out_of_memory(self, context: str, task: str) -> WorkerCrashedError:
        """A MemoryError inside the worker: its heap may be half-allocated, so replace it."""
        self._kill()
        self._discard()
        limit = os.environ.get("ORTLAB_WORKER_MEMORY_MB")
        return WorkerCrashedError(
            f"The ortlab worker ran out of memory during {said(task)} {context}"
            + (f" (its limit, ORTLAB_WORKER_MEMORY_MB, is {limit} MB)" if limit else "")
            + ". Your Python session is fine; the next call starts a fresh worker. Use smaller "
            "inputs (dims, batch size), a lighter model variant, or raise the limit."
        )

    def _crashed(self, context: str, task: str) -> WorkerCrashedError:
        rc = None
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                rc = self._proc.wait(2)
        how = _describe_exit(rc)
        tail = self._log_tail()
        self._kill()
        self._discard()
        if rc == -signal.SIGKILL:  # not a crash: the OS (its out-of-memory killer, most often)
            import psutil

            free = psutil.virtual_memory().available / 2**30
            cause = (
                "The OS killed it (SIGKILL), most likely for memory: this model, config and "
                f"inputs need more than was free ({free:.1f} GiB is free now). Use smaller "
                "dims or feeds, fewer samples (limit=, calibration_size=), a smaller "
                "batch, or run it on a machine with more memory."
            )
        else:
            cause = (
                "This is a crash inside onnxruntime (or a custom-op library) on this model and "
                "config; try another provider or optimization level to find the trigger."
            )
        return WorkerCrashedError(
            f"The ortlab worker died during {said(task)} {context}: {how}. Your Python session is "
            f"fine; the next call starts a fresh worker. {cause}"
            + (f"\nWorker output (last lines):\n{tail}" if tail else "")
        )


def _describe_exit(rc: int | None) -> str:
    if rc is None:
        return "it stopped answering"
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        extra = {
            "SIGSEGV": " (segmentation fault)",
            "SIGABRT": " (abort)",
            "SIGKILL": " (killed, often by the out-of-memory killer)",
            "SIGBUS": " (bus error)",
        }.get(name, "")
        return f"killed by {name}{extra}"
    return f"exited with code {rc}"


def _reraise(err: BaseException, worker_tb: str) -> BaseException:
    note = f"(raised in the ortlab worker)\n{worker_tb.rstrip()}"
    if isinstance(err, OrtlabError):
        return err
    if hasattr(err, "add_note"):
        err.add_note(note)
    return err


_default: Worker | InProcessWorker | None = None
_isolation = os.environ.get("ORTLAB_WORKER", "process")


def set_isolation(mode: str) -> None:
    """'process' (default: ORT runs in a worker process) or 'inprocess' (for debugging)."""
    global _default, _isolation  # noqa: PLW0603 - one default worker per process, by design
    if mode not in ("process", "inprocess"):
        raise ValueError(f"isolation must be 'process' or 'inprocess', not {mode!r}")
    if _default is not None and mode != _isolation:
        _default.stop()
        _default = None
    _isolation = mode


def said(task: str) -> str:
    """A task as a message names it: ``footprint``, not ``ortlab.engine.tasks_memory:footprint``."""
    return task.rpartition(":")[2] or task


def task_name(task: str | Callable[..., object]) -> str:
    """The worker's name for a task function: ``module:function``."""
    return task if isinstance(task, str) else f"{task.__module__}:{task.__qualname__}"


def in_worker(
    task: Callable[..., R], kwargs: Mapping[str, object], *, timeout: float, context: str
) -> R:
    """``task(**kwargs)`` where ORT runs: in the worker, or in place when this process is
    ortlab's worker or one of its children (ORTLAB_CHILD=1) already. ``task`` is the task
    function or its ``module:function`` name."""
    name = task_name(task)
    if os.environ.get("ORTLAB_CHILD") == "1":
        return cast("R", resolve_task(name)(progress=lambda _d, _t: None, **kwargs))
    return cast("R", get_worker().call(name, kwargs, timeout=timeout, context=context))


def get_worker() -> Worker | InProcessWorker:
    chosen = _using.get()
    if chosen is not None:
        return chosen
    global _default  # noqa: PLW0603 - one default worker per process, by design
    if _default is None:
        _default = InProcessWorker() if _isolation == "inprocess" else Worker()
    return _default


_using: contextvars.ContextVar[Worker | None] = contextvars.ContextVar("using", default=None)
"""The worker :func:`using` put in place for the calling context (a thread or task of its
own, such as a Lab's job, keeps the default worker)."""


@contextlib.contextmanager
def using(worker: Worker) -> Iterator[None]:
    """Every task of the calling context (a verb's, onnxruntime's facts) runs in ``worker``
    meanwhile: another environment's, holding another onnxruntime (``ortlab run
    --onnxruntime``). Other threads keep the default worker, which is kept, not stopped, and
    serves again after."""
    token = _using.set(worker)
    try:
        yield
    finally:
        _using.reset(token)


def serving() -> str:
    """Which interpreter serves the calling context's tasks: another environment's Python, or
    '' for this one's (keys what is measured once per onnxruntime: its providers, limits)."""
    worker = _using.get()
    return (worker.python or "") if worker is not None else ""


@atexit.register
def _shutdown() -> None:
    if _default is not None:
        _default.stop()
