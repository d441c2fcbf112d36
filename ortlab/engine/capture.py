"""Capture what ORT prints, at the file-descriptor level.

ORT logs from C++ straight to fd 2, and its Python layer ``print()``s the "EP Error" block to
stdout; ``contextlib.redirect_stderr`` catches neither. We point fds 1 and 2 at one temporary
file (keeping the order of lines) and swap ``sys.stdout``/``sys.stderr`` for the Python side,
so nothing lands in the user's cell or in the Jupyter server's terminal uncounted.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["Captured", "capture_output", "strip_ansi"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


@dataclass
class Captured:
    text: str = ""
    """Everything written to fds 1/2 and sys.stdout/sys.stderr, ANSI colours removed."""
    warnings: list[str] = field(default_factory=list)
    """Python warnings raised inside the block (ORT's 'provider not available' UserWarning)."""

    def lines(self) -> list[str]:
        return [ln for ln in self.text.splitlines() if ln.strip()]


def _fd_ok(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


@contextlib.contextmanager
def capture_output() -> Iterator[Captured]:
    box = Captured()
    fds = [fd for fd in (1, 2) if _fd_ok(fd)]
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = {fd: os.dup(fd) for fd in fds}
    sink = tempfile.TemporaryFile()  # noqa: SIM115 - must outlive the dup2 swap; closed below
    py_sink = io.StringIO()
    caught: list[warnings.WarningMessage] = []
    try:
        for fd in fds:
            os.dup2(sink.fileno(), fd)
        with (
            warnings.catch_warnings(record=True) as recorded,
            contextlib.redirect_stdout(py_sink),
            contextlib.redirect_stderr(py_sink),
        ):
            warnings.simplefilter("always")
            try:
                yield box
            finally:
                caught.extend(recorded)
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        sink.seek(0)
        raw = sink.read().decode("utf-8", errors="replace")
        sink.close()
        box.text = strip_ansi(raw + py_sink.getvalue())
        box.warnings = [f"{w.category.__name__}: {w.message}" for w in caught]
