"""A job's status where the user looks: each tab that starts work (Optimization, Quantization,
Doctor, Limits, the Placement tab's what-if, the History comparison) shows, under its own
buttons, that the job started, its step and progress and the time since it started, then how
it ended (done in N s, cancelled, or failed, with the error in that tab).

The line is updated by the job's own step and progress callbacks (the worker sends progress
at most every 0.1 s, outside timed regions) and, in a live Lab, by a timer that ticks once a
second only while no callback came in the last second: a long silent step (building a
quantized variant) still counts its seconds, and nothing ticks beside a benchmark that is
reporting its runs.
"""

from __future__ import annotations

import threading
import time

import ipywidgets as w

from ortlab.views.html import esc

__all__ = ["TabStatus", "error_html", "guess_hint"]

_COLOURS = {"running": "#06c", "done": "#555", "failed": "#a40", "cancelled": "#555"}


def guess_hint(err: Exception, auto_dims: dict[str, int]) -> str:
    """For a run that failed at shapes ortlab guessed (any tab's verb): which dims were
    guessed and how to set them, unless the error says it already."""
    from ortlab.core.errors import RunError

    if not isinstance(err, RunError) or "guessed" in str(err) or not auto_dims:
        return ""
    guessed = "; ".join(f"{n}={v}" for n, v in auto_dims.items())
    return (
        f" These dims were chosen by ortlab ({guessed}), not given: type the model's real "
        "sizes in the dims box (or Lab(model, dims=…))."
    )


def error_html(err: BaseException, hint: str, detail: str, kept: bool) -> str:
    """An error as the Lab shows it: its type and message, the hint, the traceback (for
    errors that are not ortlab's own), and whether the previous results are kept."""
    return (
        f'<div class="ortlab-warn" style="color:#a40"><b>{esc(type(err).__name__)}</b>: '
        f"{esc(err, 4000)}{esc(hint)}</div><pre>{esc(detail, 8000)}</pre>"
        + ("<div>Previous results are kept.</div>" if kept else "")
    )


class TabStatus:
    """One tab's status line and error box (``box`` is shown under the tab's buttons).

    ``state`` is 'idle', 'running', 'done', 'failed' or 'cancelled'; ``text`` what the line
    says; ``elapsed_s`` the seconds the last job ran (so far, while it runs)."""

    def __init__(self, tab: str) -> None:
        self.tab = tab
        self.line = w.HTML()
        self.line.add_class("ortlab-status")
        self.error = w.HTML()
        self.error.add_class("ortlab-error")
        self.cancel_button = w.Button(
            description="Cancel", layout=w.Layout(width="auto", display="none")
        )
        self.box = w.VBox([w.HBox([self.line, self.cancel_button]), self.error])
        self.state = "idle"
        self.what = ""
        self._step = ""
        self._count = ""
        self._started = self._ended = 0.0
        self._last_update = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None

    @property
    def text(self) -> str:
        """What the status line says now, as plain text."""
        secs = f"{self.elapsed_s:.0f} s"
        if self.state == "running":
            step = f" · {self._step}" if self._step and self._step != self.what else ""
            count = f" · {self._count}" if self._count else ""
            return f"running {self.what}… {secs}{step}{count}"
        if self.state == "done":
            return f"{self.what}: done in {secs}"
        if self.state == "failed":
            return f"{self.what}: failed after {secs} (the error is below)"
        if self.state == "cancelled":
            return f"{self.what}: cancelled after {secs}"
        return ""

    @property
    def elapsed_s(self) -> float:
        if self.state == "idle":
            return 0.0
        end = time.perf_counter() if self.state == "running" else self._ended
        return end - self._started

    def start(self, what: str, *, live: bool) -> None:
        """A job starts: say so now; ``live``: a timer counts its seconds while it is silent
        (not in a synchronous Lab, where nobody sees the line until the job returns)."""
        self._stop.set()  # the previous job's timer, if any
        with self._lock:
            self.state, self.what, self._step, self._count = "running", what, "", ""
            self._started = time.perf_counter()
            self.error.value = ""
        self._render()
        if live:
            self._stop = stop = threading.Event()
            self._timer = threading.Thread(
                target=self._tick, args=(stop,), daemon=True, name=f"ortlab-status-{self.tab}"
            )
            self._timer.start()

    def step(self, text: str) -> None:
        """The job's step ("building static QDQ"); clears the count of the previous step."""
        if self.state != "running":
            return
        self._step, self._count = text.removeprefix("the "), ""
        self._render()

    def progress(self, label: str, done: int, total: int) -> None:
        """The job's progress callback: ``done`` of ``total`` in ``label``."""
        if self.state != "running":
            return
        named = label and label.removeprefix("the ") not in self.what
        self._count = f"{label} {done}/{total}" if named else f"step {done}/{total}"
        self._render()

    def finish(self, state: str, error: str = "") -> None:
        """The job ended: 'done', 'failed' (``error`` is the error's HTML) or 'cancelled'."""
        self._stop.set()
        with self._lock:
            self._ended = time.perf_counter()
            self.state = state
            self.error.value = error
        self._render()

    def _render(self) -> None:
        with self._lock:
            self._last_update = time.perf_counter()
            colour = _COLOURS.get(self.state, "#555")
            text = self.text
            self.line.value = f"<span style='color:{colour}'>{esc(text)}</span>" if text else ""
            self.cancel_button.layout.display = "" if self.state == "running" else "none"

    def _tick(self, stop: threading.Event) -> None:
        while not stop.wait(1.0):
            if time.perf_counter() - self._last_update >= 0.95:
                self._render()

    def __repr__(self) -> str:
        return f"<TabStatus {self.tab}: {self.text or 'idle'}>"

    def _repr_html_(self) -> str:
        return str(self.line.value) + str(self.error.value)
