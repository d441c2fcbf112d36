"""The Lab's jobs: one at a time, on a background thread in a live notebook (the notebook never
freezes) or in the caller's thread when synchronous (scripts, tests, headless runs). Each job
runs inside ``Worker.cancel_on(flag)`` (Cancel stops the worker call in flight and every step
after it), says where it is on the progress bar above the tabs and, for a tab's job, on that
tab's status line (:class:`TabStatus`), and ends with its error shown: in its tab for a tab's
job (above the tabs only a line that points there), above the tabs for a run. ``last_error``
keeps the exception of the last job (None when it succeeded); :meth:`Jobs.wait` blocks until
no job is in flight.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from ortlab.core.errors import OrtlabError, WorkerCancelledError
from ortlab.views.html import esc
from ortlab.views.lab.status import TabStatus, error_html

if TYPE_CHECKING:
    from ortlab.views.lab.controls import LabControls

__all__ = ["Jobs"]


class Jobs:
    """The jobs of one Lab. ``controls`` holds the Run and Cancel buttons, the progress bar and
    the error box above the tabs; ``statuses`` each job tab's status line; ``hint(err)`` adds
    what the Lab knows about an error (the dims it guessed); ``cancel_on(flag)`` is the
    worker's context in which a set flag stops the call in flight."""

    def __init__(
        self,
        sync: bool,
        controls: LabControls,
        statuses: dict[str, TabStatus],
        hint: Callable[[Exception], str],
        cancel_on: Callable[[threading.Event], AbstractContextManager[object]],
    ) -> None:
        self.sync = sync
        self.controls = controls
        self.statuses = statuses
        self.hint = hint
        self.cancel_on = cancel_on
        self.thread: threading.Thread | None = None
        self.cancelled = threading.Event()
        """Set by Cancel: the worker call in flight stops, and the job's next step."""
        self.active: TabStatus | None = None
        """The status line of the tab whose job runs now (None for a run)."""
        self.last_error: BaseException | None = None
        for status in statuses.values():
            status.cancel_button.on_click(lambda _: self.cancel())

    def start(self, job: Callable[[], object], kept: bool, tab: str = "", what: str = "") -> None:
        """Run ``job`` (guarded), after cancelling the one in flight. ``kept``: there are
        previous results the job would replace (a failure says they are kept); ``tab`` the tab
        whose status line follows it, ``what`` its name there ("the doctor")."""
        if self.thread is not None and self.thread.is_alive():
            self.cancel()
            self.thread.join(10)
        status = self.statuses.get(tab)
        if status is not None:  # says "running" at once, before the thread is scheduled
            status.start(what or tab, live=not self.sync)
        if self.sync:
            self.guarded(job, kept, status)
            return
        self.thread = threading.Thread(target=self.guarded, args=(job, kept, status), daemon=True)
        self.thread.start()

    def guarded(
        self, job: Callable[[], object], kept: bool = False, status: TabStatus | None = None
    ) -> None:
        """Run ``job`` and show how it ended; never raises (``last_error`` keeps the error)."""
        c = self.controls
        self.cancelled.clear()
        self.active = status
        c.cancel_button.disabled = False
        c.run_button.disabled = True
        try:
            with self.cancel_on(self.cancelled):
                job()
            self.last_error = None
            c.error.value = ""
            if status is not None:
                status.finish("done")
        except WorkerCancelledError as err:
            self.last_error = err
            said = "<i>cancelled" + (": previous results kept" if kept else "") + "</i>"
            c.error.value = said if status is None else ""
            if status is not None:
                status.finish("cancelled", said)
        except Exception as err:  # noqa: BLE001 - shown in the Lab, never lost in a log
            self.last_error = err
            detail = "" if isinstance(err, OrtlabError) else traceback.format_exc()
            shown = error_html(err, self.hint(err), detail, kept)
            if status is None:
                c.error.value = shown
            else:  # the error where the user looks; above the tabs, where to find it
                status.finish("failed", shown)
                first = (str(err).splitlines() or [""])[0]
                c.error.value = (
                    f'<div class="ortlab-warn" style="color:#a40">{esc(status.what)} failed: '
                    f"<b>{esc(type(err).__name__)}</b>: {esc(first, 300)} (the error is in the "
                    f"{esc(status.tab)} tab)</div>"
                )
        finally:
            self.active = None
            c.cancel_button.disabled = True
            c.run_button.disabled = False
            c.progress.description = "idle"

    def cancel(self) -> None:
        """Stop the running job: the worker call in flight, and every step after it."""
        self.cancelled.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no job is in flight (a job that starts another, as Apply best starts a
        run, is waited for through both); False if ``timeout`` seconds passed first. Raises
        nothing: a failed job's error is shown and kept in ``last_error``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            t = self.thread
            if t is None or not t.is_alive() or t is threading.current_thread():
                return True
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            t.join(left)

    def step(self, what: str) -> None:
        """Between two steps of a job: stop here if Cancel was pressed; say the step on the
        job's tab."""
        if self.cancelled.is_set():
            raise WorkerCancelledError(f"Cancelled before {what}.")
        if self.active is not None:
            self.active.step(what)

    def announce(self, what: str) -> None:
        """A step, said on the progress bar above the tabs too."""
        self.step(what)
        self.controls.progress.description = what.removeprefix("the ")

    def progress(self, label: str) -> Callable[[int, int], None]:
        """A progress callback for ``label``: the bar above the tabs and the job's tab; its
        ``stage(name)`` makes the counts after it read as that stage's ('doctor: screen')."""
        bar, status = self.controls.progress, self.active
        said = [label]

        def update(done: int, total: int) -> None:
            bar.max = max(total, 1)
            bar.value = done
            bar.description = said[0]
            if status is not None:
                status.progress(said[0], done, total)

        def stage(name: str) -> None:  # a verb of stages (the doctor) names the one starting
            said[0] = f"{label}: {name}"

        update.stage = stage  # type: ignore[attr-defined]
        return update


def choose_sync(sync: bool | None, synchronous: bool | None = None) -> bool:
    """``Lab(sync=…)``, or its former name ``synchronous=``; neither given: ``ORTLAB_LAB_SYNC``
    ("1" or "0") if set, else synchronous outside a Jupyter kernel (a script's ``Lab(…)``
    returns after its first run, with its History row) and in the background inside one."""
    if sync is not None and synchronous is not None and sync != synchronous:
        raise OrtlabError(
            f"Lab(sync={sync}, synchronous={synchronous}): synchronous is the "
            "former name of sync; pass one of them."
        )
    given = sync if sync is not None else synchronous
    if given is not None:
        return bool(given)
    env = os.environ.get("ORTLAB_LAB_SYNC")
    if env in ("0", "1"):
        return env == "1"
    shell = sys.modules.get("IPython")
    ip = shell.get_ipython() if shell is not None else None
    return getattr(ip, "kernel", None) is None
